//! GpSimdE `nonzero_with_count` (NeuronCore-v3 and newer): the positions of a row's non-zero
//! elements, padded, followed by their count: the compaction step of MoE token routing.
//!
//! Definition (NKI 0.7 `nki.isa.nonzero_with_count`): for each row the instruction reads, the
//! output holds the indices (plus `index_offset`) of the non-zero elements in order, then
//! `padding_val` up to the input length `T`, then the count `N` (`T + 1` elements). Only
//! partitions 0, 16, ..., 112 of the tile are read and written (each of the 8 GpSimd cores
//! serves 16 partitions and uses its first one); the other partitions of `dst` are left as they
//! were. `src` is float32 or int32 in SBUF, `dst` int32 in SBUF. A float NaN is non-zero
//! (`x != 0`), -0.0 is zero.
//!
//! Cost: GpSimdE start-up plus one cycle per input element of a row (`150 + T`; the docs give
//! no figure) \[A\].

use super::base::Site;
use super::op::Op;
use crate::builder::instruction;
use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::record::{Engine, MemKind, Opcode};
use crate::tile::TileRef;

/// Partitions apart of the rows `nonzero_with_count` serves (one per GpSimd core).
pub const NONZERO_PARTITION_STEP: usize = 16;

instruction! {
    /// Writes into `dst` (`[P, T + 1]`, int32) the indices of the non-zero elements of each served
    /// row of `src` (`[P, T]`, float32 or int32), offset by `index_offset`, then `padding_val`
    /// up to `T` entries, then the count (NKI 0.7 `nisa.nonzero_with_count(dst, src,
    /// index_offset, padding_val)`). Rows 0, 16, ..., 112 of the tiles are served; the other rows
    /// of `dst` keep their values. NeuronCore-v3 and newer; one GpSimdE instruction.
    pub fn nonzero_with_count<'d, 's>(
        dst: into TileRef<'d>, src: into TileRef<'s>, index_offset: i32, padding_val: i32,
    ) as ins = "nisa.nonzero_with_count" {
        nonzero_on(&ins, dst, src, index_offset, padding_val);
    }
}

/// [`nonzero_with_count`] on its converted operands.
#[track_caller]
fn nonzero_on(ins: &Op, dst: TileRef, src: TileRef, index_offset: i32, padding_val: i32) {
    super::alu_rules::instruction_since(ins, 3);
    for (what, t) in [("src", &src), ("dst", &dst)] {
        ins.operand(what, t);
        ins.memory(what, t, &[MemKind::Sbuf]);
    }
    ins.same_partitions(("src", &src), ("dst", &dst));
    if !matches!(src.dtype(), DType::F32 | DType::I32) {
        ins.fail(
            ErrorKind::DType,
            format!(
                "src {} of 'nonzero_with_count' must be float32 or int32",
                src.describe()
            ),
        );
    }
    if dst.dtype() != DType::I32 {
        ins.fail(
            ErrorKind::DType,
            format!(
                "dst {} of 'nonzero_with_count' must be int32",
                dst.describe()
            ),
        );
    }
    let t = src.free_size();
    if dst.free_size() != t + 1 {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "dst {} of 'nonzero_with_count' must have one more element per partition than src {} ({} + 1)",
                dst.describe(),
                src.describe(),
                t
            ),
        );
    }
    for (what, t) in [("src", &src), ("dst", &dst)] {
        if t.shape().len() != 2 {
            ins.fail(
                ErrorKind::InvalidArgument,
                format!(
                    "{what} {} of 'nonzero_with_count' must be 2-D",
                    t.describe()
                ),
            );
        }
    }
    let p = src.partitions();
    // The rows the instruction serves: only they are read and written.
    let rows: Vec<usize> = (0..p).step_by(NONZERO_PARTITION_STEP).collect();
    let srcs: Vec<TileRef> = rows.iter().map(|&r| src.slice((r..r + 1, ..))).collect();
    let dsts: Vec<TileRef> = rows.iter().map(|&r| dst.slice((r..r + 1, ..))).collect();
    let site = Site::new(Engine::GpSimd, Opcode::NonzeroWithCount);
    let reads: Vec<&TileRef> = srcs.iter().collect();
    let writes: Vec<&TileRef> = dsts.iter().collect();
    ins.compute(site, &reads, &[], &writes, || {
        for (s, d) in srcs.iter().zip(&dsts) {
            let row = ins.read(s);
            let found: Vec<usize> = (0..t).filter(|&i| row[i] != 0.0).collect();
            let mut out: Vec<f32> = (0..t)
                .map(|k| match found.get(k) {
                    Some(&i) => (i as i64 + index_offset as i64) as f32,
                    None => padding_val as f32,
                })
                .collect();
            out.push(found.len() as f32);
            d.scatter(out);
        }
    });
}
