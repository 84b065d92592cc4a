//! Streaming element-wise tensor addition: `c = a + b` over a 2-D tensor, tiled 128 rows at a
//! time (one row per partition) and streamed along the free dimension in chunks of a tunable
//! `free_dim`. The free-dimension chunk size trades DMA efficiency (bigger transfers) against
//! SBUF footprint, which is what the tile-size sweeps in `benches/sweeps.rs` explore.

use nki_core::prelude::*;

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
        let r0 = p * PARTITIONS;
        let rows_here = PARTITIONS.min(rows - r0);
        for f in nl::affine_range(cols.div_ceil(free_dim)) {
            let c0 = f * free_dim;
            let cols_here = free_dim.min(cols - c0);
            let (r, cc) = (r0..r0 + rows_here, c0..c0 + cols_here);
            let x = nl::load(a.slice((r.clone(), cc.clone())));
            let y = nl::load(b.slice((r.clone(), cc.clone())));
            let sum = nl::add(&x, &y);
            nl::store(c.slice((r, cc)), &sum);
        }
    }
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
