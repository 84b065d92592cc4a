//! VectorE `nc_stream_shuffle`: cross-partition data movement inside each quadrant of 32
//! partitions.
//!
//! Definition (NKI 0.7 `nki.isa.nc_stream_shuffle(dst, src, shuffle_mask)`): `shuffle_mask`
//! has 32 entries; within every 32-partition quadrant, output partition `i` copies input
//! partition `shuffle_mask[i]` of the same quadrant, and the special value
//! [`SHUFFLE_KEEP`] (255) leaves output partition `i` unmodified. The same mask serves every
//! quadrant. `dst` and `src` have the same dtype (the copy is bit-exact) and the same number of
//! elements per partition, live in SBUF or PSUM, and may be the same tile (an in-place
//! shuffle reads every source row before it writes). The start partitions follow the
//! hardware rule on `num_active_partitions = ceil(max(src, dst partitions) / 32) * 32`: with
//! 96 or 128 active partitions both start at 0, with 64 at 0 or 64, with 32 at 0, 32, 64 or 96.
//!
//! Where the documentation is silent: a mask entry other than 0..32 or 255 is an error, and
//! so is an entry that names a source partition the `src` view does not have in that quadrant
//! (the hardware would read outside the operand).
//!
//! Cost: no published figure; one VectorE pass over the elements per partition,
//! `max(MIN_II, N)` cycles, like a copy without the performance modes \[A\].

use super::base::Site;
use super::op::Op;
use crate::error::ErrorKind;
use crate::record::{Engine, MemKind, Opcode};
use crate::tile::{give_buf, TileRef};

/// Partitions of one SBUF/PSUM quadrant: the span a shuffle moves data within.
pub const QUADRANT: usize = 32;

/// The `shuffle_mask` entry that leaves its output partition unmodified.
pub const SHUFFLE_KEEP: u32 = 255;

/// The legal start partitions of an operand for `active` active partitions.
fn legal_starts(active: usize) -> &'static [usize] {
    match active {
        32 => &[0, 32, 64, 96],
        64 => &[0, 64],
        _ => &[0],
    }
}

/// Copies partitions of `src` into `dst` within each 32-partition quadrant as `shuffle_mask`
/// says: output partition `q * 32 + i` receives input partition `q * 32 + shuffle_mask[i]`,
/// or keeps its value when the entry is [`SHUFFLE_KEEP`] (NKI 0.7
/// `nisa.nc_stream_shuffle(dst, src, shuffle_mask)`). Bit-exact (same dtype); SBUF or PSUM;
/// `dst` may be `src`. One VectorE instruction.
#[track_caller]
pub fn nc_stream_shuffle<'d, 's>(
    dst: impl Into<TileRef<'d>>,
    src: impl Into<TileRef<'s>>,
    shuffle_mask: &[u32],
) {
    let ins = Op::begin("nisa.nc_stream_shuffle");
    let (dst, src): (TileRef, TileRef) = (dst.into(), src.into());
    for (what, t) in [("src", &src), ("dst", &dst)] {
        ins.operand(what, t);
        ins.memory(what, t, &[MemKind::Sbuf, MemKind::Psum]);
    }
    if dst.dtype() != src.dtype() {
        ins.fail(
            ErrorKind::DType,
            format!(
                "dst {} of 'nc_stream_shuffle' must have the dtype of src {}",
                dst.describe(),
                src.describe()
            ),
        );
    }
    ins.same_free(("src", &src), ("dst", &dst));
    if shuffle_mask.len() != QUADRANT {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "shuffle_mask of 'nc_stream_shuffle' must have {QUADRANT} entries, got {}",
                shuffle_mask.len()
            ),
        );
    }
    let (sp, dp) = (src.partitions(), dst.partitions());
    let active = sp.max(dp).div_ceil(QUADRANT) * QUADRANT;
    for (what, t) in [("src", &src), ("dst", &dst)] {
        let starts = legal_starts(active);
        if !starts.contains(&t.start_partition()) {
            ins.fail(
                ErrorKind::PartitionOffset,
                format!(
                    "{what} {} of 'nc_stream_shuffle' starts at partition {}; with {active} active partitions the start must be one of {starts:?}",
                    t.describe(),
                    t.start_partition()
                ),
            );
        }
    }
    // Output row -> source row, for the rows the instruction writes.
    let mut moves: Vec<(usize, usize)> = Vec::with_capacity(dp);
    for d in 0..dp {
        let (q, i) = (d / QUADRANT, d % QUADRANT);
        let m = shuffle_mask[i];
        if m == SHUFFLE_KEEP {
            continue;
        }
        if m as usize >= QUADRANT {
            ins.fail(
                ErrorKind::InvalidArgument,
                format!(
                    "shuffle_mask[{i}] = {m} of 'nc_stream_shuffle' must be a partition of the quadrant (0..{QUADRANT}) or {SHUFFLE_KEEP}"
                ),
            );
        }
        let s = q * QUADRANT + m as usize;
        if s >= sp {
            ins.fail(
                ErrorKind::OutOfBounds,
                format!(
                    "shuffle_mask[{i}] = {m} of 'nc_stream_shuffle' reads partition {s} of src {}, which has {sp} partitions",
                    src.describe()
                ),
            );
        }
        moves.push((d, s));
    }
    let whole = moves.len() == dp;
    let rows: Vec<TileRef> = if whole {
        vec![dst]
    } else {
        moves
            .iter()
            .map(|&(d, _)| dst.slice((d..d + 1, ..)))
            .collect()
    };
    let writes: Vec<&TileRef> = rows.iter().collect();
    let site = Site::new(Engine::Vector, Opcode::StreamShuffle);
    ins.compute(site, &[&src], &[], &writes, || {
        let f = src.free_size();
        let vals = src.gather_slots(ins.api, ins.loc);
        if whole {
            let mut out = Vec::with_capacity(dp * f);
            for &(_, s) in &moves {
                out.extend_from_slice(&vals[s * f..(s + 1) * f]);
            }
            dst.scatter_slots(out);
        } else {
            for (row, &(_, s)) in rows.iter().zip(&moves) {
                row.scatter_slots(vals[s * f..(s + 1) * f].to_vec());
            }
        }
        give_buf(vals);
    });
}
