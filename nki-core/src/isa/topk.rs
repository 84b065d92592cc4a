//! GpSimdE `topk`: the K largest of up to 65535 bf16 values per GpSimd core, with their
//! positions (the hardware top-k of the NKI Library's sparse-attention indexer and MoE
//! routers).
//!
//! Definition (NKI `nki.isa.topk(val_dst, idx_dst, src, n)`, added in NKI 0.6 / SDK 2.32; the
//! 0.7 stub lists it no longer, the current reference page still does): `src` is read as a
//! "16-partition snake": element `e` of a group sits at partition `e % 16`, free column
//! `e / 16` of the group's 16 partitions (one GpSimd core), and `n` elements are active
//! (`src` has at least `ceil(n / 16)` columns). For every 16-partition group the instruction
//! selects the `K` largest values (`K` = `val_dst`'s elements per partition) and writes them
//! in ascending order with their 0-based snake positions, again snake-encoded: the `j`-th
//! value goes to partition `j % 16`, column `j / 16` of the group in `val_dst` (bf16) and its
//! position to the same place in `idx_dst` (uint32).
//!
//! Why this layout: the reference page says both "each partition operates independently"
//! and that the source is a 16-partition snake; the NKI Library's golden for its hardware
//! top-k (`_topk_idx_golden` of the sparse-attention indexer test) settles it: one query per
//! 16-partition group, ranked over its snake positions, results ascending at
//! `[16g + j % 16, j / 16]`. The columns past `ceil(K / 16)` (and the rows past `K % 16` of
//! the last one) are not written \[A\]. Ties: the golden takes the top K of a stable
//! descending sort (equal values by position) and reverses it, so among equal values the
//! later position comes first in the ascending output; NaN, on which the docs are silent,
//! ranks above every number (as `max8`).
//!
//! Rules (the page's constraints, as errors): `src` and `val_dst` bf16, `idx_dst` uint32, all
//! in SBUF; `8 <= n < 65536`, `1 <= K < 32768`, `K <= n`, `src` has `ceil(n / 16)` columns or
//! more; the partition count is a multiple of 16 starting at a core boundary.
//!
//! Cost: "`4*n + K` GpSIMD Engine cycles per partition" (the reference page's estimated
//! instruction cost \[E\]) after GpSimdE's start-up; the record carries `4n + K` as its
//! per-partition cycle count.

use super::max8::descending;
use super::op::Op;
use crate::builder::instruction;
use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::record::{Engine, MemKind, Opcode, Regions};
use crate::tile::TileRef;

/// Partitions of one snake (one GpSimd core).
const SNAKE: usize = 16;

/// The bound (exclusive) of the snake length `n` `topk` takes.
pub const TOPK_MAX_N: usize = 65536;

/// The largest `K` (exclusive) `topk` takes.
pub const TOPK_MAX_K: usize = 32768;

/// The views of `dst` (`[P, K]`) the results of a `K`-element snake occupy in every group:
/// its full columns and the first `K % 16` rows of the last, partial column.
fn result_views<'a>(dst: &TileRef<'a>, k: usize) -> Vec<TileRef<'a>> {
    let (full, rest) = (k / SNAKE, k % SNAKE);
    let mut out = Vec::new();
    for g in 0..dst.partitions() / SNAKE {
        let p0 = g * SNAKE;
        if full > 0 {
            out.push(dst.slice((p0..p0 + SNAKE, 0..full)));
        }
        if rest > 0 {
            out.push(dst.slice((p0..p0 + rest, full..full + 1)));
        }
    }
    out
}

/// Splits one group's `K` results (ascending order) into the values of its
/// [`result_views`]: the full columns row-major, then the partial column.
fn snake_rows(vals: &[f32]) -> Vec<Vec<f32>> {
    let k = vals.len();
    let (full, rest) = (k / SNAKE, k % SNAKE);
    let mut out = Vec::new();
    if full > 0 {
        out.push(
            (0..SNAKE * full)
                .map(|i| vals[(i % full) * SNAKE + i / full])
                .collect(),
        );
    }
    if rest > 0 {
        out.push(vals[full * SNAKE..].to_vec());
    }
    out
}

instruction! {
    /// Selects, in every 16-partition group of `src` (a bf16 snake of `n` active elements), the
    /// `K` largest values (`K` = `val_dst`'s elements per partition) and writes them in ascending
    /// order into `val_dst` (bf16) and their snake positions into `idx_dst` (uint32), both
    /// snake-encoded (NKI `nisa.topk(val_dst, idx_dst, src, n)`; see the module docs for the
    /// layout and why). One GpSimdE instruction of `4n + K` cycles.
    pub fn topk<'v, 'i, 's>(
        val_dst: into TileRef<'v>, idx_dst: into TileRef<'i>, src: into TileRef<'s>, n: usize,
    ) as ins = "nisa.topk" {
        topk_on(&ins, [val_dst, idx_dst, src], n);
    }
}

/// [`topk`] on its converted operands.
#[track_caller]
fn topk_on(ins: &Op, [vd, id, src]: [TileRef; 3], n: usize) {
    for (what, t, want) in [
        ("src", &src, DType::BF16),
        ("val_dst", &vd, DType::BF16),
        ("idx_dst", &id, DType::U32),
    ] {
        ins.operand(what, t);
        ins.memory(what, t, &[MemKind::Sbuf]);
        if t.dtype() != want {
            ins.fail(
                ErrorKind::DType,
                format!("{what} {} of 'topk' must be {want}", t.describe()),
            );
        }
    }
    ins.same_partitions(("src", &src), ("val_dst", &vd));
    ins.same_partitions(("src", &src), ("idx_dst", &id));
    ins.same_free(("val_dst", &vd), ("idx_dst", &id));
    let (p, k) = (src.partitions(), vd.free_size());
    if p % SNAKE != 0 || src.start_partition() % SNAKE != 0 {
        ins.fail(
            ErrorKind::PartitionOffset,
            format!(
                "src {} of 'topk' must cover whole 16-partition snakes (a multiple of 16 partitions starting at a multiple of 16)",
                src.describe()
            ),
        );
    }
    if !(8..TOPK_MAX_N).contains(&n) {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!("n = {n} of 'topk' must satisfy 8 <= n < {TOPK_MAX_N}"),
        );
    }
    if !(1..TOPK_MAX_K).contains(&k) || k > n {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "val_dst {} of 'topk' asks for K = {k}; K must satisfy 1 <= K < {TOPK_MAX_K} and K <= n = {n}",
                vd.describe()
            ),
        );
    }
    let cols = src.free_size();
    if cols < n.div_ceil(SNAKE) {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "src {} of 'topk' has {cols} columns; a snake of n = {n} needs ceil(n / 16) = {}",
                src.describe(),
                n.div_ceil(SNAKE)
            ),
        );
    }
    let (val_views, idx_views) = (result_views(&vd, k), result_views(&id, k));
    ins.issue(
        &val_views.iter().chain(&idx_views).collect::<Vec<_>>(),
        || {
            let x = ins.read(&src);
            let per_group = val_views.len() / (p / SNAKE);
            for g in 0..p / SNAKE {
                let snake: Vec<f32> = (0..n)
                    .map(|e| x[(g * SNAKE + e % SNAKE) * cols + e / SNAKE])
                    .collect();
                let mut top: Vec<usize> = descending(&snake).into_iter().take(k).collect();
                top.reverse();
                let vals: Vec<f32> = top.iter().map(|&e| snake[e]).collect();
                let idxs: Vec<f32> = top.iter().map(|&e| e as f32).collect();
                let range = g * per_group..(g + 1) * per_group;
                for (view, rows) in val_views[range.clone()].iter().zip(snake_rows(&vals)) {
                    view.scatter(rows);
                }
                for (view, rows) in idx_views[range].iter().zip(snake_rows(&idxs)) {
                    view.scatter(rows);
                }
            }
        },
        || {
            let writes: Regions<1> = val_views
                .iter()
                .chain(&idx_views)
                .map(|v| v.region())
                .collect();
            ins.record(Engine::GpSimd, Opcode::TopK)
                .size(p as u32, (4 * n + k) as u32)
                .inputs(1)
                .dtypes(DType::BF16, DType::BF16)
                .contiguous(src.ap.inner_stride() == 1)
                .reads([src.region()])
                .writes(writes)
                .done()
        },
    );
}
