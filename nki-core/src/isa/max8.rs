//! The VectorE top-8 family: `max8` (the 8 largest values of each partition, descending) and
//! `nc_find_index8` (the index of the first occurrence of each of 8 values), the two steps of
//! the NKI Library's MoE router top-k. Destination first, as in NKI 0.7:
//! `nisa::max8(dst, src)`, `nisa::nc_find_index8(dst, data, vals)`.
//!
//! Definitions (NKI 0.7 `nki.isa.max8`, `nki.isa.nc_find_index8`):
//! - `max8` reads the source (at most four free dimensions, 8..=16384 elements per
//!   partition), converts it to fp32 and writes the 8 largest values of each partition in
//!   descending order, rounded to `dst`'s dtype. Equal values are kept: a partition whose
//!   maximum occurs three times starts with it three times.
//! - `nc_find_index8` reads 8 values per partition (`vals`), then the data (8..=16384
//!   elements per partition), and writes, per partition, the index (from 0, over the
//!   flattened free dimensions) of the first element equal (in fp32) to each value; a value
//!   that does not occur gets the all-ones sentinel (0xFFFFFFFF for uint32, 0xFFFF for
//!   uint16). `dst` is uint32 (the default) or uint16. Two equal values in `vals` both get
//!   the index of the first occurrence.
//!
//! Where the documentation is silent:
//! - NaN: `max8` orders NaN above every number (as IEEE `maximum` propagates it), so NaNs
//!   come first; `nc_find_index8` never matches NaN (NaN equals nothing), giving the
//!   sentinel. -0.0 and +0.0 are equal for `nc_find_index8` and keep their data order in
//!   `max8`.
//!
//! Cost: `N` VectorE cycles, N the elements per partition of the data
//! (shared/reference/hardware.md §2.3, "max8, nc_find_index8"; the 2.26 `max8` doc's
//! "Estimated instruction cost: N engine cycles"), without the MIN_II floor.

use super::base::Site;
use crate::context::Op;
use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::record::{Engine, MemKind, Opcode};
use crate::tile::TileRef;

/// Elements per partition `max8` / `nc_find_index8` read at most.
pub const MAX8_MAX_ELEMENTS: usize = 16384;

/// The 8 largest of `row` in descending order (fp32 values; NaN above every number; equal
/// values kept, earlier first).
pub(crate) fn top8(row: &[f32]) -> [f32; 8] {
    let mut idx: Vec<usize> = (0..row.len()).collect();
    // Descending by value with NaN largest; stable, so equal values keep their data order.
    idx.sort_by(|&a, &b| {
        let (x, y) = (row[a], row[b]);
        match (x.is_nan(), y.is_nan()) {
            (true, true) => std::cmp::Ordering::Equal,
            (true, false) => std::cmp::Ordering::Less,
            (false, true) => std::cmp::Ordering::Greater,
            _ => y.partial_cmp(&x).expect("no NaN here"),
        }
    });
    let mut out = [0.0f32; 8];
    for (o, &i) in out.iter_mut().zip(&idx) {
        *o = row[i];
    }
    out
}

/// The index of the first element of `row` equal to each of `vals`, or `sentinel`.
pub(crate) fn find8(row: &[f32], vals: &[f32], sentinel: i64) -> Vec<i64> {
    vals.iter()
        .map(|&v| {
            row.iter()
                .position(|&x| x == v)
                .map_or(sentinel, |i| i as i64)
        })
        .collect()
}

/// The checks both instructions make on their data operand: on chip (SBUF or PSUM, both of
/// which VectorE reads), a legal start partition, 8..=16384 elements per partition.
fn data_operand(ins: &Op, what: &str, t: &TileRef) {
    ins.operand(what, t);
    ins.memory(what, t, &[MemKind::Sbuf, MemKind::Psum]);
    let n = t.free_size();
    if !(8..=MAX8_MAX_ELEMENTS).contains(&n) {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "'{what}' {} of '{}' has {n} elements per partition; it must have between 8 and {MAX8_MAX_ELEMENTS}",
                t.describe(),
                ins.api.trim_start_matches("nisa.")
            ),
        );
    }
}

/// `dst` must be `[P, 8]` elements (any free shape of 8 elements) for a source of `p`
/// partitions, on chip.
fn dst_operand(ins: &Op, dst: &TileRef, p: usize) {
    ins.operand("dst", dst);
    ins.memory("dst", dst, &[MemKind::Sbuf, MemKind::Psum]);
    if dst.partitions() != p || dst.free_size() != 8 {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "dst {} of '{}' must have shape [{p}, 8] (the source's partitions, 8 elements each)",
                dst.describe(),
                ins.api.trim_start_matches("nisa.")
            ),
        );
    }
}

/// Writes the 8 largest values of each partition of `src` into `dst` (`[P, 8]`), in
/// descending order, rounded to `dst`'s dtype (NKI 0.7 `nisa.max8(dst, src)`). `src` has
/// 8..=16384 elements per partition; it is read as fp32. One VectorE instruction of `N`
/// cycles. Equal values are all kept (a maximum occurring three times fills three slots);
/// NaN, on which the documentation is silent, orders above every number.
#[track_caller]
pub fn max8<'d, 's>(dst: impl Into<TileRef<'d>>, src: impl Into<TileRef<'s>>) {
    let ins = Op::begin("nisa.max8");
    let (dst, src): (TileRef, TileRef) = (dst.into(), src.into());
    data_operand(&ins, "src", &src);
    dst_operand(&ins, &dst, src.partitions());
    let site = Site::new(Engine::Vector, Opcode::Max8);
    ins.compute(site, &[&src], &[], &[&dst], || {
        let v = ins.read(&src);
        let n = src.free_size();
        let out: Vec<f32> = v.chunks(n).flat_map(top8).collect();
        dst.scatter(out);
    });
}

/// Writes into `dst` (`[P, 8]`, uint32 or uint16) the index of the first element of each
/// partition of `data` equal to each of that partition's 8 `vals` (NKI 0.7
/// `nisa.nc_find_index8(dst, data, vals)`); a value that does not occur gets the all-ones
/// sentinel of `dst`'s dtype. `data` has 8..=16384 elements per partition (indices count
/// over its flattened free dimensions); `vals` has exactly 8. Values compare in fp32. One
/// VectorE instruction of `N` cycles.
#[track_caller]
pub fn nc_find_index8<'d, 'a, 'v>(
    dst: impl Into<TileRef<'d>>,
    data: impl Into<TileRef<'a>>,
    vals: impl Into<TileRef<'v>>,
) {
    let ins = Op::begin("nisa.nc_find_index8");
    let (dst, data, vals): (TileRef, TileRef, TileRef) = (dst.into(), data.into(), vals.into());
    data_operand(&ins, "data", &data);
    let p = data.partitions();
    ins.operand("vals", &vals);
    ins.same_partitions(("data", &data), ("vals", &vals));
    if vals.free_size() != 8 {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "'vals' {} of 'nc_find_index8' must hold exactly 8 values per partition",
                vals.describe()
            ),
        );
    }
    dst_operand(&ins, &dst, p);
    let sentinel: i64 = match dst.dtype() {
        DType::U32 => u32::MAX as i64,
        DType::U16 => u16::MAX as i64,
        d => ins.fail(
            ErrorKind::DType,
            format!(
                "dst {} of 'nc_find_index8' must be uint32 or uint16, got {d}",
                dst.describe()
            ),
        ),
    };
    let site = Site::new(Engine::Vector, Opcode::FindIndex8);
    ins.compute(site, &[&data], &[&vals], &[&dst], || {
        let (d, v) = (ins.read(&data), ins.read(&vals));
        let n = data.free_size();
        let out_dtype = dst.dtype();
        let slots: Vec<f32> = d
            .chunks(n)
            .zip(v.chunks(8))
            .flat_map(|(row, vals)| find8(row, vals, sentinel))
            .map(|i| out_dtype.slot_of_int(i))
            .collect();
        dst.scatter_slots(slots);
    });
}
