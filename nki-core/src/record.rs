//! The instruction record: what every `nl`/`nisa` call leaves behind in the funnel
//! (`context::issue`). The timing model and the profile read only these.

use crate::dtype::DType;
use crate::error::SourceLoc;
use std::mem::MaybeUninit;

pub use crate::engine::Engine;

/// The instruction performed (one per `nisa` instruction kind; `nl` calls lower to these).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Opcode {
    /// DMA copy (load, store, dma_copy, HBM/SBUF moves).
    DmaCopy,
    /// DMA with a 2-D transpose (`load_transpose2d`, `dma_transpose`).
    DmaTranspose,
    /// Descriptor generation of a DMA with software DGE (on GpSimdE) or hardware DGE
    /// (triggered by the Sync or Scalar engine); `free` is the number of descriptors.
    DmaDescriptors,
    /// TensorE matmul (LoadStationary + MultiplyMoving).
    Matmul,
    /// TensorE transpose (matmul against identity).
    Transpose,
    /// Element-wise op of two tiles.
    TensorTensor,
    /// Tile op with up to two scalar/vector operands.
    TensorScalar,
    /// `(data op0 operand0) op1 tile`.
    ScalarTensorTensor,
    /// ScalarE activation (`f(data*scale+bias)`), optionally with a reduce.
    Activation,
    /// Free-axis reduction.
    TensorReduce,
    /// Cross-partition reduction (GpSimd).
    PartitionReduce,
    /// Copy / cast.
    TensorCopy,
    /// Scan along the free axis.
    TensorTensorScan,
    /// Select between two tiles by a predicate (`where`).
    Select,
    /// High-precision reciprocal on VectorE.
    Reciprocal,
    /// Constant fill.
    Memset,
    /// Affine index generation.
    Iota,
    /// Affine-predicate select (causal masks).
    AffineSelect,
    /// Batch-norm statistics.
    BnStats,
    /// Batch-norm aggregation.
    BnAggr,
    /// VectorE 32x32-block transpose.
    VectorTranspose,
    /// Per-partition gather over the flattened free dimensions (GpSimd `nc_n_gather`).
    Gather,
    /// Uniform random numbers from the engine's PRNG (`nl.rand`).
    Rng,
    /// Seeds the engine's PRNG (`nl.random_seed`).
    SetRngSeed,
    /// Random zeroing of elements with a drop probability (`nl.dropout`).
    Dropout,
    /// The 8 largest values of each partition (`nisa.max8`).
    Max8,
    /// Indices of the first occurrences of 8 values per partition (`nisa.nc_find_index8`).
    FindIndex8,
    /// Replaces the first occurrences of 8 values per partition (`nisa.nc_match_replace8`).
    MatchReplace8,
    /// Running tensor-scalar reduction written element by element
    /// (`nisa.tensor_scalar_cumulative`).
    TensorScalarCumulative,
    /// Free-index range selection with a max-reduction (`nisa.range_select`).
    RangeSelect,
    /// VectorE `exp(x - max)` with a running sum (`nisa.exponential`, NC-v4).
    Exponential,
    /// Indices of the non-zero elements and their count (`nisa.nonzero_with_count`, GpSimd).
    NonzeroWithCount,
    /// Loads a 1x1 tile into a sequencer register (`nisa.scalar_load`).
    ScalarLoad,
    /// Stores a sequencer register into a 1x1 tile (`nisa.scalar_store`).
    ScalarStore,
    /// The compare-and-branch that closes one iteration of a device loop
    /// (`nl.fori_loop` / `nl.while_loop`) on one engine's sequencer.
    LoopBranch,
    /// The compare-and-branch of a compiled conditional (`nl.if_else`) on one engine's
    /// sequencer.
    Branch,
    /// Arrival of this core at a barrier of the two cores of a logical NeuronCore
    /// (`nisa.core_barrier`, `nisa.sendrecv`): a semaphore write to the other core.
    CoreBarrier,
    /// Wait for the other core's arrival at the same barrier (no engine time of its own).
    CoreWait,
    /// MXFP8 quantisation with its block scales (`nisa.quantize_mx`, VectorE, NC-v4).
    QuantizeMx,
    /// Cross-partition move within 32-partition quadrants (`nisa.nc_stream_shuffle`, VectorE).
    StreamShuffle,
    /// Start/end of each element's segment (`nisa.sequence_bounds`, GpSimd).
    SequenceBounds,
    /// Uniform floats in `[min, max]` from VectorE's XORWOW generators (`nisa.rand2`, NC-v4).
    Rand2,
    /// Reads an engine's generator state out (`nisa.rand_get_state`).
    RngGetState,
    /// The K largest of a 16-partition snake and their positions (`nisa.topk`, GpSimd); its
    /// record's free size is the documented `4n + K` cycles.
    TopK,
}

impl Opcode {
    /// Profiler-style upper-case name.
    pub fn name(self) -> &'static str {
        match self {
            Opcode::DmaCopy => "DMA_COPY",
            Opcode::DmaTranspose => "DMA_TRANSPOSE",
            Opcode::DmaDescriptors => "DMA_DESCRIPTORS",
            Opcode::Matmul => "MATMUL",
            Opcode::Transpose => "TRANSPOSE",
            Opcode::TensorTensor => "TENSOR_TENSOR",
            Opcode::TensorScalar => "TENSOR_SCALAR",
            Opcode::ScalarTensorTensor => "SCALAR_TENSOR_TENSOR",
            Opcode::Activation => "ACTIVATE",
            Opcode::TensorReduce => "TENSOR_REDUCE",
            Opcode::PartitionReduce => "PARTITION_REDUCE",
            Opcode::TensorCopy => "TENSOR_COPY",
            Opcode::TensorTensorScan => "TENSOR_TENSOR_SCAN",
            Opcode::Select => "SELECT",
            Opcode::Reciprocal => "RECIPROCAL",
            Opcode::Memset => "MEMSET",
            Opcode::Iota => "IOTA",
            Opcode::AffineSelect => "AFFINE_SELECT",
            Opcode::BnStats => "BN_STATS",
            Opcode::BnAggr => "BN_AGGR",
            Opcode::VectorTranspose => "VECTOR_TRANSPOSE",
            Opcode::Gather => "GATHER",
            Opcode::Rng => "RNG",
            Opcode::SetRngSeed => "SET_RNG_SEED",
            Opcode::Dropout => "DROPOUT",
            Opcode::Max8 => "MAX8",
            Opcode::FindIndex8 => "FIND_INDEX8",
            Opcode::MatchReplace8 => "MATCH_REPLACE8",
            Opcode::TensorScalarCumulative => "TENSOR_SCALAR_CUMULATIVE",
            Opcode::RangeSelect => "RANGE_SELECT",
            Opcode::Exponential => "EXPONENTIAL",
            Opcode::NonzeroWithCount => "NONZERO_WITH_COUNT",
            Opcode::QuantizeMx => "QUANTIZE_MX",
            Opcode::StreamShuffle => "STREAM_SHUFFLE",
            Opcode::SequenceBounds => "SEQUENCE_BOUNDS",
            Opcode::Rand2 => "RAND2",
            Opcode::RngGetState => "RNG_GET_STATE",
            Opcode::TopK => "TOPK",
            Opcode::ScalarLoad => "SCALAR_LOAD",
            Opcode::ScalarStore => "SCALAR_STORE",
            Opcode::LoopBranch => "LOOP_BRANCH",
            Opcode::Branch => "BRANCH",
            Opcode::CoreBarrier => "CORE_BARRIER",
            Opcode::CoreWait => "CORE_WAIT",
        }
    }
}

/// Which memory a buffer lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum MemKind {
    /// Device HBM.
    Hbm,
    /// State buffer (on chip).
    Sbuf,
    /// Partial-sum buffer (on chip).
    Psum,
}

impl MemKind {
    /// NKI's name for the address space.
    pub fn name(self) -> &'static str {
        match self {
            MemKind::Hbm => "hbm",
            MemKind::Sbuf => "sbuf",
            MemKind::Psum => "psum",
        }
    }
}

/// Identity of a buffer: an HBM tensor or an on-chip tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum BufId {
    /// An HBM tensor (id unique in the process).
    Hbm(u64),
    /// An on-chip tile (id unique in the process).
    Tile(u64),
}

/// The part of a buffer an instruction reads or writes: partitions `p0..p1` (tiles; `0..1` for
/// HBM) and the byte range `lo..hi` (within each partition for tiles; flat for HBM).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Region {
    /// The buffer.
    pub buf: BufId,
    /// First partition.
    pub p0: u32,
    /// One past the last partition.
    pub p1: u32,
    /// First byte.
    pub lo: u64,
    /// One past the last byte.
    pub hi: u64,
}

impl Region {
    /// True when two regions of the same buffer can share a byte.
    pub fn overlaps(&self, o: &Region) -> bool {
        self.buf == o.buf && self.p0 < o.p1 && o.p0 < self.p1 && self.lo < o.hi && o.lo < self.hi
    }

    /// True when this region contains every byte of `o` (same buffer).
    pub fn covers(&self, o: &Region) -> bool {
        self.buf == o.buf
            && self.p0 <= o.p0
            && self.p1 >= o.p1
            && self.lo <= o.lo
            && self.hi >= o.hi
    }
}

/// The regions an instruction reads or writes: up to `N` kept inline in the record (the
/// common instruction costs no allocation), more on the heap. Reads like a slice of
/// [`Region`] (`iter`, `len`, indexing, `for reg in &r.reads`) and serialises like one.
#[derive(Clone)]
pub struct Regions<const N: usize>(RegionsRepr<N>);

#[derive(Clone)]
enum RegionsRepr<const N: usize> {
    /// The first `len` of `items` (initialised; the rest are not: a record is written on the
    /// estimate hot path, and filling unused slots cost it as much as its regions).
    Inline {
        len: u8,
        items: [MaybeUninit<Region>; N],
    },
    /// More than `N` regions.
    Heap(Vec<Region>),
}

impl<const N: usize> Regions<N> {
    /// No regions.
    pub const fn new() -> Self {
        Regions(RegionsRepr::Inline {
            len: 0,
            items: [MaybeUninit::uninit(); N],
        })
    }

    /// Appends `r`.
    pub fn push(&mut self, r: Region) {
        match &mut self.0 {
            RegionsRepr::Inline { len, items } if (*len as usize) < N => {
                items[*len as usize].write(r);
                *len += 1;
            }
            RegionsRepr::Inline { .. } => {
                let mut v = Vec::with_capacity(N * 2);
                v.extend_from_slice(&self[..]);
                v.push(r);
                self.0 = RegionsRepr::Heap(v);
            }
            RegionsRepr::Heap(v) => v.push(r),
        }
    }
}

impl<const N: usize> Default for Regions<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> std::ops::Deref for Regions<N> {
    type Target = [Region];
    fn deref(&self) -> &[Region] {
        match &self.0 {
            RegionsRepr::Inline { len, items } => {
                let items = &items[..*len as usize];
                // SAFETY: the first `len` items are initialised (every writer of the inline
                // form writes an item before counting it), and `MaybeUninit<Region>` has the
                // layout of `Region`.
                unsafe { &*(items as *const [MaybeUninit<Region>] as *const [Region]) }
            }
            RegionsRepr::Heap(v) => v,
        }
    }
}

impl<const N: usize> std::ops::DerefMut for Regions<N> {
    fn deref_mut(&mut self) -> &mut [Region] {
        match &mut self.0 {
            RegionsRepr::Inline { len, items } => {
                let items = &mut items[..*len as usize];
                // SAFETY: as in `deref`: the first `len` items are initialised.
                unsafe { &mut *(items as *mut [MaybeUninit<Region>] as *mut [Region]) }
            }
            RegionsRepr::Heap(v) => v,
        }
    }
}

impl<'a, const N: usize> IntoIterator for &'a Regions<N> {
    type Item = &'a Region;
    type IntoIter = std::slice::Iter<'a, Region>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<const N: usize> Extend<Region> for Regions<N> {
    fn extend<I: IntoIterator<Item = Region>>(&mut self, iter: I) {
        iter.into_iter().for_each(|r| self.push(r));
    }
}

impl<const N: usize> FromIterator<Region> for Regions<N> {
    fn from_iter<I: IntoIterator<Item = Region>>(iter: I) -> Self {
        let mut rs = Self::new();
        rs.extend(iter);
        rs
    }
}

impl<const N: usize, const K: usize> From<[Region; K]> for Regions<N> {
    fn from(rs: [Region; K]) -> Self {
        if K > N {
            return Regions(RegionsRepr::Heap(rs.to_vec()));
        }
        let mut items = [MaybeUninit::uninit(); N];
        for (item, r) in items.iter_mut().zip(rs) {
            item.write(r);
        }
        Regions(RegionsRepr::Inline {
            len: K as u8,
            items,
        })
    }
}

impl<const N: usize> From<Vec<Region>> for Regions<N> {
    fn from(v: Vec<Region>) -> Self {
        if v.len() > N {
            Regions(RegionsRepr::Heap(v))
        } else {
            v.into_iter().collect()
        }
    }
}

impl<const N: usize, const M: usize> PartialEq<Regions<M>> for Regions<N> {
    fn eq(&self, other: &Regions<M>) -> bool {
        self[..] == other[..]
    }
}

impl<const N: usize> std::fmt::Debug for Regions<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<const N: usize> serde::Serialize for Regions<N> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self[..].serialize(s)
    }
}

/// TensorE operand sizes of a matmul: `[K, M]` stationary, `[K, N]` moving.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct MatmulDims {
    /// Contraction (partition) size.
    pub k: u32,
    /// Stationary free size (output partitions).
    pub m: u32,
    /// Moving free size (output free size).
    pub n: u32,
    /// True when the inputs are fp32 (4x slower).
    pub fp32: bool,
    /// How many of the fp32 operands carry NKI's one/zero hint (`is_stationary_onezero`,
    /// `is_moving_onezero`: "2x better performance if the tile is in float32"): each halves
    /// the fp32 factor \[A: the halvings compound\]. 0 for other inputs.
    pub onezero: u8,
}

/// What a DMA moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DmaDims {
    /// Source memory.
    pub src: MemKind,
    /// Destination memory.
    pub dst: MemKind,
    /// Total bytes moved.
    pub bytes: u64,
    /// Partitions of the on-chip side (the number of rows for HBM-to-HBM copies).
    pub partitions: u32,
    /// First partition of the on-chip side (decides which DMA engines serve it).
    pub start_partition: u32,
    /// Length of the contiguous runs (descriptor size) in bytes.
    pub chunk_bytes: u64,
}

/// What the cost rules (`timing::cost`, `timing::dma`) read of an instruction record, and
/// nothing else (not its regions, API name, source line or loop position): the part of an
/// [`Instr`] a record costs by, so a record costs the same whether it is costed as it is
/// recorded (on the modelling thread, from a copy of this part) or afterwards. A record's
/// fields read through to it (`instr.engine` is `instr.cost.engine`).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct CostFacts {
    /// The engine it runs on.
    pub engine: Engine,
    /// What it does.
    pub opcode: Opcode,
    /// Partitions processed.
    pub partitions: u32,
    /// Free elements per partition processed (N of the cost formulas).
    pub free: u32,
    /// Number of tile inputs read by the engine (1 or 2 for the cost rules).
    pub inputs: u8,
    /// Dtype of the (first) input.
    pub in_dtype: DType,
    /// Dtype of the output.
    pub out_dtype: DType,
    /// True when an input or the output is in PSUM.
    pub psum: bool,
    /// True when all on-chip accesses have a unit innermost stride.
    pub contiguous: bool,
    /// TensorE sizes (matmul / transpose only).
    pub matmul: Option<MatmulDims>,
    /// DMA sizes (DMA only).
    pub dma: Option<DmaDims>,
    /// The ALU operator of an element-wise instruction, when it has one (costs depend on it).
    pub alu: Option<crate::math::AluOp>,
    /// True when the instruction also reduces its results into the engine's accumulator
    /// (`activation_reduce`, `tensor_scalar` with an accumulate): one more `MIN_II` \[E S13\].
    /// For a `LOOP_BRANCH`: the iteration it closes is software-pipelined (it loads the next
    /// iteration's input), which makes its barrier cheaper.
    pub accumulate: bool,
}

impl CostFacts {
    /// The facts of an instruction of `engine` and `opcode` before its operands are known:
    /// no elements, one F32 input, contiguous, not in PSUM, no sizes, no ALU operator.
    #[inline]
    pub fn new(engine: Engine, opcode: Opcode) -> CostFacts {
        CostFacts {
            engine,
            opcode,
            partitions: 0,
            free: 0,
            inputs: 1,
            in_dtype: DType::F32,
            out_dtype: DType::F32,
            psum: false,
            contiguous: true,
            matmul: None,
            dma: None,
            alu: None,
            accumulate: false,
        }
    }
}

impl From<&Instr> for CostFacts {
    #[inline]
    fn from(r: &Instr) -> CostFacts {
        r.cost
    }
}

impl From<&CostFacts> for CostFacts {
    #[inline]
    fn from(r: &CostFacts) -> CostFacts {
        *r
    }
}

/// One executed (or, in estimate mode, traced) instruction.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Instr {
    /// What it costs by: engine, opcode, sizes, dtypes and the flags the cost rules read
    /// (read through the record: `instr.engine`).
    #[serde(flatten)]
    pub cost: CostFacts,
    /// The NKI call that issued it (`nl.add`, `nisa.activation`, ...).
    pub api: &'static str,
    /// Regions read (up to three inline: the operands of a matmul that accumulates).
    pub reads: Regions<3>,
    /// Regions written (one inline).
    pub writes: Regions<1>,
    /// Kernel source line that issued it.
    pub loc: SourceLoc,
    /// The `affine_range` loops it was issued in, outermost first: `(loop activation,
    /// iteration)`, where every start of an `affine_range` loop is a new activation. Two
    /// records in different iterations of one activation are independent by contract, so
    /// the timing model lets an engine run them out of program order.
    pub affine: AffinePos,
    /// The instruction's name (NKI `name=`, given with `nisa::named`), if any: shown in the
    /// profile and the trace.
    pub name: Option<crate::names::InstrName>,
}

/// A position in a kernel's `affine_range` loops: the `(loop activation, iteration)` pairs,
/// outermost first (empty outside affine loops). Up to [`AffinePos::INLINE`] loops deep it is
/// held in the record itself (recording allocates nothing per position); deeper nests share
/// one allocation among the records issued at one position. Five inline frames cover the
/// matmul tutorial's blocked kernels (the block-free version issues its matmuls five loops
/// deep): with three, each of its matmuls allocated a position, about a tenth of the
/// recording thread's instructions (callgrind, 3 estimates: 441.6 M -> 399.1 M).
#[derive(Clone)]
pub struct AffinePos(PosRepr);

#[derive(Clone)]
enum PosRepr {
    /// The first `len` of `frames` (the rest are zero).
    Inline {
        len: u8,
        frames: [(u32, u32); AffinePos::INLINE],
    },
    /// More than [`AffinePos::INLINE`] frames.
    Shared(std::sync::Arc<[(u32, u32)]>),
}

impl Default for AffinePos {
    fn default() -> Self {
        AffinePos(PosRepr::Inline {
            len: 0,
            frames: [(0, 0); AffinePos::INLINE],
        })
    }
}

impl PartialEq for AffinePos {
    fn eq(&self, o: &AffinePos) -> bool {
        self.frames() == o.frames()
    }
}

impl Eq for AffinePos {}

impl std::fmt::Debug for AffinePos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("AffinePos").field(&self.frames()).finish()
    }
}

impl AffinePos {
    /// The most loops a position holds inline.
    pub const INLINE: usize = 5;

    /// The position given by `frames` (outermost first).
    pub fn new(frames: &[(u32, u32)]) -> AffinePos {
        if frames.len() > Self::INLINE {
            return AffinePos(PosRepr::Shared(frames.into()));
        }
        let mut inline = [(0, 0); Self::INLINE];
        inline[..frames.len()].copy_from_slice(frames);
        AffinePos(PosRepr::Inline {
            len: frames.len() as u8,
            frames: inline,
        })
    }

    /// Sets the iteration of frame `k` (outermost first) of an inline position to `iter` and
    /// returns true; a shared position is left as it is (false: the caller makes a new one).
    #[inline]
    pub(crate) fn set_iter(&mut self, k: usize, iter: u32) -> bool {
        match &mut self.0 {
            PosRepr::Inline { len, frames } if k < *len as usize => {
                frames[k].1 = iter;
                true
            }
            _ => false,
        }
    }

    /// The `(loop activation, iteration)` pairs, outermost first.
    pub fn frames(&self) -> &[(u32, u32)] {
        match &self.0 {
            PosRepr::Inline { len, frames } => &frames[..*len as usize],
            PosRepr::Shared(f) => f,
        }
    }
}

impl serde::Serialize for AffinePos {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.frames().serialize(s)
    }
}

impl Instr {
    /// A record with the common fields and [`CostFacts::new`]'s facts; set the rest on it.
    #[inline]
    pub fn new(engine: Engine, opcode: Opcode, api: &'static str, loc: SourceLoc) -> Instr {
        Instr::with_cost(CostFacts::new(engine, opcode), api, loc)
    }

    /// A record of cost facts `cost` issued by `api` at `loc`, reading and writing nothing yet.
    #[inline]
    pub fn with_cost(cost: CostFacts, api: &'static str, loc: SourceLoc) -> Instr {
        Instr {
            cost,
            api,
            reads: Regions::new(),
            writes: Regions::new(),
            loc,
            affine: AffinePos::default(),
            name: None,
        }
    }

    /// True when `self` and `other` (records of one program instance) lie in different
    /// iterations of a common `affine_range` loop: no ordering between them is required.
    pub fn independent_of(&self, other: &Instr) -> bool {
        for (a, b) in self.affine.frames().iter().zip(other.affine.frames()) {
            if a.0 != b.0 {
                return false;
            }
            if a.1 != b.1 {
                return true;
            }
        }
        false
    }

    /// Hardware FLOPs (2 per MAC) of a TensorE instruction, 0 otherwise.
    pub fn hw_flops(&self) -> u64 {
        match self.matmul {
            Some(m) => 2 * m.k as u64 * m.m as u64 * m.n as u64,
            None => 0,
        }
    }
}

impl std::ops::Deref for Instr {
    type Target = CostFacts;

    /// The record's cost facts: its engine, opcode, sizes and flags read as its own fields.
    #[inline(always)]
    fn deref(&self) -> &CostFacts {
        &self.cost
    }
}

impl std::ops::DerefMut for Instr {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut CostFacts {
        &mut self.cost
    }
}

/// The instruction records of one NeuronCore: its instances' streams in run order (what the
/// launcher hands the timing model).
#[derive(Clone, Debug, Default)]
pub struct CoreStream {
    /// Logical NeuronCore index.
    pub nc: usize,
    /// One record stream per instance (with its program id), in the order the core ran them.
    pub instances: Vec<(Vec<usize>, Vec<Instr>)>,
}

impl CoreStream {
    /// Records of all its instances.
    pub fn records(&self) -> usize {
        self.instances.iter().map(|(_, rs)| rs.len()).sum()
    }
}

/// Most instruction records one kernel instance may keep unless its launch sets its own
/// budget ([`Launch::max_records`](crate::spmd::Launch::max_records)): the record past it
/// fails the instance with an [`ErrorKind::Budget`](crate::error::ErrorKind::Budget) error
/// naming the device loop running (or the last instruction's line) instead of growing the
/// buffer until the host's memory runs out. A record takes 336 bytes (`size_of::<Instr>()` on
/// x86-64, 2026-12-07), so the default bounds one instance's records near 1.4 GB (a never-ending
/// `while_loop` simulated to it peaked at 1.8 GB resident, growth of the buffer included); the
/// largest kernels of the calibration and the examples record far fewer. A limit of the
/// simulator, not of the hardware.
pub const DEFAULT_MAX_RECORDS: usize = 1 << 22;

/// One run of a device loop (`nl::fori_loop`, `nl::while_loop`) by one instance: the records
/// (indices into the instance's record stream) of each iteration, which the profile's loop
/// summaries read.
#[derive(Clone, Debug)]
pub(crate) struct LoopLog {
    /// `nl.fori_loop` or `nl.while_loop`.
    pub(crate) api: &'static str,
    /// The loop's line.
    pub(crate) loc: SourceLoc,
    /// Per iteration: its first record, the first of its loop-branch records, and the end of
    /// its records (`start..branch` is the body, `branch..end` the loop's own branches).
    pub(crate) iterations: Vec<(usize, usize, usize)>,
}

/// Record buffers handed back after their launch was modelled, kept for the next launches'
/// instances so recording neither regrows a buffer (realloc and copy) nor touches fresh pages.
static SPARE_BUFFERS: std::sync::Mutex<Vec<Vec<Instr>>> = std::sync::Mutex::new(Vec::new());

/// Most bytes the spare buffers keep, all together: a bound on the memory kept between
/// launches, not a limit on any launch.
const SPARE_BYTES: usize = 128 << 20;

/// An empty record buffer for a new instance: a spare one (with the room of an earlier
/// launch's) when there is one.
pub(crate) fn record_buffer() -> Vec<Instr> {
    SPARE_BUFFERS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .pop()
        .unwrap_or_default()
}

/// [`recycle`] on a thread of its own, so the caller goes on at once (dropping a large
/// launch's records takes milliseconds; a launch that starts meanwhile takes another spare
/// buffer or a new one). When the thread cannot start, the records are dropped here and
/// their buffers not kept.
pub(crate) fn recycle_apart(streams: Vec<CoreStream>) {
    let _ = std::thread::Builder::new()
        .name("nki-recycle".into())
        .spawn(move || recycle(streams));
}

/// Hands the record buffers of a modelled launch back for later launches (the records are
/// dropped; the room is kept while the spares stay within [`SPARE_BYTES`]).
pub(crate) fn recycle(streams: Vec<CoreStream>) {
    for (_, mut buf) in streams.into_iter().flat_map(|s| s.instances) {
        if buf.capacity() == 0 {
            continue;
        }
        buf.clear();
        let mut spares = SPARE_BUFFERS.lock().unwrap_or_else(|p| p.into_inner());
        let kept: usize = spares.iter().map(Vec::capacity).sum();
        if (kept + buf.capacity()) * std::mem::size_of::<Instr>() <= SPARE_BYTES {
            spares.push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(i: u64) -> Region {
        Region {
            buf: BufId::Tile(i),
            p0: i as u32,
            p1: i as u32 + 1,
            lo: i,
            hi: 2 * i + 1,
        }
    }

    #[test]
    fn regions_read_and_serialise_like_a_vec_inline_or_spilled() {
        for n in 0..6u64 {
            let v: Vec<Region> = (0..n).map(region).collect();
            let mut pushed = Regions::<3>::new();
            v.iter().for_each(|&r| pushed.push(r));
            let collected: Regions<3> = v.iter().copied().collect();
            let converted = Regions::<3>::from(v.clone());
            for rs in [&pushed, &collected, &converted] {
                assert_eq!(&rs[..], &v[..], "{n} regions");
                assert_eq!(rs.len(), v.len());
                assert_eq!(rs.iter().count(), v.len());
                assert_eq!(format!("{rs:?}"), format!("{v:?}"));
                assert_eq!(
                    serde_json::to_string(rs).unwrap(),
                    serde_json::to_string(&v).unwrap()
                );
            }
        }
        let mut rs = Regions::<1>::from([region(1), region(2)]);
        rs[1].lo = 7;
        assert_eq!(rs[1].lo, 7);
        assert_eq!(
            rs,
            Regions::<3>::from([region(1), Region { lo: 7, ..region(2) }])
        );
    }

    #[test]
    fn affine_positions_read_back_their_frames_inline_or_shared() {
        for depth in 0..=AffinePos::INLINE + 2 {
            let frames: Vec<(u32, u32)> = (0..depth as u32).map(|i| (i + 1, 10 * i)).collect();
            let pos = AffinePos::new(&frames);
            assert_eq!(pos.frames(), &frames[..], "{depth} loops deep");
            assert_eq!(pos.clone(), pos);
            assert_eq!(format!("{pos:?}"), format!("AffinePos({frames:?})"));
            assert_eq!(
                serde_json::to_string(&pos).unwrap(),
                serde_json::to_string(&frames).unwrap()
            );
        }
        // Positions differ by any iteration; the empty position is the default.
        assert_ne!(AffinePos::new(&[(1, 0)]), AffinePos::new(&[(1, 1)]));
        assert_eq!(AffinePos::default(), AffinePos::new(&[]));
    }
}
