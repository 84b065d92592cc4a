//! `dma_copy`: one DMA transfer between HBM and SBUF (any direction, including HBM->HBM and
//! SBUF->SBUF), with a cast when the dtypes differ.

use super::base::{dma_dims, dma_rows_contiguous, short};
pub use super::dma_indirect::IndirectAp;
use super::op::Op;
use crate::access::{Ap, Ix};
use crate::builder::setters;
use crate::dtype::DType;
use crate::emit::trace::{Arg, Call};
use crate::error::ErrorKind;
use crate::hbm::{HbmDest, HbmSource, HbmView};
use crate::record::{DmaDims, Engine, Instr, MemKind, Opcode};
use crate::tile::{Tile, TileRef};

const API: &str = "nisa.dma_copy";

/// One side of a DMA transfer: an HBM view or an on-chip tile view.
#[derive(Clone, Debug)]
pub enum DmaEndpoint<'a> {
    /// A view of an HBM tensor.
    Hbm(HbmView),
    /// A view of an SBUF tile.
    Tile(TileRef<'a>),
    /// HBM rows chosen at run time by an SBUF index tile (NKI `.ap(.., vector_offset=idx)`):
    /// a gather source or a scatter destination.
    Indirect(IndirectAp<'a>),
}

/// What [`dma_copy`] can read from: any HBM view (inputs and outputs) or a tile (`&Tile`,
/// `TileRef`, `&Sbuf<..>`).
pub trait DmaSource<'a> {
    /// The endpoint to read.
    fn dma_source(self) -> DmaEndpoint<'a>;
}

/// What [`dma_copy`] can write to: views of kernel outputs, or tiles (`&Tile`, `TileRef`,
/// `&Sbuf<..>`).
#[diagnostic::on_unimplemented(
    message = "cannot dma_copy into `{Self}`: kernel inputs are immutable (NKI err_cannot_update_immutable_parameter)",
    label = "not a kernel output or a tile",
    note = "declare the kernel parameter as `&mut Hbm<T>` to make it an output, or copy into a tile"
)]
pub trait DmaTarget<'a> {
    /// The endpoint to write.
    fn dma_target(self) -> DmaEndpoint<'a>;
}

impl<'a, T: HbmSource> DmaSource<'a> for T {
    fn dma_source(self) -> DmaEndpoint<'a> {
        DmaEndpoint::Hbm(self.hbm_view())
    }
}
/// Implements [`DmaSource`] and [`DmaTarget`] for on-chip operand forms: each `[generics]
/// type => |x| view` makes the endpoint of the tile view `view` of `x`.
macro_rules! tile_endpoints {
    ($([$($gen:tt)*] $t:ty => |$x:ident| $e:expr;)*) => {$(
        impl<$($gen)*> $crate::isa::DmaSource<'a> for $t {
            fn dma_source(self) -> $crate::isa::DmaEndpoint<'a> {
                let $x = self;
                $crate::isa::DmaEndpoint::Tile($e)
            }
        }
        impl<$($gen)*> $crate::isa::DmaTarget<'a> for $t {
            fn dma_target(self) -> $crate::isa::DmaEndpoint<'a> {
                let $x = self;
                $crate::isa::DmaEndpoint::Tile($e)
            }
        }
    )*};
}
pub(crate) use tile_endpoints;

tile_endpoints! {
    ['a] &'a Tile => |t| t.view();
    ['a] TileRef<'a> => |t| t;
    ['a] &TileRef<'a> => |t| *t;
}

impl<'a> DmaSource<'a> for IndirectAp<'a> {
    fn dma_source(self) -> DmaEndpoint<'a> {
        DmaEndpoint::Indirect(self)
    }
}
impl<'a> DmaTarget<'a> for IndirectAp<'a> {
    fn dma_target(self) -> DmaEndpoint<'a> {
        DmaEndpoint::Indirect(self)
    }
}
impl<'a> DmaSource<'a> for &IndirectAp<'a> {
    fn dma_source(self) -> DmaEndpoint<'a> {
        DmaEndpoint::Indirect(self.clone())
    }
}
impl<'a> DmaTarget<'a> for &IndirectAp<'a> {
    fn dma_target(self) -> DmaEndpoint<'a> {
        DmaEndpoint::Indirect(self.clone())
    }
}

impl<'a, T: HbmDest> DmaTarget<'a> for T {
    fn dma_target(self) -> DmaEndpoint<'a> {
        DmaEndpoint::Hbm(self.hbm_dest())
    }
}

impl<'a> DmaEndpoint<'a> {
    /// The endpoint of anything a DMA reads (an HBM view, a tile or view): the sources of
    /// [`dma_compute`], e.g. `[DmaEndpoint::of(&acc), DmaEndpoint::of(x.slice(..))]`.
    pub fn of(src: impl DmaSource<'a>) -> DmaEndpoint<'a> {
        src.dma_source()
    }
    fn mem(&self) -> MemKind {
        match self {
            DmaEndpoint::Hbm(_) | DmaEndpoint::Indirect(_) => MemKind::Hbm,
            DmaEndpoint::Tile(t) => t.mem(),
        }
    }
    pub(super) fn shape(&self) -> &[usize] {
        match self {
            DmaEndpoint::Hbm(v) => v.shape(),
            DmaEndpoint::Tile(t) => t.shape(),
            DmaEndpoint::Indirect(i) => i.shape(),
        }
    }
    fn numel(&self) -> usize {
        self.shape().iter().product()
    }
    fn elem_size(&self) -> usize {
        self.dtype().size()
    }
    pub(super) fn dtype(&self) -> crate::dtype::DType {
        match self {
            DmaEndpoint::Hbm(v) => v.dtype(),
            DmaEndpoint::Tile(t) => t.dtype(),
            DmaEndpoint::Indirect(i) => i.dtype(),
        }
    }
    /// Length of the innermost contiguous run in elements.
    fn run(&self) -> usize {
        match self {
            DmaEndpoint::Hbm(v) => v.ap.contiguous_run().min(v.ap.shape.numel()),
            DmaEndpoint::Tile(t) => t.ap.contiguous_run().min(t.free_size().max(1)),
            // One row at most: the rows are not adjacent in general.
            DmaEndpoint::Indirect(i) => i.rows.ap.contiguous_run().min(i.row_len()),
        }
    }
    pub(super) fn describe(&self) -> String {
        match self {
            DmaEndpoint::Hbm(v) => v.describe(),
            DmaEndpoint::Tile(t) => t.describe(),
            DmaEndpoint::Indirect(i) => i.describe(),
        }
    }
    pub(super) fn region(&self) -> crate::record::Region {
        match self {
            DmaEndpoint::Hbm(v) => v.region(),
            DmaEndpoint::Tile(t) => t.region(),
            DmaEndpoint::Indirect(i) => i.region(),
        }
    }
    /// The HBM view a record describes this endpoint by (for an indirect one, its rows as if
    /// the indices were `0..P`: the same shape, bytes and runs).
    fn hbm(&self) -> Option<&HbmView> {
        match self {
            DmaEndpoint::Hbm(v) => Some(v),
            DmaEndpoint::Indirect(i) => Some(&i.rows),
            DmaEndpoint::Tile(_) => None,
        }
    }
}

/// How a DMA's descriptors are generated (NKI `nki.isa.dge_mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DgeMode {
    /// Let the compiler decide (NKI's default).
    #[default]
    Unknown,
    /// No DGE: the runtime writes the descriptors into HBM before the kernel runs.
    None,
    /// Software DGE: GpSimdE generates the descriptors when the instruction runs.
    Swdge,
    /// Hardware DGE: the Sync or Scalar engine's sequencer drives the DGE block.
    Hwdge,
}

/// What an out-of-bounds index of an indirect DMA does (NKI `nki.isa.oob_mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OobMode {
    /// An error naming the op, the tensor, the index and the line (NKI's default).
    #[default]
    Error,
    /// The element is skipped (a gather leaves the destination element as it was).
    Skip,
}

/// The keyword options of [`dma_copy`] (and the rest of the DMA family): `dge_mode`,
/// `oob_mode`, the engine that triggers a hardware-DGE transfer, and the QoS `priority`.
///
/// ```
/// use nki_core::nisa::{DgeMode, DmaOpts, Engine};
/// use nki_core::prelude::*;
///
/// let a = Hbm::from_vec(&[2, 4], (0..8).map(|i| i as f32).collect()).unwrap();
/// let mut b = Hbm::<f32>::zeros([2, 4]);
/// let out = b.as_output();
/// Launch::new(1)
///     .run(|| {
///         let t = nl::ndarray(&[2, 4], DType::F32, MemKind::Sbuf);
///         // hardware descriptor generation, triggered from the Scalar Engine's queue
///         let opts = DmaOpts::new().dge_mode(DgeMode::Hwdge).engine(Engine::Scalar);
///         nisa::dma_copy(&t, &a, opts);
///         nisa::dma_copy(&out, &t, None);
///     })
///     .unwrap();
/// assert_eq!(b.to_vec().unwrap(), a.to_vec().unwrap());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaOpts {
    /// Descriptor generation.
    pub dge_mode: DgeMode,
    /// Out-of-bounds handling of indirect indices.
    pub oob_mode: OobMode,
    /// The engine whose queue issues the transfer: Sync or Scalar for hardware DGE, GpSimd for
    /// software DGE; `None` lets the DGE mode decide.
    pub engine: Option<Engine>,
    /// DMA QoS class 0..=3 (NeuronCore-v4); `None` is the default class.
    pub priority: Option<u8>,
    /// `dma_compute`'s promise that the rows a `vector_offset` names are distinct (NKI's
    /// `unique_indices`, default true; 0.7 supports only true with a `vector_offset`).
    pub unique_indices: bool,
}

impl Default for DmaOpts {
    fn default() -> Self {
        DmaOpts {
            dge_mode: DgeMode::Unknown,
            oob_mode: OobMode::Error,
            engine: None,
            priority: None,
            unique_indices: true,
        }
    }
}

impl DmaOpts {
    /// NKI's defaults.
    pub fn new() -> Self {
        Self::default()
    }
    setters! {
        /// Sets the DGE mode.
        dge_mode(mode: DgeMode) => dge_mode = mode;
        /// Sets the out-of-bounds mode.
        oob_mode(mode: OobMode) => oob_mode = mode;
        /// Sets the engine that issues the transfer.
        engine(engine: Engine) => engine = Some(engine);
        /// Sets the QoS priority (0..=3).
        priority(priority: u8) => priority = Some(priority);
        /// Sets `dma_compute`'s `unique_indices`.
        unique_indices(unique: bool) => unique_indices = unique;
    }
}

/// What is wrong with DMA QoS priority `p` for op `ins` (its range, its target), if anything.
pub(super) fn priority_problem(ins: &Op, p: u8) -> Option<String> {
    if p > 3 {
        Some("out of range: DMA QoS classes are 0..=3".to_string())
    } else if ins.target() != crate::target::Target::Trn3 {
        Some(format!(
            "not supported on {:?}: DMA QoS priority needs NeuronCore-v4 (trn3)",
            ins.target()
        ))
    } else {
        None
    }
}

/// The rules of a DMA's options, as errors of op `ins`.
pub(super) fn check_opts(ins: &Op, opts: &DmaOpts, src: &DmaEndpoint, dst: &DmaEndpoint) {
    if let Some(p) = opts.priority {
        let why = if let Some(why) = priority_problem(ins, p) {
            Some(why)
        } else if opts.dge_mode == DgeMode::None {
            Some("not supported with dge_mode=none (the runtime's descriptors)".to_string())
        } else {
            None
        };
        if let Some(why) = why {
            ins.fail(
                ErrorKind::InvalidArgument,
                format!("priority {p} of '{}' is {why}", short(ins.api)),
            );
        }
    }
    if let Some(e) = opts.engine {
        // 0.7: the engine that triggers hardware DGE, only valid with dge_mode=hwdge.
        if opts.dge_mode != DgeMode::Hwdge || !matches!(e, Engine::Sync | Engine::Scalar) {
            ins.fail(
                ErrorKind::InvalidArgument,
                format!(
                    "'{}' with dge_mode={:?} cannot take engine {}: the engine option picks the \
                     engine that triggers hardware DGE (supported engines: sync, scalar; only \
                     with dge_mode=hwdge)",
                    short(ins.api),
                    opts.dge_mode,
                    e.name(),
                ),
            );
        }
    }
    if opts.dge_mode == DgeMode::Hwdge && ins.target() == crate::target::Target::Trn1 {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "'{}' with dge_mode=hwdge needs NeuronCore-v3 or later (trn2+); trn1 has no hardware DGE",
                short(ins.api)
            ),
        );
    }
    if opts.dge_mode == DgeMode::Hwdge && src.dtype() != dst.dtype() {
        ins.fail(
            ErrorKind::DType,
            format!(
                "'{}' with dge_mode=hwdge cannot cast: src {} is {} and dst {} is {}; use equal dtypes or another dge_mode",
                short(ins.api),
                src.describe(),
                src.dtype(),
                dst.describe(),
                dst.dtype()
            ),
        );
    }
}

/// Copies `src` into `dst` with one DMA transfer (NKI `nisa.dma_copy(dst, src, oob_mode,
/// dge_mode, engine, priority)`; `opts` `None` for NKI's defaults).
///
/// Either side is an HBM view or an SBUF tile view; both must hold the same number of elements
/// (they are matched in row-major order). A cast happens when the dtypes differ (DMA casts go
/// through fp32); hardware DGE cannot cast. PSUM is not reachable by DMA. HBM writes are
/// race-checked like `nl::store`: two program instances (or affine_range iterations) writing
/// one element is an error. Writing into a kernel input does not compile.
#[track_caller]
pub fn dma_copy<'a, 'b>(
    dst: impl DmaTarget<'a>,
    src: impl DmaSource<'b>,
    opts: impl Into<Option<DmaOpts>>,
) {
    let opts = opts.into().unwrap_or_default();
    let ins = Op::begin(API);
    let (dst, src) = (dst.dma_target(), src.dma_source());
    ins.trace(|| traced_copy(&dst, &src, &opts));
    // A dynamic access pattern's run-time counts cut the other side to the entries moved.
    let (dst, src) = narrow(&ins, dst, src);
    if !opts.unique_indices {
        ins.fail(
            ErrorKind::InvalidArgument,
            "'dma_copy' has no unique_indices option (it is dma_compute's); the rows of a \
             scatter are always distinct"
                .to_string(),
        );
    }
    transfer(&ins, dst, &[src], &opts);
}

/// The emit trace's call of `dma_copy(dst, src, opts)` (the defaults left out).
fn traced_copy(dst: &DmaEndpoint, src: &DmaEndpoint, opts: &DmaOpts) -> Call {
    use super::trace_args as ta;
    let endpoint = |e: &DmaEndpoint| match e {
        DmaEndpoint::Hbm(v) => ta::hbm(v),
        DmaEndpoint::Tile(t) => ta::tile(t),
        DmaEndpoint::Indirect(i) => {
            let mut a = ta::hbm(&i.rows);
            if let Arg::View(v) = &mut a {
                v.unprintable = Some("an indirect DMA view (ap_indirect / vector_select)");
            }
            a
        }
    };
    let dge = match opts.dge_mode {
        DgeMode::Unknown => None,
        DgeMode::None => Some("nisa.dge_mode.none"),
        DgeMode::Swdge => Some("nisa.dge_mode.swdge"),
        DgeMode::Hwdge => Some("nisa.dge_mode.hwdge"),
    };
    let oob = (opts.oob_mode == OobMode::Skip).then_some("nisa.oob_mode.skip");
    let constant = |c: Option<&str>| c.map(|c| Arg::Const(c.to_string()));
    Call::new(API)
        .arg("dst", endpoint(dst))
        .arg("src", endpoint(src))
        .opt("oob_mode", constant(oob))
        .opt("dge_mode", constant(dge))
        .opt("engine", opts.engine.map(ta::engine))
        .opt("priority", opts.priority.map(|p| Arg::Int(p.into())))
}

/// `dst = srcs[0] + srcs[1] + ...` computed by the DMA engines (NKI `nisa.dma_compute(dst,
/// srcs, reduce_op=nl.add)`): every source is read as fp32, the sum is rounded once to
/// `dst`'s dtype. Sources and `dst` are HBM views or SBUF tiles with the same number of
/// elements (matched in row-major order), at most 16 sources, each at an address known when
/// the kernel is traced (no `scalar_offset` or dynamic select; a `vector_offset` may index
/// one side); `reduce_op` must be `add` (as in 0.7, whose `scales` must all be 1.0, so none
/// are taken here). Of `opts`, only `unique_indices` applies (0.7's `dma_compute` has no
/// `dge_mode`, `oob_mode`, `engine` or `priority`: setting one is an error). A
/// read-modify-write names `dst`
/// among the sources: `dma_compute(out, &[out_view, tile.into()], ..)` is a scatter-add
/// into HBM, `dma_compute(&acc, &[acc.into(), hbm_view], ..)` a gather-add into SBUF. One
/// DMA instruction; HBM writes are race-checked like [`dma_copy`]'s.
#[track_caller]
pub fn dma_compute<'a, 'b>(
    dst: impl DmaTarget<'a>,
    srcs: &[DmaEndpoint<'b>],
    reduce_op: crate::math::AluOp,
    opts: impl Into<Option<DmaOpts>>,
) {
    let opts = opts.into().unwrap_or_default();
    let ins = Op::begin("nisa.dma_compute");
    if reduce_op != crate::math::AluOp::Add {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!("reduce_op '{reduce_op}' of 'dma_compute' is not supported: the DMA engines add (nl.add)"),
        );
    }
    if opts.dge_mode != DgeMode::Unknown
        || opts.oob_mode != OobMode::Error
        || opts.engine.is_some()
        || opts.priority.is_some()
    {
        ins.fail(
            ErrorKind::InvalidArgument,
            "'dma_compute' takes no dge_mode, oob_mode, engine or priority (0.7's dma_compute \
             has unique_indices only; an out-of-range vector_offset index is an error)"
                .to_string(),
        );
    }
    if srcs.is_empty() || srcs.len() > 16 {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!("'dma_compute' takes 1 to 16 sources, not {}", srcs.len()),
        );
    }
    let dst = dst.dma_target();
    // 0.7: every address is known when the kernel is compiled, unless a vector_offset
    // indexes it.
    for end in std::iter::once(&dst).chain(srcs) {
        if let Some(v) = end.hbm().filter(|v| v.register().is_some()) {
            ins.fail(
                ErrorKind::InvalidArgument,
                format!(
                    "'dma_compute' operand {} has a dynamic offset (a scalar_offset or a \
                     dynamic select): dma_compute's addresses must be known at compile time \
                     (only a vector_offset may index them)",
                    v.describe()
                ),
            );
        }
    }
    transfer(&ins, dst, srcs, &opts);
}

/// A DMA does not take an on-chip view with tensor indirection (`.indirect`, an operand of
/// the compute instructions); its own gather and scatter is `ap_indirect` / `vector_select`.
fn direct_endpoint(ins: &Op, what: &str, end: &DmaEndpoint) {
    if let DmaEndpoint::Tile(t) = end {
        if t.ind.is_some() {
            ins.fail(
                ErrorKind::InvalidArgument,
                format!(
                    "{what} {} of '{}' is an indirect view (tensor indirection), which the compute instructions take; a DMA gathers or scatters HBM rows with ap_indirect / vector_select",
                    t.describe(),
                    short(ins.api)
                ),
            );
        }
    }
}

/// The DMA builder: `dst = srcs[0]` (a copy: slots move untouched, a cast goes through fp32)
/// or, for several sources, `dst = sum(srcs)` in fp32.
fn transfer(ins: &Op, dst: DmaEndpoint, srcs: &[DmaEndpoint], opts: &DmaOpts) {
    let api = ins.api;
    for (what, end) in std::iter::once(("dst", &dst)).chain(srcs.iter().map(|s| ("src", s))) {
        direct_endpoint(ins, what, end);
        if end.mem() == MemKind::Psum {
            ins.fail(ErrorKind::WrongMemory, format!(
                    "expected operand '{what}' of '{}' to be in address space 'hbm|sbuf', but got a tile in 'psum' instead ({}): DMA engines cannot access psum",
                    short(api),
                    end.describe()
                ));
        }
    }
    for src in srcs {
        check_opts(ins, opts, src, &dst);
        if dst.numel() != src.numel() {
            ins.fail(
                ErrorKind::ShapeMismatch,
                format!(
                    "dst {} and src {} of '{}' have different numbers of elements ({} vs {})",
                    dst.describe(),
                    src.describe(),
                    short(api),
                    dst.numel(),
                    src.numel()
                ),
            );
        }
        // HBM accesses are tagged in every mode: estimate mode tracks races without values.
        if let DmaEndpoint::Hbm(v) = src {
            if v.oob.is_none() && !v.moves_nothing() {
                ins.track_load(v, api);
            }
        }
    }
    // A run-time count of 0 (a dynamic access pattern) moves nothing, as a skip does.
    let skip = dynamic_oob(ins, opts, &dst, srcs)
        || std::iter::once(&dst)
            .chain(srcs)
            .any(|e| e.hbm().is_some_and(HbmView::moves_nothing));
    if matches!(dst, DmaEndpoint::Indirect(_))
        || srcs.iter().any(|s| matches!(s, DmaEndpoint::Indirect(_)))
    {
        return transfer_indirect(ins, dst, srcs, opts);
    }
    let writer = match &dst {
        DmaEndpoint::Hbm(_) => Some(ins.hbm_writer()),
        _ => None,
    };
    let tile_out: Vec<&TileRef> = match &dst {
        DmaEndpoint::Tile(t) => vec![t],
        _ => Vec::new(),
    };
    descriptors(ins, opts, &dst, &srcs[0]);
    let read = |src: &DmaEndpoint| match src {
        DmaEndpoint::Hbm(v) => ins.check(v.gather(api)),
        DmaEndpoint::Tile(t) => t.gather_slots(api, ins.loc),
        DmaEndpoint::Indirect(_) => unreachable!("indirect transfers are built apart"),
    };
    ins.issue(
        &tile_out,
        || {
            if skip {
                return; // oob_mode=skip: no element moves, dst keeps its values
            }
            let vals = if let [src] = srcs {
                // Slots move untouched (bit-exact); a cast goes through fp32.
                let mut vals = read(src);
                src.dtype().cast_slots(dst.dtype(), &mut vals);
                vals
            } else {
                // The DMA engines' compute path: fp32 values, one rounding to dst's dtype.
                let mut sum = vec![0.0f32; dst.numel()];
                for src in srcs {
                    let mut v = read(src);
                    src.dtype().cast_slots(crate::dtype::DType::F32, &mut v);
                    sum.iter_mut().zip(&v).for_each(|(s, x)| *s += x);
                }
                crate::dtype::DType::F32.cast_slots(dst.dtype(), &mut sum);
                sum
            };
            match &dst {
                DmaEndpoint::Tile(t) => t.scatter_slots(vals),
                DmaEndpoint::Hbm(v) => {
                    let (wid, shared) = writer.as_ref().expect("writer set for HBM targets");
                    ins.check(crate::hbm::write::write(
                        v,
                        vals,
                        *wid,
                        shared,
                        (ins.api, ins.loc),
                    ));
                }
                DmaEndpoint::Indirect(_) => unreachable!("indirect transfers are built apart"),
            }
        },
        || {
            let mut r = dma_record(&dst, &srcs[0], ins);
            if srcs.len() > 1 {
                r.reads = srcs.iter().map(|s| s.region()).collect();
                r.alu = Some(crate::math::AluOp::Add);
            }
            r
        },
    );
    if !ins.executes() && !skip {
        if let (DmaEndpoint::Hbm(v), Some((wid, shared))) = (&dst, &writer) {
            ins.check(crate::hbm::write::track(
                v,
                *wid,
                shared,
                (ins.api, ins.loc),
            ));
        }
    }
}

/// The two sides of a DMA with the run-time counts of a dynamic access pattern
/// ([`HbmView::ap_dynamic`]) applied: the
/// side with counts keeps its counted entries and the other side, whose shape must be the
/// pattern's with each count at its maximum, is cut to the same entries. One side at most
/// takes run-time counts.
fn narrow<'a, 'b>(
    ins: &Op,
    dst: DmaEndpoint<'a>,
    src: DmaEndpoint<'b>,
) -> (DmaEndpoint<'a>, DmaEndpoint<'b>) {
    let counted = |e: &DmaEndpoint| match e {
        DmaEndpoint::Hbm(v) => v.counts.clone().filter(|c| !c.dims.is_empty()),
        _ => None,
    };
    match (counted(&dst), counted(&src)) {
        (None, None) => (dst, src),
        (Some(_), Some(_)) => ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "dst {} and src {} both have counts read at run time: one side of a DMA takes \
                 a dynamic count, the other gives the shape (at its maximum)",
                dst.describe(),
                src.describe()
            ),
        ),
        (Some(c), None) => cut(ins, &c, dst, src),
        (None, Some(c)) => {
            let (s, d) = cut(ins, &c, src, dst);
            (d, s)
        }
    }
}

/// [`narrow`] of the side `dynamic` with counts `c` and the other side `other`.
fn cut<'x, 'y>(
    ins: &Op,
    c: &crate::hbm::view::RunCounts,
    dynamic: DmaEndpoint<'x>,
    other: DmaEndpoint<'y>,
) -> (DmaEndpoint<'x>, DmaEndpoint<'y>) {
    let DmaEndpoint::Hbm(mut v) = dynamic else {
        unreachable!("run-time counts are on HBM views")
    };
    let mut declared = v.shape().to_vec();
    for &(d, _, max) in &c.dims {
        declared[d] = max;
    }
    if other.shape() != declared.as_slice() {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "{} has shape {:?}; the other side of a dynamic access pattern with run-time \
                 counts ({}) has the pattern's shape with each count at its maximum, {declared:?}",
                other.describe(),
                other.shape(),
                v.describe()
            ),
        );
    }
    let index: Vec<Ix> = (0..declared.len())
        .map(|d| Ix::Range {
            start: 0,
            end: c.dims.iter().find(|x| x.0 == d).map(|x| x.1.max(1)),
            step: 1,
        })
        .collect();
    let other = match other {
        DmaEndpoint::Hbm(h) => DmaEndpoint::Hbm(h.try_slice(index).unwrap_or_else(|e| {
            ins.fail(e.kind(), e.message().to_string());
        })),
        DmaEndpoint::Tile(t) => DmaEndpoint::Tile(t.slice(index)),
        DmaEndpoint::Indirect(i) => ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "{} is indirect (vector_offset): a DMA with a dynamic access pattern's run-time \
                 counts takes a plain view on its other side",
                i.describe()
            ),
        ),
    };
    v.counts = c.empty.then(|| {
        std::sync::Arc::new(crate::hbm::view::RunCounts {
            dims: Vec::new(),
            empty: true,
        })
    });
    (DmaEndpoint::Hbm(v), other)
}

/// A dynamic offset (`scalar_offset`, a tensor-index `select`) that moved an HBM side of a
/// DMA outside its tensor, checked when the DMA runs as NKI 0.7 does: under
/// `oob_mode=error` an [`ErrorKind::OutOfBounds`] error naming the op, both sides and the
/// offset; under `oob_mode=skip` true (the transfer is skipped, still issued and costed).
fn dynamic_oob(ins: &Op, opts: &DmaOpts, dst: &DmaEndpoint, srcs: &[DmaEndpoint]) -> bool {
    let sides = std::iter::once(("dst", dst)).chain(srcs.iter().map(|s| ("src", s)));
    let Some((what, why)) = sides
        .filter_map(|(what, end)| match end {
            DmaEndpoint::Hbm(v) => v.oob.as_ref().map(|why| (what, why)),
            _ => None,
        })
        .next()
    else {
        return false;
    };
    if opts.oob_mode == OobMode::Skip {
        return true;
    }
    ins.fail(
        ErrorKind::OutOfBounds,
        format!(
            "{what} of '{}' is out of bounds: {why}; dst {}, src {} (oob_mode=error; \
             oob_mode=skip skips the transfer)",
            short(ins.api),
            dst.describe(),
            srcs.iter()
                .map(|s| s.describe())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    )
}

/// With software or hardware DGE, the descriptor generation that precedes the transfer: one
/// record on the generating engine (GpSimdE for swdge; the Sync engine, or `opts.engine`, for
/// hwdge), costed by the target (`hwdge_ns`, GpSimd's start-up plus one cycle per
/// descriptor); the transfer, the next record, starts after it (the timing model's
/// dependency pass links the two, whatever address the allocation gives `dst`). `dge_mode`
/// none or unknown records nothing more (the compiler's choice is not public; the DMA costs
/// what it did before).
pub(super) fn descriptors(ins: &Op, opts: &DmaOpts, dst: &DmaEndpoint, src: &DmaEndpoint) {
    let engine = match opts.dge_mode {
        DgeMode::Swdge => Engine::GpSimd,
        DgeMode::Hwdge => opts.engine.unwrap_or(Engine::Sync),
        DgeMode::None | DgeMode::Unknown => return,
    };
    ins.issue(
        &[],
        || {},
        || {
            let r = dma_record(dst, src, ins);
            let d = r.dma.expect("a DMA record has DMA dimensions");
            let count = d.bytes.div_ceil(d.chunk_bytes.max(1));
            ins.record(engine, Opcode::DmaDescriptors)
                .size(r.partitions, count.min(u32::MAX as u64) as u32)
                .dtypes(r.in_dtype, r.out_dtype)
                .writes([dst.region()])
                .done()
        },
    );
}

/// The DMA record: bytes moved (counted on the HBM side when there is one, else the source),
/// the on-chip side's partitions, and the descriptor (contiguous run) size.
pub(super) fn dma_record(dst: &DmaEndpoint, src: &DmaEndpoint, ins: &Op) -> Instr {
    let chip = match (dst, src) {
        (DmaEndpoint::Tile(t), _) | (_, DmaEndpoint::Tile(t)) => Some(*t),
        _ => None,
    };
    let (partitions, start, free) = match chip {
        Some(t) => (t.partitions(), t.start_partition(), t.free_size()),
        None => {
            let last = src.shape().last().copied().unwrap_or(1).max(1);
            (src.numel() / last, 0, last)
        }
    };
    let run = src.run().min(dst.run()).max(1);
    let dims = match (dst.hbm(), src.hbm(), dst, src) {
        (Some(h), None, _, DmaEndpoint::Tile(t)) => {
            let mut d = dma_dims(h, t, false);
            d.chunk_bytes = d.chunk_bytes.min((dst.run() * dst.elem_size()) as u64);
            d
        }
        (None, Some(h), DmaEndpoint::Tile(t), _) => {
            let mut d = dma_dims(h, t, true);
            d.chunk_bytes = d.chunk_bytes.min((src.run() * src.elem_size()) as u64);
            d
        }
        _ => DmaDims {
            src: src.mem(),
            dst: dst.mem(),
            bytes: (src.numel() * src.elem_size()) as u64,
            partitions: partitions as u32,
            start_partition: start as u32,
            chunk_bytes: (run * src.elem_size()) as u64,
        },
    };
    let mut r = ins
        .record(Engine::Dma, Opcode::DmaCopy)
        .size(partitions as u32, free as u32)
        .dtypes(src.dtype(), dst.dtype())
        .contiguous([dst, src].iter().all(|end| match end {
            DmaEndpoint::Tile(t) => dma_rows_contiguous(t),
            DmaEndpoint::Hbm(_) | DmaEndpoint::Indirect(_) => true,
        }))
        .dma(dims)
        .reads([src.region()])
        .writes([dst.region()])
        .done();
    // A run-time count of 0 (a dynamic access pattern): no byte moves.
    if [src, dst]
        .iter()
        .any(|e| e.hbm().is_some_and(HbmView::moves_nothing))
    {
        if let Some(d) = r.dma.as_mut() {
            d.bytes = 0;
        }
    }
    // An offset read from a scalar register (`scalar_offset`): the DMA waits for its load.
    for end in [src, dst] {
        if let Some(reg) = end.hbm().and_then(HbmView::register) {
            r.reads.push(reg);
        }
    }
    r
}

/// What one indirect DMA does.
enum Form {
    /// `dst = src[idx]`.
    Gather,
    /// `dst[idx] = src`.
    Scatter,
    /// `dst = dst + src[idx]` (dma_compute, dst in SBUF).
    GatherAdd,
    /// `dst[idx] = dst[idx] + src` (dma_compute, dst in HBM).
    ScatterAdd,
}

/// The DMA builder for transfers with an indirect side (called by [`transfer`]
/// after the checks common to every DMA: no PSUM side, equal element counts, the options).
fn transfer_indirect(ins: &Op, dst: DmaEndpoint, srcs: &[DmaEndpoint], opts: &DmaOpts) {
    let api = ins.api;
    let name = short(api);
    if !matches!(opts.dge_mode, DgeMode::Unknown | DgeMode::Swdge)
        || opts.engine.is_some_and(|e| e != Engine::GpSimd)
    {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "'{name}' with a vector_offset gathers or scatters through software DGE \
                 (GpSimdE): dge_mode={:?}{} cannot; leave dge_mode unknown or use swdge",
                opts.dge_mode,
                opts.engine
                    .map(|e| format!(" with engine {}", e.name()))
                    .unwrap_or_default()
            ),
        );
    }
    let is_ind = |e: &DmaEndpoint| matches!(e, DmaEndpoint::Indirect(_));
    let (form, ind, other): (Form, &IndirectAp, &DmaEndpoint) = match (&dst, srcs) {
        (DmaEndpoint::Indirect(d), [s]) if !is_ind(s) => (Form::Scatter, d, s),
        (_, [DmaEndpoint::Indirect(s)]) if !is_ind(&dst) => (Form::Gather, s, &dst),
        (DmaEndpoint::Indirect(d), [a, b]) => match (a, b) {
            (DmaEndpoint::Indirect(x), t @ DmaEndpoint::Tile(_))
            | (t @ DmaEndpoint::Tile(_), DmaEndpoint::Indirect(x))
                if x.same_as(d) =>
            {
                (Form::ScatterAdd, d, t)
            }
            _ => compute_forms(ins),
        },
        (DmaEndpoint::Tile(d), [a, b]) => match (a, b) {
            (DmaEndpoint::Tile(t), DmaEndpoint::Indirect(x))
            | (DmaEndpoint::Indirect(x), DmaEndpoint::Tile(t))
                if std::ptr::eq(t.tile, d.tile) && t.ap == d.ap =>
            {
                (Form::GatherAdd, x, &dst)
            }
            _ => compute_forms(ins),
        },
        (_, [_]) => ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "'{name}' with a vector_offset on both sides ({} and {}) is not supported: one \
                 side gathers or scatters, the other is a plain tensor",
                dst.describe(),
                srcs[0].describe()
            ),
        ),
        _ => compute_forms(ins),
    };
    if ind.index.free_size() != 1 || ind.index.partitions() != ind.partitions() {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "vector_offset {} of {} in '{name}' must be of shape [{}, 1] (one row index per \
                 partition); a [p, n] index covering more rows is dma_transpose's gather form",
                ind.index.describe(),
                ind.describe(),
                ind.partitions()
            ),
        );
    }
    if !opts.unique_indices {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "'{name}' with a vector_offset needs unique_indices=true (NKI 0.7 does not \
                 support non-unique indices with vector_offset)"
            ),
        );
    }
    if matches!(form, Form::Scatter | Form::ScatterAdd) && !ind.writable {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "'{name}' cannot scatter into {}: it is a kernel input (immutable); declare \
                 the parameter as `&mut Hbm<T>` to update it",
                ind.describe()
            ),
        );
    }
    let p = ind.partitions();
    if other.shape().first() != Some(&p) {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "{} of '{name}' must have the {p} partitions of the indirect side {} as its \
                 first dimension (one row per index)",
                other.describe(),
                ind.describe()
            ),
        );
    }
    ins.operand("vector_offset", &ind.index);
    // Descriptors: software DGE on GpSimdE, one record before the transfer.
    let swdge = DmaOpts {
        dge_mode: DgeMode::Swdge,
        ..*opts
    };
    descriptors(ins, &swdge, &dst, &srcs[0]);
    let tile_out: Vec<&TileRef> = match &dst {
        DmaEndpoint::Tile(t) => vec![t],
        _ => Vec::new(),
    };
    let adds = matches!(form, Form::GatherAdd | Form::ScatterAdd);
    let writer = match form {
        Form::Scatter => Some(ins.hbm_writer()),
        Form::ScatterAdd => Some(ins.hbm_atomic_writer()),
        _ => match &dst {
            DmaEndpoint::Hbm(_) => Some(ins.hbm_writer()),
            _ => None,
        },
    };
    ins.issue(
        &tile_out,
        || {
            let scatter = matches!(form, Form::Scatter | Form::ScatterAdd);
            let skip = opts.oob_mode == OobMode::Skip;
            let rows = super::dma_indirect::index_rows(ins, ind, skip, scatter);
            let n = ind.row_len();
            let read_other = || -> Vec<f32> {
                match other {
                    DmaEndpoint::Hbm(v) => {
                        ins.track_load(v, api);
                        ins.check(v.gather(api))
                    }
                    DmaEndpoint::Tile(t) => t.gather_slots(api, ins.loc),
                    DmaEndpoint::Indirect(_) => unreachable!("one indirect side"),
                }
            };
            match form {
                Form::Gather | Form::GatherAdd => {
                    // Rows read from HBM, cast (or added in fp32) into dst's rows.
                    let mut vals = vec![0.0f32; p * n];
                    let base = if adds {
                        let mut b = read_other();
                        other.dtype().to_values(&mut b);
                        Some(b)
                    } else {
                        None
                    };
                    for (k, row) in rows.iter().enumerate() {
                        let Some(row) = row else { continue };
                        ins.track_load(row, api);
                        let mut r = crate::tile::take_buf(n);
                        ins.check(row.gather_into(api, &mut r));
                        let out = &mut vals[k * n..(k + 1) * n];
                        match &base {
                            Some(b) => {
                                ind.dtype().to_values(&mut r);
                                for ((o, x), y) in out.iter_mut().zip(&r).zip(&b[k * n..]) {
                                    *o = x + y;
                                }
                            }
                            None => out.copy_from_slice(&r),
                        }
                        crate::tile::give_buf(r);
                    }
                    let from = if adds { DType::F32 } else { ind.dtype() };
                    from.cast_slots(other.dtype(), &mut vals);
                    write_rows(ins, other, &rows, vals, n, writer.as_ref());
                }
                Form::Scatter | Form::ScatterAdd => {
                    let mut vals = read_other();
                    if adds {
                        other.dtype().to_values(&mut vals);
                    } else {
                        other.dtype().cast_slots(ind.dtype(), &mut vals);
                    }
                    let (wid, shared) = writer.as_ref().expect("a scatter has a writer");
                    for (k, row) in rows.iter().enumerate() {
                        let Some(row) = row else { continue };
                        let part = &vals[k * n..(k + 1) * n];
                        let r = if adds {
                            crate::hbm::write::atomic(row, Some(part), *wid, shared, ins.loc)
                        } else {
                            crate::hbm::write::write_slice(
                                row,
                                part,
                                true,
                                *wid,
                                shared,
                                (ins.api, ins.loc),
                            )
                        };
                        ins.check(r);
                    }
                }
            }
        },
        || {
            let data_src = match form {
                Form::ScatterAdd => other,
                _ => &srcs[0],
            };
            let mut r = dma_record(&dst, data_src, ins);
            r.reads = srcs
                .iter()
                .map(|s| s.region())
                .chain([ind.index.region()])
                .collect();
            if adds {
                r.alu = Some(crate::math::AluOp::Add);
            }
            r
        },
    );
    if !ins.executes() {
        if let (Form::Scatter | Form::ScatterAdd, Some((_, shared))) = (&form, &writer) {
            // No index values: the whole tensor is claimed, as an atomic-kind writer.
            let (wid, _) = ins.hbm_atomic_writer();
            ins.check(crate::hbm::write::atomic(
                &ind.whole(),
                None,
                wid,
                shared,
                ins.loc,
            ));
        } else if let (DmaEndpoint::Hbm(v), Some((wid, shared))) = (&dst, &writer) {
            ins.check(crate::hbm::write::track(
                v,
                *wid,
                shared,
                (ins.api, ins.loc),
            ));
        }
    }
}

/// The error for a `dma_compute` with a vector_offset that is neither 0.7 form.
fn compute_forms(ins: &Op) -> ! {
    ins.fail(
        ErrorKind::InvalidArgument,
        format!(
            "'{}' with a vector_offset takes exactly two sources in one of two forms: a \
             scatter-add `dst = HBM.ap(.., vector_offset)` with sources [dst, an SBUF tensor], \
             or a gather-add into an SBUF `dst` with sources [dst, HBM.ap(.., vector_offset)]",
            short(ins.api)
        ),
    )
}

/// Writes gathered rows `vals` (slots of `dst`'s dtype, `n` per partition) into `dst`: all at
/// once when no row was skipped, else partition by partition (skipped rows stay as they were).
fn write_rows(
    ins: &Op,
    dst: &DmaEndpoint,
    rows: &[Option<HbmView>],
    vals: Vec<f32>,
    n: usize,
    writer: Option<&(u32, std::sync::Arc<crate::context::LaunchShared>)>,
) {
    let all = rows.iter().all(Option::is_some);
    let part = |k: usize, keep0: bool, ap: &Ap| -> Ap {
        ins.check(ap.slice(&[Ix::from(k..k + 1)], keep0, "dst"))
    };
    match dst {
        DmaEndpoint::Tile(t) if all => t.scatter_slots(vals),
        DmaEndpoint::Tile(t) => {
            for (k, _) in rows.iter().enumerate().filter(|(_, r)| r.is_some()) {
                let v = TileRef {
                    tile: t.tile,
                    ap: part(k, true, &t.ap),
                    cast: t.cast,
                    ind: None,
                };
                v.scatter_slots(vals[k * n..(k + 1) * n].to_vec());
            }
            crate::tile::give_buf(vals);
        }
        DmaEndpoint::Hbm(v) => {
            let (wid, shared) = writer.expect("an HBM destination has a writer");
            if all {
                ins.check(crate::hbm::write::write(
                    v,
                    vals,
                    *wid,
                    shared,
                    (ins.api, ins.loc),
                ));
            } else {
                for (k, _) in rows.iter().enumerate().filter(|(_, r)| r.is_some()) {
                    let row = HbmView::of(v.st.clone(), part(k, true, &v.ap));
                    let r = crate::hbm::write::write_slice(
                        &row,
                        &vals[k * n..(k + 1) * n],
                        true,
                        *wid,
                        shared,
                        (ins.api, ins.loc),
                    );
                    ins.check(r);
                }
                crate::tile::give_buf(vals);
            }
        }
        DmaEndpoint::Indirect(_) => unreachable!("one indirect side"),
    }
}

/// `values` (row-major over `shape`) permuted: the result's dimension `k` is the input's
/// dimension `axes[k]`.
fn permute(values: &[f32], shape: &[usize], axes: &[usize]) -> Vec<f32> {
    let nd = shape.len();
    let mut strides = vec![1usize; nd];
    for d in (0..nd.saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    let out_shape: Vec<usize> = axes.iter().map(|&a| shape[a]).collect();
    let mut idx = vec![0usize; nd];
    let mut out = Vec::with_capacity(values.len());
    for _ in 0..values.len() {
        let at: usize = idx.iter().zip(axes).map(|(&i, &a)| i * strides[a]).sum();
        out.push(values[at]);
        for d in (0..nd).rev() {
            idx[d] += 1;
            if idx[d] < out_shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

/// The one permutation 0.7's `dma_transpose` takes for a source of `nd` dimensions.
fn transpose_axes(nd: usize) -> &'static [usize] {
    match nd {
        2 => &[1, 0],
        3 => &[2, 1, 0],
        4 => &[3, 1, 2, 0],
        _ => &[],
    }
}

/// Transposes `src` into the SBUF tile `dst` with one DMA (NKI `nisa.dma_transpose(dst, src,
/// axes, dge_mode, oob_mode, priority)`): `dst`'s dimension `k` is `src`'s dimension `axes[k]`,
/// with 0.7's permutations only: `&[1, 0]` (2-D), `&[2, 1, 0]` (3-D), `&[3, 1, 2, 0]` (4-D).
///
/// Rules (0.7's, as errors naming the limit): equal dtypes on both sides, 2-byte ones (bf16,
/// fp16, int16, uint16) for a hardware-DGE (`dge_mode=hwdge`) or indirect transpose; `dst` an
/// SBUF tile of the permuted shape; `src` in HBM or SBUF.
/// A direct transpose takes `dge_mode` unknown or hwdge; with hwdge `src.shape[0]` must be
/// 16 and `src.shape[-1]` a multiple of 128. `oob_mode=skip` needs an indirect `src`.
///
/// An indirect `src` (`hbm.ap_indirect(pattern, offset, &idx)`, 0.7's `dma_gather_transpose`)
/// gathers rows, then transposes: with `idx` a `[p, n]` uint32 SBUF tile, row `k` of the
/// pattern is tensor row `idx[k % p, k / p]` (`idx.T.flatten()`), and `dst = gathered.T`. Its
/// limits (trn2+, software DGE: `dge_mode` unknown or swdge): `src.shape[0]` a multiple of 16
/// covered by `p * n` indices, `p` a multiple of 16 in `16..=128` (exactly 128 when `n > 1`),
/// and for a 4-D `src` `shape[1]` or `shape[2]` equal to 1 (0.7's `src.shape[-1] <= 128`
/// holds as `dst`'s partition count). Out-of-range
/// indices follow `oob_mode` (a skipped row leaves its column of `dst` as it was).
///
/// Slots move untouched. Recorded as a `DMA_TRANSPOSE` moving one element per descriptor
/// (the target's `dma_transpose_efficiency` applies), after the descriptor generation of the
/// DGE mode (see [`dma_copy`]; software DGE for an indirect `src`).
#[track_caller]
pub fn dma_transpose<'a, 'b>(
    dst: impl DmaTarget<'a>,
    src: impl DmaSource<'b>,
    axes: &[usize],
    opts: impl Into<Option<DmaOpts>>,
) {
    let opts = opts.into().unwrap_or_default();
    let ins = Op::begin("nisa.dma_transpose");
    let (dst, src) = (dst.dma_target(), src.dma_source());
    for (what, end) in [("dst", &dst), ("src", &src)] {
        direct_endpoint(&ins, what, end);
        if end.mem() == MemKind::Psum {
            ins.fail(ErrorKind::WrongMemory, format!(
                    "expected operand '{what}' of 'dma_transpose' to be in address space 'hbm|sbuf', but got a tile in 'psum' instead ({}): DMA engines cannot access psum",
                    end.describe()
                ));
        }
    }
    // The `nki.isa.dma_transpose` page lists "src.dtype is 2 bytes" among the extra
    // restrictions of the hardware-DGE transpose (dge_mode=hwdge) and of the indirect
    // transpose only; with the default dge_mode the compiler takes any dtype.
    let two_byte_only = match &src {
        DmaEndpoint::Indirect(_) => Some("an indirect transpose"),
        _ if opts.dge_mode == DgeMode::Hwdge => Some("a hardware-DGE transpose (dge_mode=hwdge)"),
        _ => None,
    };
    if let Some(form) = two_byte_only {
        for (what, end) in [("dst", &dst), ("src", &src)] {
            if end.elem_size() != 2 {
                ins.fail(
                    ErrorKind::DType,
                    format!(
                        "{form} of 'dma_transpose' moves 2-byte elements (bfloat16, float16, int16, uint16); {what} {} is {}",
                        end.describe(),
                        end.dtype()
                    ),
                );
            }
        }
    }
    if src.dtype() != dst.dtype() {
        ins.fail(
            ErrorKind::DType,
            format!(
                "'dma_transpose' cannot cast: src {} is {}, dst {} is {}",
                src.describe(),
                src.dtype(),
                dst.describe(),
                dst.dtype()
            ),
        );
    }
    check_opts(&ins, &opts, &src, &dst);
    let DmaEndpoint::Tile(out) = &dst else {
        ins.fail(
            ErrorKind::WrongMemory,
            format!(
                "dst {} of 'dma_transpose' must be a tile in SBUF (0.7 transposes into SBUF)",
                dst.describe()
            ),
        )
    };
    let shape = src.shape().to_vec();
    let nd = shape.len();
    if axes != transpose_axes(nd) {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "axes {axes:?} of 'dma_transpose' are not supported for src {} ({nd}-D): 0.7 \
                 transposes 2-, 3- and 4-D tensors with the permutations (1, 0), (2, 1, 0) and \
                 (3, 1, 2, 0)",
                src.describe()
            ),
        );
    }
    let want: Vec<usize> = axes.iter().map(|&a| shape[a]).collect();
    if dst.shape() != want.as_slice() {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "dst {} of 'dma_transpose' must have the transposed shape {want:?} of src {} with axes {axes:?}",
                dst.describe(),
                src.describe()
            ),
        );
    }
    match &src {
        DmaEndpoint::Indirect(ind) => return gather_transpose(&ins, &opts, out, ind, axes),
        DmaEndpoint::Hbm(v) => ins.track_load(v, ins.api),
        DmaEndpoint::Tile(_) => {}
    }
    direct_transpose_limits(&ins, &opts, &src);
    descriptors(&ins, &opts, &dst, &src);
    ins.issue(
        &[out],
        || {
            let vals = match &src {
                DmaEndpoint::Hbm(v) => ins.check(v.gather(ins.api)),
                DmaEndpoint::Tile(t) => t.gather_slots(ins.api, ins.loc),
                DmaEndpoint::Indirect(_) => unreachable!("built apart"),
            };
            out.scatter_slots(permute(&vals, &shape, axes));
        },
        || transpose_record(&ins, &dst, &src),
    );
}

/// The DMA_TRANSPOSE record of `dst`/`src`: one element per descriptor.
fn transpose_record(ins: &Op, dst: &DmaEndpoint, src: &DmaEndpoint) -> Instr {
    let mut r = dma_record(dst, src, ins);
    if let Some(d) = r.dma.as_mut() {
        d.chunk_bytes = src.elem_size() as u64;
    }
    r.contiguous = false;
    r.opcode = Opcode::DmaTranspose;
    r
}

/// 0.7's limits of a direct (not indirect) `dma_transpose`, as errors of `ins`.
fn direct_transpose_limits(ins: &Op, opts: &DmaOpts, src: &DmaEndpoint) {
    let shape = src.shape();
    let why = match opts.dge_mode {
        DgeMode::Swdge | DgeMode::None => Some(format!(
            "dge_mode={:?} is not supported: a direct transpose takes dge_mode unknown or hwdge",
            opts.dge_mode
        )),
        DgeMode::Hwdge if shape[0] != 16 => Some(format!(
            "a hardware-DGE transpose needs src.shape[0] == 16 (got {})",
            shape[0]
        )),
        DgeMode::Hwdge if !shape[shape.len() - 1].is_multiple_of(128) => Some(format!(
            "a hardware-DGE transpose needs src.shape[-1] to be a multiple of 128 (got {})",
            shape[shape.len() - 1]
        )),
        _ if opts.oob_mode == OobMode::Skip => {
            Some("oob_mode=skip needs an indirect src (a vector_offset)".to_string())
        }
        _ => None,
    };
    if let Some(why) = why {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!("'dma_transpose' of src {}: {why}", src.describe()),
        );
    }
}

/// `dma_transpose` of an indirect source (0.7's `dma_gather_transpose`): the limits, then
/// rows gathered by the index tile and transposed into `out`.
fn gather_transpose(ins: &Op, opts: &DmaOpts, out: &TileRef, ind: &IndirectAp, axes: &[usize]) {
    let shape = ind.shape().to_vec();
    let nd = shape.len();
    let (p, n) = (ind.index.partitions(), ind.index.free_size());
    let why = if ins.target() == crate::target::Target::Trn1 {
        Some("an indirect transpose needs trn2+".to_string())
    } else if !matches!(opts.dge_mode, DgeMode::Unknown | DgeMode::Swdge) {
        Some(format!(
            "dge_mode={:?} is not supported: an indirect transpose is software DGE (unknown or \
             swdge)",
            opts.dge_mode
        ))
    } else if nd == 4 && shape[1] != 1 && shape[2] != 1 {
        Some(format!(
            "a 4-D src needs shape[1] or shape[2] to be 1 (shape {shape:?})"
        ))
    } else if !shape[0].is_multiple_of(16) {
        Some(format!(
            "src.shape[0] must be a multiple of 16 (got {})",
            shape[0]
        ))
    } else if ind.index.dtype() != DType::U32 {
        Some(format!(
            "the indices must be uint32 (got {})",
            ind.index.dtype()
        ))
    } else if !(16..=128).contains(&p) || !p.is_multiple_of(16) {
        Some(format!(
            "the indices' first dimension must be a multiple of 16 in 16..=128 (got {p})"
        ))
    } else if n > 1 && p != 128 {
        Some(format!(
            "indices with {n} columns need exactly 128 rows (got {p})"
        ))
    } else {
        None
    };
    if let Some(why) = why {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "'dma_transpose' of indirect src {} (indices {}): {why}",
                ind.describe(),
                ind.index.describe()
            ),
        );
    }
    ins.operand("vector_offset", &ind.index);
    let (src, dst) = (DmaEndpoint::Indirect(ind.clone()), DmaEndpoint::Tile(*out));
    let swdge = DmaOpts {
        dge_mode: DgeMode::Swdge,
        ..*opts
    };
    descriptors(ins, &swdge, &dst, &src);
    ins.issue(
        &[out],
        || {
            let rows =
                super::dma_indirect::index_rows(ins, ind, opts.oob_mode == OobMode::Skip, false);
            let len = ind.row_len();
            let rest_axes: Vec<usize> = axes[..nd - 1].iter().map(|&a| a - 1).collect();
            let mut all = Vec::with_capacity(rows.len() * len);
            let whole = rows.iter().all(Option::is_some);
            for (k, row) in rows.iter().enumerate() {
                let Some(row) = row else { continue };
                ins.track_load(row, ins.api);
                let mut r = crate::tile::take_buf(len);
                ins.check(row.gather_into(ins.api, &mut r));
                if whole {
                    all.extend_from_slice(&r);
                } else {
                    // Row k is column k of `dst` (its last dimension).
                    let mut ix = vec![Ix::from(..); nd - 1];
                    ix.push(Ix::from(k..k + 1));
                    let col = TileRef {
                        ap: ins.check(out.ap.slice(&ix, true, "dst")),
                        ..*out
                    };
                    col.scatter_slots(permute(&r, &shape[1..], &rest_axes));
                }
                crate::tile::give_buf(r);
            }
            if whole {
                out.scatter_slots(permute(&all, &shape, axes));
            }
        },
        || {
            let mut r = transpose_record(ins, &dst, &src);
            r.reads.push(ind.index.region());
            r
        },
    );
}
