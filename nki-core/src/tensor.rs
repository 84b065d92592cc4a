//! NKI 0.7's one tensor type: [`Tensor`], made by `nl::ndarray(shape, dtype, buffer)` in any
//! memory (SBUF, PSUM, private or shared HBM), with a `name` and, on chip, a manual
//! `address`; and its views, [`TensorRef`] (slices, `reshape`, `permute`, `.ap`).
//!
//! On chip a tensor is a [`Tile`] (its views are [`TileRef`]s); in HBM it is a tensor the
//! kernel allocated (its views are [`HbmView`]s). Both convert into what instructions take
//! ([`TileRef`], [`Operand`], the `dma_copy` endpoints), so a `Tensor` goes wherever a tile or
//! an HBM view goes; using an HBM tensor where an instruction needs an on-chip one (or the
//! reverse) fails the kernel with a [`ErrorKind::WrongMemory`] error at the user's line.
//!
//! Kernel outputs in 0.7 are allocated inside the kernel in `nl::shared_hbm` and returned:
//! every program instance's `k`-th shared-HBM allocation is the same tensor of the launch
//! (instances must agree on its shape and dtype), and a `#[nki_kernel]` returning `Hbm<T>`
//! (or a tuple of them) hands it to the caller as an [`Hbm`] ([`ReturnSlot`]). Private HBM
//! (`nl::private_hbm`, NKI's `nl.hbm`) is scratch of one instance.
//!
//! ```
//! use nki_core::prelude::*;
//!
//! #[nki_kernel]
//! fn scale(a: &Hbm<f32>) -> Hbm<f32> {
//!     let out = nl::ndarray(a.shape(), DType::F32, nl::shared_hbm.name("out"));
//!     let x = nl::ndarray(&[128, 64], DType::F32, nl::sbuf);
//!     nisa::dma_copy(&x, a, None);
//!     let y = nl::multiply(&x, 2.0);
//!     nisa::dma_copy(&out, &y, None);
//!     out
//! }
//!
//! let a = Hbm::<f32>::full([128, 64], 1.5);
//! let (out, _report) = scale::launch(1, &a).unwrap();
//! assert_eq!(out.to_vec().unwrap(), vec![3.0; 128 * 64]);
//! ```

use crate::access::{Ap, IntoIndex, Shape};
use crate::context::raise;
use crate::dtype::{DType, Element};
use crate::emit::trace::{Arg, Call, TensorId, What};
use crate::error::{ErrorKind, NkiError, Result, SourceLoc};
use crate::hbm::{Hbm, HbmStorage, HbmView};
use crate::isa::base::Dst;
use crate::isa::op::Op;
use crate::isa::vector::memset_to;
use crate::isa::Operand;
use crate::isa::{DmaEndpoint, DmaSource, DmaTarget};
use crate::record::MemKind;
use crate::tile::{Tile, TileRef};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// The memory a tensor lives in (NKI's `buffer=`: `nl.sbuf`, `nl.psum`, `nl.private_hbm` /
/// `nl.hbm`, `nl.shared_hbm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Buffer {
    /// The state buffer (on chip; NKI's default).
    Sbuf,
    /// The partial-sum buffer (on chip).
    Psum,
    /// HBM private to one program instance: kernel scratch.
    PrivateHbm,
    /// HBM shared by the launch's program instances: the kernel's outputs, returned from it.
    SharedHbm,
}

impl Buffer {
    /// The address space ([`MemKind`]) of the buffer.
    pub fn mem(self) -> MemKind {
        match self {
            Buffer::Sbuf => MemKind::Sbuf,
            Buffer::Psum => MemKind::Psum,
            Buffer::PrivateHbm | Buffer::SharedHbm => MemKind::Hbm,
        }
    }

    /// NKI's name of the buffer (`sbuf`, `psum`, `private_hbm`, `shared_hbm`).
    pub fn nki_name(self) -> &'static str {
        match self {
            Buffer::Sbuf => "sbuf",
            Buffer::Psum => "psum",
            Buffer::PrivateHbm => "private_hbm",
            Buffer::SharedHbm => "shared_hbm",
        }
    }

    /// The allocation in this buffer with a name (NKI's `name=`), shown in errors.
    pub fn name(self, name: &str) -> Alloc {
        Alloc::from(self).name(name)
    }

    /// The allocation in this buffer placed by hand (NKI's `address=(partition, byte)`).
    pub fn address(self, partition: usize, byte: usize) -> Alloc {
        Alloc::from(self).address(partition, byte)
    }
}

impl From<Buffer> for MemKind {
    fn from(b: Buffer) -> MemKind {
        b.mem()
    }
}

/// NKI 0.7 `nl.is_hbm(buffer)`: whether `buffer` (a [`Buffer`] such as `t.buffer()` or
/// `nl::shared_hbm`, or a [`MemKind`]) is any HBM (private or shared).
pub fn is_hbm(buffer: impl Into<MemKind>) -> bool {
    buffer.into() == MemKind::Hbm
}

/// NKI 0.7 `nl.is_on_chip(buffer)`: whether `buffer` is SBUF or PSUM.
pub fn is_on_chip(buffer: impl Into<MemKind>) -> bool {
    matches!(buffer.into(), MemKind::Sbuf | MemKind::Psum)
}

/// NKI 0.7 `nl.is_psum(buffer)`: whether `buffer` is PSUM.
pub fn is_psum(buffer: impl Into<MemKind>) -> bool {
    buffer.into() == MemKind::Psum
}

/// NKI 0.7 `nl.is_sbuf(buffer)`: whether `buffer` is SBUF.
pub fn is_sbuf(buffer: impl Into<MemKind>) -> bool {
    buffer.into() == MemKind::Sbuf
}

/// Anything `nl::zeros_like` / `nl::empty_like` take the shape and dtype of: a tensor or a
/// view of one in any memory ([`Tensor`], [`TensorRef`], [`Tile`], [`TileRef`], [`Hbm`],
/// [`HbmView`]).
pub trait TensorLike {
    /// The shape.
    fn like_shape(&self) -> &[usize];
    /// The dtype.
    fn like_dtype(&self) -> DType;
}

/// Implements [`TensorLike`] for types with `shape()` and `dtype()` methods (`[generics] type`).
macro_rules! tensor_like {
    ($([$($g:tt)*] $ty:ty);* $(;)?) => {$(
        impl<$($g)*> TensorLike for $ty {
            fn like_shape(&self) -> &[usize] {
                self.shape()
            }
            fn like_dtype(&self) -> DType {
                self.dtype()
            }
        }
    )*};
}
tensor_like!([] Tensor; ['a] TensorRef<'a>; [] Tile; ['a] TileRef<'a>; [] HbmView; [T: Element] Hbm<T>);

/// Where and how `nl::ndarray` allocates a [`Tensor`]: NKI's `buffer=`, `name=` and
/// `address=` keywords, e.g. `nl::sbuf.name("acc").address(0, 4096)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alloc {
    /// The memory.
    pub buffer: Buffer,
    /// The tensor's name in errors (none: described by memory, dtype and shape).
    pub name: Option<String>,
    /// Manual placement on chip: first partition and byte offset within each partition (in
    /// PSUM a bank start, `bank * 2048`). Another live placed tensor must not overlap it.
    pub address: Option<(usize, usize)>,
}

impl Alloc {
    /// The same allocation named `name`.
    pub fn name(self, name: &str) -> Alloc {
        Alloc {
            name: Some(name.to_string()),
            ..self
        }
    }

    /// The same allocation placed at partition `partition`, byte `byte` of each partition.
    pub fn address(self, partition: usize, byte: usize) -> Alloc {
        Alloc {
            address: Some((partition, byte)),
            ..self
        }
    }
}

impl From<Buffer> for Alloc {
    fn from(buffer: Buffer) -> Alloc {
        Alloc {
            buffer,
            name: None,
            address: None,
        }
    }
}

/// What `nl::ndarray` / `nl::zeros` / `nl::full` allocate in: a [`MemKind`] (the Beta-1 form,
/// giving a [`Tile`]) or a [`Buffer`] / [`Alloc`] (NKI 0.7, giving a [`Tensor`]).
pub trait Placement {
    /// What the allocation gives.
    type Out;

    /// An unwritten tensor of `dims` and `dtype` (NKI `nl.ndarray`), allocated by op `api`.
    #[doc(hidden)]
    fn ndarray(self, api: &'static str, dims: &[usize], dtype: DType) -> Self::Out;

    /// A tensor of `dims` and `dtype` filled with `value` (NKI `nl.full`, recorded as a
    /// memset), allocated by op `api`.
    #[doc(hidden)]
    fn full(self, api: &'static str, dims: &[usize], value: f32, dtype: DType) -> Self::Out;
}

impl Placement for MemKind {
    type Out = Tile;

    #[track_caller]
    fn ndarray(self, api: &'static str, dims: &[usize], dtype: DType) -> Tile {
        let ins = Op::begin(api);
        let t = ndarray_tile(&ins, self, dims, dtype);
        trace_alloc(
            &ins,
            TensorId::Tile(t.id),
            on_chip_buffer(self),
            dims,
            dtype,
            None,
        );
        t
    }

    #[track_caller]
    fn full(self, api: &'static str, dims: &[usize], value: f32, dtype: DType) -> Tile {
        let ins = Op::begin(api);
        let t = full_tile(&ins, self, dims, value, dtype);
        trace_full(&ins, &t, on_chip_buffer(self), dims, value, dtype);
        t
    }
}

impl Placement for Buffer {
    type Out = Tensor;

    #[track_caller]
    fn ndarray(self, api: &'static str, dims: &[usize], dtype: DType) -> Tensor {
        Alloc::from(self).ndarray(api, dims, dtype)
    }

    #[track_caller]
    fn full(self, api: &'static str, dims: &[usize], value: f32, dtype: DType) -> Tensor {
        Alloc::from(self).full(api, dims, value, dtype)
    }
}

impl Placement for Alloc {
    type Out = Tensor;

    #[track_caller]
    fn ndarray(self, api: &'static str, dims: &[usize], dtype: DType) -> Tensor {
        let ins = Op::begin(api);
        match self.buffer {
            Buffer::Sbuf | Buffer::Psum => {
                let t = ndarray_tile(&ins, self.buffer.mem(), dims, dtype);
                trace_alloc(&ins, TensorId::Tile(t.id), self.buffer, dims, dtype, None);
                Tensor::on_chip(&ins, t, self)
            }
            Buffer::PrivateHbm | Buffer::SharedHbm => {
                let buffer = self.buffer;
                let t = hbm_tensor(&ins, self, dims, dtype);
                if let Repr::Hbm(v, _) = &t.repr {
                    let st = Some(v.st.clone() as crate::emit::trace::Storage);
                    trace_alloc(&ins, TensorId::Hbm(v.st.id), buffer, dims, dtype, st);
                }
                t
            }
        }
    }

    #[track_caller]
    fn full(self, api: &'static str, dims: &[usize], value: f32, dtype: DType) -> Tensor {
        let ins = Op::begin(api);
        if self.buffer.mem() == MemKind::Hbm {
            ins.fail(
                ErrorKind::WrongMemory,
                format!(
                    "nl.{api} cannot fill a tensor in {}: HBM tensors start unwritten; allocate \
                     it with nl::ndarray and write it with nisa::dma_copy \
                     (err_hbm_tensor_with_init_value_not_supported)",
                    self.buffer.nki_name()
                ),
            );
        }
        let t = full_tile(&ins, self.buffer.mem(), dims, value, dtype);
        trace_full(&ins, &t, self.buffer, dims, value, dtype);
        Tensor::on_chip(&ins, t, self)
    }
}

/// The buffer of an on-chip tile in `mem` (an HBM `mem` has failed before).
fn on_chip_buffer(mem: MemKind) -> Buffer {
    match mem {
        MemKind::Psum => Buffer::Psum,
        _ => Buffer::Sbuf,
    }
}

/// Emit launches: traces `nl.full` of tile `t` as its allocation and a memset, after the fill
/// it issued (the trace drops the fill's untraced issue).
fn trace_full(ins: &Op, t: &Tile, buffer: Buffer, dims: &[usize], value: f32, dtype: DType) {
    trace_alloc(ins, TensorId::Tile(t.id), buffer, dims, dtype, None);
    ins.trace(|| {
        Call::new("nisa.memset")
            .arg("dst", crate::isa::trace_args::tile(&t.view()))
            .arg("value", Arg::Float(value.into()))
    });
}

/// Emit launches: traces the allocation of `tensor` in `buffer` (see [`Op::trace_alloc`]).
fn trace_alloc(
    ins: &Op,
    tensor: TensorId,
    buffer: Buffer,
    dims: &[usize],
    dtype: DType,
    storage: Option<crate::emit::trace::Storage>,
) {
    ins.trace_alloc(|| What::Alloc {
        tensor,
        mem: buffer.mem(),
        shared: buffer == Buffer::SharedHbm,
        dtype,
        dims: dims.to_vec(),
        storage,
    });
}

/// `nl.ndarray` of an on-chip tile in `mem` (op `ins`).
pub(crate) fn ndarray_tile(ins: &Op, mem: MemKind, dims: &[usize], dtype: DType) -> Tile {
    ins.alloc(on_chip_mem(ins, mem), dtype, dims)
}

/// `nl.full` of an on-chip tile in `mem` (op `ins`): a new tile, filled by the `memset`
/// builder on the engine the compiler picks.
pub(crate) fn full_tile(ins: &Op, mem: MemKind, dims: &[usize], value: f32, dtype: DType) -> Tile {
    let t = ins.alloc_result(on_chip_mem(ins, mem), dtype, dims);
    // A zero fill is named `nl.zeros`: the compiler stage folds one in PSUM.
    let api = if value == 0.0 { "nl.zeros" } else { "nl.full" };
    memset_to(
        &ins.recorded_as(api),
        Dst::Into(t.view()),
        dims,
        value,
        None,
    );
    t
}

fn on_chip_mem(ins: &Op, mem: MemKind) -> MemKind {
    if mem == MemKind::Hbm {
        ins.fail(
            ErrorKind::WrongMemory,
            "on-chip tiles live in sbuf or psum; HBM tensors are created on the host with Hbm::zeros / Hbm::from_array, or in a kernel with nl::ndarray(.., nl::shared_hbm / nl::private_hbm) (err_hbm_tensor_with_init_value_not_supported)",
        );
    }
    mem
}

/// A new tensor in HBM inside the running kernel (`alloc.buffer` is private or shared HBM).
fn hbm_tensor(ins: &Op, alloc: Alloc, dims: &[usize], dtype: DType) -> Tensor {
    ins.require_07(|| {
        format!(
            "a tensor allocated in HBM (nl::{}(.., nl::{}))",
            ins.api.trim_start_matches("nl."),
            alloc.buffer.nki_name()
        )
    });
    if let Some((p, b)) = alloc.address {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "address=({p}, {b}) places on-chip tensors only; a tensor in {} is placed by \
                 the runtime",
                alloc.buffer.nki_name()
            ),
        );
    }
    let shape = ins.check(Shape::new(dims));
    // A branch the launch does not take allocates nothing in HBM: its tracing ends here.
    crate::shadow::stop_if_active();
    let name = alloc.name.as_deref();
    let st = ins.with_ctx(|c| {
        let values = c.mode.executes();
        let launch = c.shared.id;
        let new = || {
            let st = HbmStorage::in_kernel(dtype, shape, values, name)?;
            st.output_of.store(launch, Ordering::Relaxed);
            Ok::<_, NkiError>(Arc::new(st))
        };
        if alloc.buffer == Buffer::PrivateHbm {
            let st = new()?;
            let what = format!("'{}' {}{}", st.name, dtype, shape);
            c.private_hbm.push((st.id, what));
            return Ok(st);
        }
        let k = c.shared_hbm_allocs;
        c.shared_hbm_allocs += 1;
        let mut all = c
            .shared
            .kernel_outputs
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match all.get(k) {
            None => {
                let st = new()?;
                all.push(st.clone());
                Ok(st)
            }
            Some(st) if st.dtype == dtype && st.shape == shape => Ok(st.clone()),
            Some(st) => Err(NkiError::new(
                ErrorKind::ShapeMismatch,
                ins.api,
                format!(
                    "shared HBM tensor {k} of the launch ({}) is {}{} in another program \
                     instance but {dtype}{shape} here: every instance allocates the kernel's \
                     shared HBM tensors in the same order, with the same shapes and dtypes",
                    st.name, st.dtype, st.shape
                ),
            )),
        }
    });
    let st = ins.check(st);
    Tensor {
        repr: Repr::Hbm(
            HbmView::of(st, crate::access::Ap::contiguous(shape)),
            alloc.buffer,
        ),
    }
}

/// A tensor in HBM holding `constant`, the row-major values of a `dims` tensor, converted
/// to `dtype` (NKI `nl.shared_constant(constant, dtype)`: "create a new tensor filled with the
/// data specified by data array"). The constant is data of the compiled kernel, in HBM before
/// the kernel runs, like a kernel input: making it issues no instruction, and reading it is a
/// DMA from HBM costed as any (`nisa::dma_copy(&tile, &c, None)`). It is shared by the
/// launch's program instances as its name says, and read-only in intent (a write into it is
/// not checked). A `constant` of another length than `dims` holds, or a shape NKI cannot
/// have, is an error naming the op and the line.
#[track_caller]
pub fn shared_constant(dims: &[usize], constant: &[f32], dtype: DType) -> Tensor {
    let ins = Op::begin("nl.shared_constant");
    let shape = ins.check(Shape::new(dims));
    if constant.len() != shape.numel() {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "a constant of shape {shape} holds {} elements, but {} values were given",
                shape.numel(),
                constant.len()
            ),
        );
    }
    let values = ins
        .executes()
        .then(|| constant.iter().map(|&v| dtype.slot(v)).collect());
    let st = HbmStorage::new(dtype, shape, values);
    Tensor {
        repr: Repr::Hbm(HbmView::of(st, Ap::contiguous(shape)), Buffer::SharedHbm),
    }
}

/// An NKI tensor (`NkiTensor`): storage in SBUF, PSUM or HBM with a shape, a dtype, a name
/// and views. Made by `nl::ndarray(dims, dtype, nl::sbuf)` (or `nl::psum`,
/// `nl::private_hbm`, `nl::shared_hbm`, with `.name(..)` / `.address(..)`).
pub struct Tensor {
    repr: Repr,
}

enum Repr {
    /// An on-chip tensor.
    Chip(Tile),
    /// A tensor in HBM the kernel allocated (the whole tensor), and its buffer.
    Hbm(HbmView, Buffer),
}

impl Tensor {
    /// Wraps the new on-chip tile `t` made by `ins` for `alloc`: names and places it.
    fn on_chip(ins: &Op, mut t: Tile, alloc: Alloc) -> Tensor {
        if let Some(n) = alloc.name {
            t.publish_name(n.clone().into());
            t.set_name(Some(n.into_boxed_str()));
        }
        if let Some(at) = alloc.address {
            let what = t.describe();
            let placed = ins.with_ctx(|c| c.mem.place(t.slot(), t.id, what, at, ins.loc));
            if let Err(e) = placed {
                raise(
                    NkiError::new(e.kind(), ins.api, e.message().to_string()),
                    ins.loc,
                );
            }
        }
        Tensor {
            repr: Repr::Chip(t),
        }
    }

    /// Names the tensor after the `let` binding `name` it is bound to, unless it has a name
    /// (see `crate::binding`).
    pub(crate) fn bind_name(&self, name: &'static str) {
        match &self.repr {
            Repr::Chip(t) => t.bind_name(name),
            Repr::Hbm(v, _) => v.st.name.set_if_default(v.st.id, name),
        }
    }

    /// A view of the whole tensor.
    #[track_caller]
    pub fn view(&self) -> TensorRef<'_> {
        match &self.repr {
            Repr::Chip(t) => TensorRef::Chip(t.view()),
            Repr::Hbm(v, _) => TensorRef::Hbm(v.clone()),
        }
    }

    /// Marks an HBM tensor the kernel allocated (an output it returns) as written only in part
    /// on purpose, for this launch. By default every element of such a tensor must be written
    /// by the launch (in execute and simulate modes; it is fresh device memory, holding
    /// garbage where nothing wrote): an element left unwritten is an
    /// [`ErrorKind::OutputNotWritten`] error naming it. Marked, its unwritten elements come
    /// back as zeros. An on-chip tensor is an [`ErrorKind::WrongMemory`] error.
    #[track_caller]
    pub fn allow_partial_write(&self) {
        let loc = SourceLoc::caller();
        match &self.repr {
            Repr::Hbm(v, _) => v.st.allow_partial_write(loc),
            Repr::Chip(t) => raise(
                NkiError::new(
                    ErrorKind::WrongMemory,
                    "allow_partial_write",
                    format!(
                        "{} is on chip: only an HBM output can be marked as written in part",
                        t.describe()
                    ),
                ),
                loc,
            ),
        }
    }

    /// The buffer the tensor lives in.
    pub fn buffer(&self) -> Buffer {
        match &self.repr {
            Repr::Chip(t) if t.mem() == MemKind::Psum => Buffer::Psum,
            Repr::Chip(_) => Buffer::Sbuf,
            Repr::Hbm(_, b) => *b,
        }
    }

    /// The tensor's name (NKI `tensor.name`): the `name` it was allocated with; an unnamed
    /// HBM tensor is `hbm<n>`, an unnamed on-chip one the empty string.
    pub fn name(&self) -> String {
        match &self.repr {
            Repr::Chip(t) => t.name().unwrap_or("").to_string(),
            Repr::Hbm(v, _) => v.st.name.to_string(),
        }
    }

    /// The on-chip tile of the tensor; an HBM tensor fails the kernel with a
    /// [`ErrorKind::WrongMemory`] error at the caller's line.
    #[track_caller]
    pub fn tile(&self) -> &Tile {
        match &self.repr {
            Repr::Chip(t) => t,
            Repr::Hbm(v, _) => not_on_chip(&v.describe(), SourceLoc::caller()),
        }
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        match &self.repr {
            Repr::Chip(t) => t.shape(),
            Repr::Hbm(v, _) => v.shape(),
        }
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        match &self.repr {
            Repr::Chip(t) => t.dtype(),
            Repr::Hbm(v, _) => v.dtype(),
        }
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape().len()
    }

    /// Number of elements.
    pub fn size(&self) -> usize {
        self.shape().iter().product()
    }

    /// The strides in elements of the whole tensor (row-major).
    pub fn strides(&self) -> Vec<isize> {
        self.view().strides()
    }

    crate::view::view_methods! { TensorRef;
        /// A view of part of the tensor (NKI `t[...]`): integer indices and ranges per
        /// dimension; on chip an integer on the partition dimension keeps it with size 1.
        fn slice(index: impl IntoIndex);
        /// The tensor viewed with shape `dims` (NKI `tensor.reshape`; on chip the partition
        /// dimension stays first).
        fn reshape(dims: &[usize]);
        /// The tensor with its dimensions reordered (NKI `tensor.permute`).
        fn permute(perm: &[usize]);
        /// An access pattern over the tensor's storage (NKI `tensor.ap(pattern, offset)`); see
        /// [`TensorRef::ap`].
        fn ap(pattern: &[[usize; 2]], offset: usize);
        /// Rows chosen at run time by an SBUF index tile (NKI `tensor.ap(pattern, offset,
        /// vector_offset=index, indirect_dim=0)`); see [`TensorRef::ap_indirect`].
        fn ap_indirect<'a>(
            pattern: &[[usize; 2]], offset: usize, vector_offset: impl Into<TileRef<'a>>
        ) -> crate::isa::IndirectAp<'a>;
        /// An access pattern reading the storage as `dtype` (NKI `tensor.ap(pattern, offset,
        /// dtype=dtype)`); see [`TensorRef::ap_as`].
        fn ap_as(pattern: &[[usize; 2]], offset: usize, dtype: DType);
        /// The same bytes read as `dtype` (NKI 0.7 `tensor.view(dtype)`); see
        /// [`TensorRef::view_as`].
        fn view_as(dtype: DType);
    }

    /// The tensor read or written through the free-dimension offsets in `index` (NKI 0.7
    /// `tensor.indirect(index, num_elem)`, NeuronCore-v4 tensor indirection); see
    /// [`TensorRef::indirect`].
    #[track_caller]
    pub fn indirect<'i>(
        &'i self,
        index: impl Into<TileRef<'i>>,
        num_elem: impl Into<Option<usize>>,
    ) -> TensorRef<'i> {
        self.view().indirect(index, num_elem)
    }

    /// The launch's storage of a shared-HBM tensor (what a kernel returns).
    pub(crate) fn returned(&self, loc: SourceLoc) -> Arc<HbmStorage> {
        match &self.repr {
            Repr::Hbm(v, Buffer::SharedHbm) => v.st.clone(),
            _ => raise(
                NkiError::new(
                    ErrorKind::WrongMemory,
                    "return",
                    format!(
                        "a kernel returns tensors allocated in nl::shared_hbm, not {} in {}",
                        self.view().describe(),
                        self.buffer().nki_name()
                    ),
                ),
                loc,
            ),
        }
    }
}

crate::view::whole_views!(Tensor => TensorRef);
crate::view::select_tensors! {
    ['i] &'i Tensor;
    ['i] &TensorRef<'i>;
    ['i] TensorRef<'i>;
}
crate::view::indirect_methods! {
    impl Tensor {
        #[doc = "Per-partition rows chosen at run time (NKI 0.7 `tensor.vector_select(0, \
                 vector_offset)`); see [`TensorRef::vector_select`]."]
        fn vector_select(dim: usize) |t, i| tensor_rows(&t.view(), dim, i.into());
    }
}
crate::view::indirect_methods! {
    impl TensorRef<'_> {
        #[doc = "Per-partition rows chosen at run time (NKI 0.7 `tensor.vector_select(0, \
                 vector_offset)`); see [`HbmView::vector_select`]. As in 0.7, HBM tensors only \
                 (an on-chip tensor is a [`ErrorKind::WrongMemory`] error); a kernel-allocated \
                 HBM tensor is also a scatter destination."]
        fn vector_select(dim: usize) |t, i| tensor_rows(t, dim, i.into());
        /// An access pattern whose rows are chosen at run time (NKI 0.7 `tensor.ap(pattern,
        /// offset, vector_offset=index, indirect_dim=0)`), for DMA gathers and scatters: see
        /// [`HbmView::ap_indirect`]. Only HBM tensors take a `vector_offset` (an on-chip tensor
        /// is a [`ErrorKind::WrongMemory`] error); a kernel-allocated HBM tensor is also a
        /// scatter destination.
        fn ap_indirect(pattern: &[[usize; 2]], offset: usize) |t, i| match t {
            TensorRef::Hbm(v) => crate::isa::IndirectAp::new(v, pattern, offset, i.into(), true),
            TensorRef::Chip(c) => Err(NkiError::new(
                ErrorKind::WrongMemory,
                "ap",
                format!(
                    "a vector_offset indexes HBM tensors only (DMA gather/scatter), not {}",
                    c.describe()
                ),
            )),
        };
    }
}

/// `t.vector_select(dim, index)`: rows of an HBM tensor (writable: the kernel allocated it).
fn tensor_rows<'b>(
    t: &TensorRef,
    dim: usize,
    index: TileRef<'b>,
) -> crate::error::Result<crate::isa::IndirectAp<'b>> {
    match t {
        TensorRef::Hbm(v) => crate::isa::IndirectAp::select_rows(v, dim, index, true),
        TensorRef::Chip(c) => Err(NkiError::new(
            ErrorKind::WrongMemory,
            "vector_select",
            format!(
                "vector_select indexes HBM tensors only (DMA gather/scatter), not {}",
                c.describe()
            ),
        )),
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.repr {
            Repr::Chip(t) => f.write_str(&t.describe()),
            Repr::Hbm(v, b) => write!(f, "{} tensor {}{}", b.nki_name(), v.st.name, v.st.shape),
        }
    }
}

/// Fails the kernel at `loc`: `what` is in HBM where an on-chip tensor is needed.
#[cold]
fn not_on_chip(what: &str, loc: SourceLoc) -> ! {
    raise(
        NkiError::new(
            ErrorKind::WrongMemory,
            "operand",
            format!(
                "{what} is in HBM, but this operand must be an on-chip tensor (sbuf or psum): \
                 move it on chip with nisa::dma_copy first"
            ),
        ),
        loc,
    )
}

/// A view of a [`Tensor`] (itself an NKI tensor): part of an on-chip tile or of an HBM tensor.
#[derive(Clone, Debug)]
pub enum TensorRef<'a> {
    /// A view of an on-chip tensor.
    Chip(TileRef<'a>),
    /// A view of an HBM tensor.
    Hbm(HbmView),
}

impl<'a> TensorRef<'a> {
    /// The access pattern of the view (over the storage's elements).
    fn ap_of(&self) -> &Ap {
        match self {
            TensorRef::Chip(t) => &t.ap,
            TensorRef::Hbm(v) => &v.ap,
        }
    }

    /// The view's shape.
    pub fn shape(&self) -> &[usize] {
        self.ap_of().shape.dims()
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        match self {
            TensorRef::Chip(t) => t.dtype(),
            TensorRef::Hbm(v) => v.dtype(),
        }
    }

    /// The address space of the storage.
    pub fn mem(&self) -> MemKind {
        match self {
            TensorRef::Chip(t) => t.mem(),
            TensorRef::Hbm(_) => MemKind::Hbm,
        }
    }

    /// The view's strides in elements of the storage, per dimension (NKI `tensor.strides`).
    pub fn strides(&self) -> Vec<isize> {
        let ap = self.ap_of();
        ap.strides[..ap.shape.ndim()].to_vec()
    }

    /// The flat element offset of the view's first element in its storage (NKI
    /// `tensor.offset`; on chip `partition * free_elements + free offset`).
    pub fn offset(&self) -> usize {
        self.ap_of().offset
    }

    /// The view's access pattern as NKI prints it (`[[step, num], ...]`, outermost first)
    /// with its offset: what [`TensorRef::ap`] takes to make the same view.
    pub fn pattern(&self) -> (Vec<[isize; 2]>, usize) {
        let ap = self.ap_of();
        (ap.pairs(), ap.offset)
    }

    /// The view's access pattern, `[[step, num], ...]` outermost first (NKI
    /// `tensor.get_pattern`); its first element is at [`TensorRef::offset`].
    pub fn get_pattern(&self) -> Vec<[isize; 2]> {
        self.ap_of().pairs()
    }

    /// True when the view covers a contiguous row-major block of its storage.
    pub fn is_contiguous(&self) -> bool {
        self.ap_of().is_contiguous()
    }

    /// [`TensorRef::ap`] with NKI 0.7's `dtype=`: the storage's bytes read as `dtype`, the
    /// pattern's steps, counts and offset in elements of `dtype` (an int32 `[128, 256]`
    /// tensor seen as bfloat16 takes `[[512, 128], [1, 512]]`); see [`TileRef::ap_as`].
    /// On chip only so far: an HBM tensor with a `dtype` other than its own is an
    /// [`ErrorKind::InvalidArgument`] error (reinterpret on chip after the DMA).
    #[track_caller]
    pub fn ap_as(&self, pattern: &[[usize; 2]], offset: usize, dtype: DType) -> TensorRef<'a> {
        match self {
            TensorRef::Chip(t) => TensorRef::Chip(t.ap_as(pattern, offset, dtype)),
            TensorRef::Hbm(v) if v.dtype() == dtype => TensorRef::Hbm(v.ap(pattern, offset)),
            TensorRef::Hbm(v) => hbm_reinterpret(v, "ap", dtype, SourceLoc::caller()),
        }
    }

    /// The same bytes read as `dtype` (NKI 0.7 `tensor.view(dtype)`): see
    /// [`TileRef::view_as`]. On chip only, as [`TensorRef::ap_as`].
    #[track_caller]
    pub fn view_as(&self, dtype: DType) -> TensorRef<'a> {
        match self {
            TensorRef::Chip(t) => TensorRef::Chip(t.view_as(dtype)),
            TensorRef::Hbm(v) if v.dtype() == dtype => TensorRef::Hbm(v.clone()),
            TensorRef::Hbm(v) => hbm_reinterpret(v, "view", dtype, SourceLoc::caller()),
        }
    }

    /// Description for messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            TensorRef::Chip(t) => t.describe(),
            TensorRef::Hbm(v) => v.describe(),
        }
    }
}

impl<'a> TensorRef<'a> {
    /// The view read or written through the free-dimension offsets in `index` (NKI 0.7
    /// `tensor.indirect(index, num_elem)`, NeuronCore-v4 tensor indirection): on chip
    /// [`TileRef::indirect`]; an HBM tensor is an [`ErrorKind::InvalidArgument`] error
    /// (tensor indirection addresses SBUF and PSUM; HBM gathers are DMAs,
    /// [`HbmView::ap_indirect`] / `vector_select`).
    #[track_caller]
    pub fn indirect(
        &self,
        index: impl Into<TileRef<'a>>,
        num_elem: impl Into<Option<usize>>,
    ) -> TensorRef<'a> {
        match self {
            TensorRef::Chip(t) => TensorRef::Chip(t.indirect(index, num_elem)),
            TensorRef::Hbm(v) => raise(
                NkiError::new(
                    ErrorKind::InvalidArgument,
                    "indirect",
                    format!(
                        "tensor indirection addresses on-chip tensors (sbuf, psum), not HBM \
                         tensor {}: gather HBM rows with a DMA (ap_indirect / vector_select)",
                        v.describe()
                    ),
                ),
                SourceLoc::caller(),
            ),
        }
    }
}

/// The view methods of [`TensorRef`] that are the same method of its on-chip or HBM view:
/// `$doc`, `fn $name($arg: $ty, ..)`.
macro_rules! either_view {
    ($($doc:literal fn $name:ident $(<$lt:lifetime>)? ($($arg:ident: $ty:ty),*);)*) => {
        impl<'a> TensorRef<'a> {
            $(
                #[doc = $doc]
                #[track_caller]
                pub fn $name $(<$lt>)? (&self, $($arg: $ty),*) -> TensorRef<'a> {
                    match self {
                        TensorRef::Chip(t) => TensorRef::Chip(t.$name($($arg),*)),
                        TensorRef::Hbm(v) => TensorRef::Hbm(v.$name($($arg),*)),
                    }
                }
            )*
        }
    };
}

either_view! {
    "The view rearranged by an einops-style pattern (NKI `tensor.rearrange`), e.g. \
     `rearrange(\"p (a b) -> p b a\", &[(\"a\", 4)])`; see [`HbmView::rearrange`]."
    fn rearrange(pattern: &str, sizes: &[(&str, usize)]);
    "Slices the view further (on chip an integer on dimension 0 keeps it with size 1; in HBM \
     integer indices drop their dimension)."
    fn slice(index: impl IntoIndex);
    "The view with shape `dims` (NKI `tensor.reshape`); free, no data moves."
    fn reshape(dims: &[usize]);
    "The view with its dimensions reordered (NKI `tensor.permute`; on chip dimension 0 stays \
     first)."
    fn permute(perm: &[usize]);
    "The view with a new size-1 dimension at position `dim` (NKI `tensor.expand_dim`; on chip \
     after the partition dimension)."
    fn expand_dim(dim: usize);
    "The view without its size-1 dimension `dim` (NKI `tensor.squeeze_dim`; on chip the \
     partition dimension stays)."
    fn squeeze_dim(dim: usize);
    "Position `index` of dimension `dim` (NKI `tensor.select(dim, index)`, as indexing `dim` \
     with an integer: the dimension is dropped, except an on-chip partition dimension, which \
     stays with size 1)."
    fn select<'i>(dim: usize, index: impl crate::view::SelectIndex<'i>);
    "The view's size-1 dimension `dim` repeated `size` times (stride 0; NKI \
     `tensor.broadcast`): a read-only view (on chip a free dimension only)."
    fn broadcast(dim: usize, size: usize);
    "The view with dimension `dim` split into `shape` (NKI `tensor.reshape_dim`; one entry \
     may be `-1`); see [`HbmView::reshape_dim`] (on chip the partition dimension is not \
     split)."
    fn reshape_dim(dim: usize, shape: &[isize]);
    "The view with dimensions `start_dim..=end_dim` merged (NKI `tensor.flatten_dims`); see \
     [`HbmView::flatten_dims`] (on chip `start_dim` is at least 1)."
    fn flatten_dims(start_dim: usize, end_dim: usize);
    "An access pattern over the storage (NKI 0.7 `tensor.ap(pattern, offset)`), with its \
     exact semantics: `pattern[k] = [step, num]`, outermost first, and element `(i0, i1, \
     ...)` of the result is element `offset + i0 * step0 + i1 * step1 + ...` of the tensor's \
     storage (row-major, in elements of its dtype). It is absolute: the view it is called on \
     is ignored (`.ap` does not compose). On chip the first pair is the partition pair: its \
     step must be the storage's free-element count (partitions are not strided), and every \
     partition's elements stay within its partition. A pattern reaching outside the storage \
     is an [`ErrorKind::OutOfBounds`] error naming the tensor."
    fn ap(pattern: &[[usize; 2]], offset: usize);
}

/// Raises the error of reading HBM tensor `v` as another `dtype` through `op` (`ap` or
/// `view`): reinterpreting views exist on chip only.
fn hbm_reinterpret(v: &HbmView, op: &'static str, dtype: DType, loc: SourceLoc) -> ! {
    raise(
        NkiError::new(
            ErrorKind::InvalidArgument,
            op,
            format!(
                "reading HBM tensor {} as {dtype} is not supported: DMA it on chip and \
                 reinterpret the tile there",
                v.describe()
            ),
        ),
        loc,
    )
}

impl<'a> From<&'a Tensor> for TensorRef<'a> {
    #[track_caller]
    fn from(t: &'a Tensor) -> Self {
        t.view()
    }
}

impl<'a> From<&'a Tensor> for TileRef<'a> {
    #[track_caller]
    fn from(t: &'a Tensor) -> Self {
        match &t.repr {
            Repr::Chip(tile) => tile.view(),
            Repr::Hbm(v, _) => not_on_chip(&v.describe(), SourceLoc::caller()),
        }
    }
}

impl<'a> From<TensorRef<'a>> for TileRef<'a> {
    #[track_caller]
    fn from(t: TensorRef<'a>) -> Self {
        match t {
            TensorRef::Chip(v) => v,
            TensorRef::Hbm(v) => not_on_chip(&v.describe(), SourceLoc::caller()),
        }
    }
}

impl<'a> From<&TensorRef<'a>> for TileRef<'a> {
    #[track_caller]
    fn from(t: &TensorRef<'a>) -> Self {
        t.clone().into()
    }
}

impl<'a> From<&'a Tensor> for Operand<'a> {
    #[track_caller]
    fn from(t: &'a Tensor) -> Self {
        Operand::Tile(t.into())
    }
}

impl<'a> From<TensorRef<'a>> for Operand<'a> {
    #[track_caller]
    fn from(t: TensorRef<'a>) -> Self {
        Operand::Tile(t.into())
    }
}

impl<'a> From<&TensorRef<'a>> for Operand<'a> {
    #[track_caller]
    fn from(t: &TensorRef<'a>) -> Self {
        Operand::Tile(t.into())
    }
}

impl<'a> TensorRef<'a> {
    /// The view as a DMA endpoint.
    fn endpoint(self) -> DmaEndpoint<'a> {
        match self {
            TensorRef::Chip(t) => DmaEndpoint::Tile(t),
            TensorRef::Hbm(v) => DmaEndpoint::Hbm(v),
        }
    }
}

impl<'a> DmaSource<'a> for &'a Tensor {
    fn dma_source(self) -> DmaEndpoint<'a> {
        self.view().endpoint()
    }
}
impl<'a> DmaTarget<'a> for &'a Tensor {
    fn dma_target(self) -> DmaEndpoint<'a> {
        self.view().endpoint()
    }
}
impl<'a> DmaSource<'a> for TensorRef<'a> {
    fn dma_source(self) -> DmaEndpoint<'a> {
        self.endpoint()
    }
}
impl<'a> DmaTarget<'a> for TensorRef<'a> {
    fn dma_target(self) -> DmaEndpoint<'a> {
        self.endpoint()
    }
}
impl<'a> DmaSource<'a> for &TensorRef<'a> {
    fn dma_source(self) -> DmaEndpoint<'a> {
        self.clone().endpoint()
    }
}
impl<'a> DmaTarget<'a> for &TensorRef<'a> {
    fn dma_target(self) -> DmaEndpoint<'a> {
        self.clone().endpoint()
    }
}

impl TensorRef<'_> {
    /// The HBM view `nl.store` (`api`) writes; an on-chip view fails the kernel at `loc` with
    /// an [`ErrorKind::WrongMemory`] error.
    pub(crate) fn hbm_of(&self, api: &'static str, loc: SourceLoc) -> HbmView {
        match self {
            TensorRef::Hbm(v) => v.clone(),
            TensorRef::Chip(t) => raise(
                NkiError::new(
                    ErrorKind::WrongMemory,
                    api,
                    format!(
                        "{} is on chip, but {api} moves data between HBM and a tile: pass an \
                         HBM tensor (nl::shared_hbm, nl::private_hbm) or use nisa::dma_copy",
                        t.describe()
                    ),
                ),
                loc,
            ),
        }
    }
}

/// The shared-HBM tensors one program instance returned from a kernel (opaque).
#[doc(hidden)]
pub struct Returned(pub(crate) Vec<Arc<HbmStorage>>);

/// What a kernel body may return: a shared-HBM [`Tensor`] or a tuple of them (the
/// `#[nki_kernel]` form `fn k(...) -> Hbm<T>` / `-> (Hbm<A>, Hbm<B>)`).
pub trait KernelReturn {
    /// The tensors' storages, in order; raises at `loc` for a tensor not in shared HBM.
    #[doc(hidden)]
    fn returned(self, loc: SourceLoc) -> Returned;
}

/// What a launcher hands back for a kernel's returned tensors: an [`Hbm`] or a tuple of them.
pub trait KernelOutputs: Sized {
    /// The outputs from the tensors the kernel returned; a dtype differing from the
    /// declared element type is an [`ErrorKind::DType`] error.
    #[doc(hidden)]
    fn from_returned(r: Returned) -> Result<Self>;
}

impl KernelReturn for Tensor {
    fn returned(self, loc: SourceLoc) -> Returned {
        Returned(vec![Tensor::returned(&self, loc)])
    }
}

impl<T: Element> KernelOutputs for Hbm<T> {
    fn from_returned(r: Returned) -> Result<Self> {
        let st = r.0.into_iter().next().ok_or_else(|| {
            NkiError::new(
                ErrorKind::OutputNotWritten,
                "launch",
                "the kernel returned no tensor",
            )
        })?;
        if st.dtype != T::DTYPE {
            return Err(NkiError::new(
                ErrorKind::DType,
                "launch",
                format!(
                    "the kernel returns Hbm<{}>, but its returned tensor {} is {}{}",
                    T::DTYPE,
                    st.name,
                    st.dtype,
                    st.shape
                ),
            ));
        }
        Ok(Hbm::wrap(st))
    }
}

/// Implements [`KernelReturn`] and [`KernelOutputs`] for tuples.
macro_rules! tuple_returns {
    ($(($($t:ident $i:tt),+))*) => {$(
        impl KernelReturn for ($(tuple_returns!(@tensor $t),)+) {
            fn returned(self, loc: SourceLoc) -> Returned {
                Returned(vec![$(Tensor::returned(&self.$i, loc)),+])
            }
        }
        impl<$($t: Element),+> KernelOutputs for ($(Hbm<$t>,)+) {
            fn from_returned(r: Returned) -> Result<Self> {
                let v = r.0;
                Ok(($(Hbm::<$t>::from_returned(Returned(vec![v[$i].clone()]))?,)+))
            }
        }
    )*};
    (@tensor $t:ident) => { Tensor };
}
tuple_returns! {
    (A 0, B 1)
    (A 0, B 1, C 2)
    (A 0, B 1, C 2, D 3)
}

/// Where the program instances of a launch leave the tensors their kernel returns (the
/// `#[nki_kernel]` launchers of a kernel with a return type use it).
#[doc(hidden)]
#[derive(Default)]
pub struct ReturnSlot(Mutex<Option<Vec<Arc<HbmStorage>>>>);

impl ReturnSlot {
    /// An empty slot.
    pub fn new() -> ReturnSlot {
        ReturnSlot::default()
    }

    /// Notes what an instance returned: every instance returns the same tensors (the
    /// launch's shared-HBM tensors of the same numbers), else the instance fails.
    #[track_caller]
    pub fn set(&self, r: impl KernelReturn) {
        let loc = SourceLoc::caller();
        let r = r.returned(loc).0;
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match &*g {
            None => *g = Some(r),
            Some(first) if first.iter().map(|s| s.id).eq(r.iter().map(|s| s.id)) => {}
            Some(first) => {
                let names = |v: &[Arc<HbmStorage>]| {
                    v.iter().map(|s| s.name.to_string()).collect::<Vec<_>>()
                };
                let msg = format!(
                    "program instances return different tensors ({:?} and {:?}): every \
                     instance returns the same shared HBM tensors",
                    names(first),
                    names(&r)
                );
                drop(g);
                raise(
                    NkiError::new(ErrorKind::InvalidArgument, "return", msg),
                    loc,
                )
            }
        }
    }

    /// The returned tensors as the kernel's declared outputs.
    pub fn take<O: KernelOutputs>(self) -> Result<O> {
        let v = self.0.into_inner().unwrap_or_else(|p| p.into_inner());
        O::from_returned(Returned(v.unwrap_or_default()))
    }
}
