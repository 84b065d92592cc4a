//! GpSimdE `sequence_bounds`: the start and end of the segment every element belongs to, for
//! packed sequences (segment ids per token, 0 = padding).
//!
//! Definition (NKI 0.7 `nki.isa.sequence_bounds(dst, segment_ids)`, with the NumPy equivalent
//! of its reference page): `segment_ids` is one partition of `n` ids (float32 or int32,
//! non-negative); a segment is a run of equal consecutive non-zero ids. For element `i`:
//! - `start[i]` is the index of the first element of its run (`n` for padding, id 0);
//! - `end[i]` is one past the last element of its run (`-1` for padding).
//!
//! `dst` (`[1, 2, n]`, float32 or int32) holds the starts in its first `n` elements and the
//! ends in the next `n`. Both operands are in SBUF (GpSimdE cannot access PSUM).
//!
//! Where the documentation is silent: a negative or non-integer id is an error (the docs
//! require non-negative integers).
//!
//! Cost: GpSimdE start-up plus one cycle per segment id (`150 + n`); no published
//! figure \[A\].

use super::base::Site;
use super::op::Op;
use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::record::{Engine, MemKind, Opcode};
use crate::tile::TileRef;

/// The `(start, end)` bounds of every element of `ids` (see the module docs).
pub(crate) fn bounds(ids: &[i64]) -> (Vec<i64>, Vec<i64>) {
    let n = ids.len();
    let mut start = vec![n as i64; n];
    let mut end = vec![-1; n];
    for i in 0..n {
        if ids[i] != 0 {
            start[i] = if i > 0 && ids[i - 1] == ids[i] {
                start[i - 1]
            } else {
                i as i64
            };
        }
    }
    for i in (0..n).rev() {
        if ids[i] != 0 {
            end[i] = if i + 1 < n && ids[i + 1] == ids[i] {
                end[i + 1]
            } else {
                i as i64 + 1
            };
        }
    }
    (start, end)
}

/// Writes into `dst` (`[1, 2, n]`) the start index and the end index (one past the last) of
/// the run of equal segment ids each element of `segment_ids` (`[1, n]`) belongs to; padding
/// (id 0) gets start `n` and end `-1` (NKI 0.7 `nisa.sequence_bounds(dst, segment_ids)`).
/// float32 or int32 operands in SBUF; one partition. One GpSimdE instruction.
#[track_caller]
pub fn sequence_bounds<'d, 's>(dst: impl Into<TileRef<'d>>, segment_ids: impl Into<TileRef<'s>>) {
    let ins = Op::begin("nisa.sequence_bounds");
    let (dst, ids): (TileRef, TileRef) = (dst.into(), segment_ids.into());
    for (what, t) in [("segment_ids", &ids), ("dst", &dst)] {
        ins.operand(what, t);
        ins.memory(what, t, &[MemKind::Sbuf]);
        if !matches!(t.dtype(), DType::F32 | DType::I32) {
            ins.fail(
                ErrorKind::DType,
                format!(
                    "{what} {} of 'sequence_bounds' must be float32 or int32",
                    t.describe()
                ),
            );
        }
        if t.partitions() != 1 {
            ins.fail(
                ErrorKind::PartitionMismatch,
                format!(
                    "{what} {} of 'sequence_bounds' must have exactly 1 partition",
                    t.describe()
                ),
            );
        }
    }
    let n = ids.free_size();
    if dst.free_size() != 2 * n {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "dst {} of 'sequence_bounds' must hold 2 x {n} elements (a start and an end for each of the {n} segment ids of {})",
                dst.describe(),
                ids.describe()
            ),
        );
    }
    let site = Site::new(Engine::GpSimd, Opcode::SequenceBounds);
    ins.compute(site, &[&ids], &[], &[&dst], || {
        let vals = ins.read(&ids);
        let mut int_ids = Vec::with_capacity(n);
        for (i, &v) in vals.iter().enumerate() {
            if !(v >= 0.0 && v.fract() == 0.0) {
                ins.fail(
                    ErrorKind::InvalidArgument,
                    format!(
                        "segment id {v} at position {i} of {} is not a non-negative integer",
                        ids.describe()
                    ),
                );
            }
            int_ids.push(v as i64);
        }
        let (start, end) = bounds(&int_ids);
        let out: Vec<f32> = start.iter().chain(&end).map(|&x| x as f32).collect();
        dst.scatter(out);
    });
}
