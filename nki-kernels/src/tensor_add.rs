//! Streaming element-wise tensor addition: `c = a + b` over a 2-D tensor, tiled 128 rows at a
//! time (one row per partition) and streamed along the free dimension in chunks of a tunable
//! `free_dim`. The free-dimension chunk size trades DMA efficiency (bigger transfers) against
//! SBUF footprint, which is what the tile-size sweeps in `benches/sweeps.rs` explore.

use nki_core::prelude::*;
use std::ops::Range;

/// Rows per tile: the partition dimension of a tile (NKI `nl.tile_size.pmax`).
pub const PARTITIONS: usize = nl::tile_size::PMAX;

/// The free-dimension chunk the tutorials use (512 elements per partition).
pub const DEFAULT_FREE_DIM: usize = 512;

/// Checks the operands of [`tensor_add_stream`](fn@tensor_add_stream); returns `(rows, cols)`.
fn add_shapes(
    a: &[usize],
    b: &[usize],
    c: &[usize],
    free_dim: usize,
) -> Result<(usize, usize), NkiError> {
    let op = "tensor_add_stream";
    if a.len() != 2 {
        return Err(NkiError::new(
            ErrorKind::InvalidArgument,
            op,
            format!("expected 2-D tensors [rows, cols], got a{a:?}"),
        ));
    }
    if a != b || a != c {
        return Err(NkiError::new(
            ErrorKind::ShapeMismatch,
            op,
            format!("operands must have one shape: a{a:?}, b{b:?}, c{c:?}"),
        ));
    }
    if free_dim == 0 {
        return Err(NkiError::new(
            ErrorKind::InvalidArgument,
            op,
            "free_dim must be at least 1",
        ));
    }
    Ok((a[0], a[1]))
}

/// The rows of row tile `p` and the columns of chunk `f` of a `[rows, cols]` tensor, in tiles
/// of [`PARTITIONS`] rows and chunks of `free_dim` columns (the last of each may be shorter).
fn tile(
    p: usize,
    f: usize,
    (rows, cols): (usize, usize),
    free_dim: usize,
) -> (Range<usize>, Range<usize>) {
    let (r0, c0) = (p * PARTITIONS, f * free_dim);
    (
        r0..(r0 + PARTITIONS).min(rows),
        c0..(c0 + free_dim).min(cols),
    )
}

/// `c = a + b` for 2-D tensors of any shape, as one kernel instance (launch it on grid `[1]`).
///
/// Rows are taken 128 at a time (the last tile may be partial); each row tile is streamed along
/// the free dimension in chunks of `free_dim` elements (the last chunk may be shorter): load
/// both chunks, add on VectorE, store. Both loops are `affine_range`, so the scheduler may
/// overlap the loads of one chunk with the add and store of another.
///
/// Mismatched shapes, a rank other than 2 or `free_dim == 0` fail the launch with an error; a
/// `free_dim` whose three live chunks exceed SBUF fails it with a capacity error.
#[nki_kernel]
pub fn tensor_add_stream<T: Element>(a: &Hbm<T>, b: &Hbm<T>, c: &mut Hbm<T>, free_dim: usize) {
    let (rows, cols) = nl::check(add_shapes(a.shape(), b.shape(), c.shape(), free_dim));
    for p in nl::affine_range(rows.div_ceil(PARTITIONS)) {
        for f in nl::affine_range(cols.div_ceil(free_dim)) {
            let (r, cc) = tile(p, f, (rows, cols), free_dim);
            let x = nl::load(a.slice((r.clone(), cc.clone())));
            let y = nl::load(b.slice((r.clone(), cc.clone())));
            let sum = nl::add(&x, &y);
            nl::store(c.slice((r, cc)), &sum);
        }
    }
}

/// The NKI 0.7 twin of [`tensor_add_stream`](fn@tensor_add_stream): `a + b`, returned, on one
/// core (launch it on `[1]`), the same row tiles and free-dimension chunks of `free_dim`
/// elements, each an SBUF tensor allocated with `nl::ndarray`, moved with `nisa::dma_copy` and
/// added by `nisa::tensor_tensor` into a destination given first. It issues the same
/// instructions as the Beta-1 kernel and computes the same values.
///
/// The same argument errors as [`tensor_add_stream`](fn@tensor_add_stream).
#[nki_kernel(nki = "0.7")]
pub fn tensor_add_stream_07<T: Element>(a: &Hbm<T>, b: &Hbm<T>, free_dim: usize) -> Hbm<T> {
    let (rows, cols) = nl::check(add_shapes(a.shape(), b.shape(), a.shape(), free_dim));
    let c = nl::ndarray(a.shape(), a.dtype(), nl::shared_hbm);
    for p in nl::affine_range(rows.div_ceil(PARTITIONS)) {
        for f in nl::affine_range(cols.div_ceil(free_dim)) {
            let (r, cc) = tile(p, f, (rows, cols), free_dim);
            let shape = [r.len(), cc.len()];
            let x = nl::ndarray(&shape, a.dtype(), nl::sbuf);
            let y = nl::ndarray(&shape, b.dtype(), nl::sbuf);
            nisa::dma_copy(&x, a.slice((r.clone(), cc.clone())), None);
            nisa::dma_copy(&y, b.slice((r.clone(), cc.clone())), None);
            let sum = nl::ndarray(&shape, a.dtype(), nl::sbuf);
            nisa::tensor_tensor(&sum, &x, &y, nl::AluOp::Add, None);
            nisa::dma_copy(c.slice((r, cc)), &sum, None);
        }
    }
    c
}

/// [`tensor_add_stream`](fn@tensor_add_stream) with the tutorial's chunk of [`DEFAULT_FREE_DIM`] elements, launched on
/// grid `[1]` in execute mode.
pub fn tensor_add<T: Element>(
    a: &Hbm<T>,
    b: &Hbm<T>,
    c: &mut Hbm<T>,
) -> Result<LaunchReport, NkiError> {
    tensor_add_stream::launch(1, a, b, c, DEFAULT_FREE_DIM)
}
