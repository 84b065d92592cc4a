//! Stream buffers (NKI 0.8 `nl.alloc_stream_buffers(view, buffer=, dim=, num_slots=)`,
//! `nl.NkiStreamBuffers`): a pool of `num_slots` on-chip work areas for walking a large view
//! one step at a time. One step is the source indexed at one position of dimension `dim`
//! (for a tile grid: one grid coordinate along `dim`, e.g. one tile of a column of tiles);
//! each slot has the step's full capacity. `buffers.get(k)` is logical step `k` in slot
//! `k % num_slots`; the last step of a source ending in a partial tile is a clamped view of
//! its full-size slot.
//!
//! Selecting a slot allocates nothing, moves no data and records no instruction; the slots are
//! ordinary on-chip tensors, so the timing model orders the instructions that reuse a slot
//! by their data dependencies (a load into slot `k % num_slots` waits for the last reads of
//! step `k - num_slots`), which is what the number of slots trades against memory. Indices are
//! `usize`, known while the kernel is traced (NKI: compile-time Python integers; an index from
//! a device loop is an `NkiScalar`, which does not type-check here, as NKI rejects it).

use super::tile_grid::{GridPattern, GridView, TileGrid};
use crate::context::{raise, with_ctx};
use crate::dtype::DType;
use crate::error::{ErrorKind, NkiError, SourceLoc};
use crate::hbm::{HbmView, HbmViewMut};
use crate::tensor::{Buffer, Tensor, TensorRef};

/// What [`alloc_stream_buffers`] streams through: a tensor view (each step is the view indexed
/// at one position of `dim`) or a [`TileGrid`] (each step is one grid coordinate along `dim`).
pub trait StreamSource {
    /// The capacity of one step and the shape of each step (clamped at the source's end), for
    /// streaming along `dim`; `Err` names what is wrong.
    fn stream_steps(&self, dim: usize) -> Result<(Vec<usize>, Vec<Vec<usize>>), String>;
    /// The source's dtype.
    fn stream_dtype(&self) -> DType;
    /// How a step of a tile-grid source lies in tiles (its steps are grids of tiles), for
    /// streaming along `dim`; `None` for a view.
    fn stream_grid(&self, _dim: usize) -> Option<GridPattern> {
        None
    }
}

/// The steps of a plain view of shape `dims` along `dim`: the view indexed by an integer
/// there, which drops the dimension, except that an on-chip view (`on_chip`) keeps its
/// partition dimension and at least two dimensions (size 1 in their place).
fn view_steps(
    dims: &[usize],
    dim: usize,
    on_chip: bool,
) -> Result<(Vec<usize>, Vec<Vec<usize>>), String> {
    if dim >= dims.len() {
        return Err(format!("dim={dim} of a view of shape {dims:?}"));
    }
    let keep = on_chip && (dim == 0 || dims.len() <= 2);
    let step: Vec<usize> = (0..dims.len())
        .filter(|&d| d != dim || keep)
        .map(|d| if d == dim { 1 } else { dims[d] })
        .collect();
    Ok((step.clone(), vec![step; dims[dim]]))
}

macro_rules! view_sources {
    ($($t:ty => |$v:ident| $on_chip:expr),*) => {$(
        impl StreamSource for $t {
            fn stream_steps(&self, dim: usize) -> Result<(Vec<usize>, Vec<Vec<usize>>), String> {
                let $v = self;
                view_steps(&self.grid_dims(), dim, $on_chip)
            }
            fn stream_dtype(&self) -> DType {
                self.grid_dtype()
            }
        }
    )*};
}
view_sources!(
    HbmView => |_v| false,
    HbmViewMut => |_v| false,
    TensorRef<'_> => |v| v.mem() != crate::record::MemKind::Hbm
);

impl StreamSource for &Tensor {
    fn stream_steps(&self, dim: usize) -> Result<(Vec<usize>, Vec<Vec<usize>>), String> {
        let on_chip = self.view().mem() != crate::record::MemKind::Hbm;
        view_steps(self.shape(), dim, on_chip)
    }
    fn stream_dtype(&self) -> DType {
        self.dtype()
    }
}

impl<V: GridView> StreamSource for TileGrid<V> {
    fn stream_steps(&self, dim: usize) -> Result<(Vec<usize>, Vec<Vec<usize>>), String> {
        let shape = self.shape();
        if dim >= shape.len() {
            return Err(format!("dim={dim} of a tile grid of shape {shape:?}"));
        }
        let mut index = vec![
            crate::access::Ix::Range {
                start: 0,
                end: None,
                step: 1,
            };
            dim + 1
        ];
        let steps: Vec<Vec<usize>> = (0..shape[dim])
            .map(|k| {
                index[dim] = crate::access::Ix::At(k);
                self.get(index.as_slice()).data_shape()
            })
            .collect();
        index[dim] = crate::access::Ix::At(0);
        Ok((self.get(index.as_slice()).capacity(), steps))
    }
    fn stream_dtype(&self) -> DType {
        self.dtype()
    }
    fn stream_grid(&self, dim: usize) -> Option<GridPattern> {
        let mut index = vec![
            crate::access::Ix::Range {
                start: 0,
                end: None,
                step: 1,
            };
            dim + 1
        ];
        index[dim] = crate::access::Ix::At(0);
        Some(self.get(index.as_slice()).pattern())
    }
}

/// A pool of on-chip slots addressed by logical stream step (NKI `nl.NkiStreamBuffers`; made
/// by [`alloc_stream_buffers`]).
#[derive(Debug)]
pub struct StreamBuffers {
    /// The slots, each of the step's full capacity.
    slots: Vec<Tensor>,
    /// The shape of each logical step (the last one clamped for a partial source).
    steps: Vec<Vec<usize>>,
    /// How a step lies in tiles when the source is a tile grid.
    grid: Option<GridPattern>,
}

/// Allocates `num_slots` on-chip slots (`buffer`: `nl::sbuf` or `nl::psum`), each the capacity
/// of one step of `source` along `dim` (NKI `nl.alloc_stream_buffers(view, buffer=, dim=,
/// num_slots=, dtype=)`; `dtype` `None`: the source's). Errors: `dim` outside the source, no
/// slot, an HBM buffer; a step too large for the buffer is `nl.ndarray`'s error.
///
/// ```
/// use nki_core::prelude::*;
/// let x = Hbm::from_vec(&[300, 8], (0..2400).map(|v| v as f32).collect()).unwrap();
/// let mut y = Hbm::<f32>::zeros([300, 8]);
/// let out = y.as_output();
/// Launch::new(1)
///     .run(|| {
///         let rows = nl::tiles(x.view(), &[128, 8]);
///         let outs = nl::tiles(out.view(), &[128, 8]);
///         let bufs = nl::alloc_stream_buffers(rows.clone(), nl::sbuf, 0, 2, None);
///         for k in 0..rows.shape()[0] {
///             let slot = bufs.get(k); // slot k % 2; step 2 is 44 rows
///             nisa::dma_copy(&slot, rows.at(k).data(), None);
///             nisa::dma_copy(outs.at(k).data(), &slot, None);
///         }
///     })
///     .unwrap();
/// assert_eq!(y.to_vec().unwrap(), (0..2400).map(|v| v as f32).collect::<Vec<_>>());
/// ```
#[track_caller]
pub fn alloc_stream_buffers(
    source: impl StreamSource,
    buffer: Buffer,
    dim: usize,
    num_slots: usize,
    dtype: Option<DType>,
) -> StreamBuffers {
    let loc = SourceLoc::caller();
    let fail = |msg: String| -> ! {
        raise(
            NkiError::new(ErrorKind::InvalidArgument, "nl.alloc_stream_buffers", msg),
            loc,
        )
    };
    if num_slots == 0 {
        fail("num_slots=0: a stream needs at least one slot".to_string());
    }
    if buffer.mem() == crate::record::MemKind::Hbm {
        fail(format!(
            "buffer={}: stream slots are on-chip work areas (nl.sbuf or nl.psum)",
            buffer.nki_name()
        ));
    }
    let (capacity, steps) = source.stream_steps(dim).unwrap_or_else(|why| {
        fail(format!(
            "{why}: dim names the source dimension the stream advances along"
        ))
    });
    let dtype = dtype.unwrap_or_else(|| source.stream_dtype());
    let grid = source.stream_grid(dim);
    let mut slots = Vec::with_capacity(num_slots);
    for _ in 0..num_slots {
        let slot = super::data::ndarray(&capacity, dtype, buffer);
        // A slot is one buffer for every step it holds: the compiler's address rotation does
        // not rename it, so reusing it waits for its earlier steps' accesses.
        let id = slot.tile().id;
        with_ctx("nl.alloc_stream_buffers", loc, |c| c.mem.keep_buffer(id));
        slots.push(slot);
    }
    StreamBuffers { slots, steps, grid }
}

impl StreamBuffers {
    /// The number of slots.
    pub fn num_slots(&self) -> usize {
        self.slots.len()
    }

    /// The number of logical steps of the source (NKI: `source.shape[dim]`).
    pub fn num_steps(&self) -> usize {
        self.steps.len()
    }

    /// Logical step `k` (NKI `buffers[k]`): slot `k % num_slots`, clamped to step `k`'s
    /// shape, as one tensor view. A step past the source's end is an
    /// [`ErrorKind::OutOfBounds`] error.
    #[track_caller]
    pub fn get(&self, k: usize) -> TensorRef<'_> {
        self.step(k, SourceLoc::caller())
    }

    /// Logical step `k` of a tile-grid source as a grid of the source's tiles over its slot
    /// (NKI's `buffers[k]` when a step holds several tiles: an `NkiTileGrid`), with the
    /// source step's coordinates (the one the stream advances along consumed) and its last
    /// tiles clamped as the step's. The errors of [`StreamBuffers::get`]; a stream over a
    /// plain view has no tiles (an [`ErrorKind::InvalidArgument`] error).
    #[track_caller]
    pub fn grid(&self, k: usize) -> TileGrid<TensorRef<'_>> {
        let loc = SourceLoc::caller();
        let Some(pattern) = &self.grid else {
            raise(
                NkiError::new(
                    ErrorKind::InvalidArgument,
                    "NkiStreamBuffers",
                    "the stream's source is a view, not a tile grid: its steps have no tiles \
                     (get(k) is the step)"
                        .to_string(),
                ),
                loc,
            )
        };
        pattern.over(self.step(k, loc))
    }

    /// Step `k` as one view (see [`StreamBuffers::get`]), asked for at `loc`.
    fn step(&self, k: usize, loc: SourceLoc) -> TensorRef<'_> {
        let Some(step) = self.steps.get(k) else {
            raise(
                NkiError::new(
                    ErrorKind::OutOfBounds,
                    "NkiStreamBuffers",
                    format!(
                        "step {k} of a stream of {} steps (indices are logical steps \
                         0..{})",
                        self.steps.len(),
                        self.steps.len()
                    ),
                ),
                loc,
            )
        };
        let slot = &self.slots[k % self.slots.len()];
        if step.as_slice() == slot.shape() {
            return slot.view();
        }
        let index: Vec<crate::access::Ix> = step
            .iter()
            .map(|&n| crate::access::Ix::Range {
                start: 0,
                end: Some(n),
                step: 1,
            })
            .collect();
        slot.view().slice(index)
    }
}
