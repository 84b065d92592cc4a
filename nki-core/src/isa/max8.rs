//! The VectorE top-8 family: `max8` (the 8 largest values of each partition, descending),
//! `nc_find_index8` (the index of the first occurrence of each of 8 values) and
//! `nc_match_replace8` (replace those occurrences, for the next round of a top-k over more
//! than 8), the steps of the NKI Library's MoE router top-k. Destination first, as in NKI 0.7:
//! `nisa::max8(dst, src)`, `nisa::nc_find_index8(dst, data, vals)`,
//! `nisa::nc_match_replace8(dst, data, vals, imm, dst_idx)`.
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
//!   uint16). `dst` is uint32 (the default) or uint16. A value repeated in `vals` is paired
//!   with its matching positions in ascending order across the columns: the first copy gets
//!   the first match, the second copy the second match, and so on (the sentinel once the
//!   matches run out) — the 0.7 `nc_match_replace8` page states this tie-break for
//!   `nc_find_index8`, so `max8` then `nc_find_index8` gives distinct indices for tied values.
//! - `nc_match_replace8` writes `data` into `dst` with the first occurrence of each of the 8
//!   values replaced by `imm`, and (optionally) the matched positions into `dst_idx`. Values
//!   are processed in reverse order (7 down to 0), each taking the first matching position not
//!   taken yet, so a repeated value's first match lands in its highest column (the documented
//!   example: data `[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]`, vals `[3, 8, 8, 8, 8, 8, 8, 8]` give
//!   dst_idx `[2, 10, 9, 8, 7, 6, 5, 4]`).
//!
//! Where the documentation is silent:
//! - NaN: `max8` orders NaN above every number (as IEEE `maximum` propagates it), so NaNs
//!   come first; `nc_find_index8` never matches NaN (NaN equals nothing), giving the
//!   sentinel. -0.0 and +0.0 are equal for `nc_find_index8` and keep their data order in
//!   `max8`.
//! - `nc_match_replace8` matches against the input data (a position replaced by `imm` is not
//!   matched again); a value without a match leaves the data unchanged and writes the
//!   all-ones sentinel into `dst_idx`, as `nc_find_index8` does.
//!
//! Cost: `N` VectorE cycles, N the elements per partition of the data
//! (docs/reference/hardware.md §2.3, "max8, nc_find_index8"; the 2.26 `max8` doc's
//! "Estimated instruction cost: N engine cycles"), without the MIN_II floor. The docs give no
//! figure for `nc_match_replace8`; it is assumed to cost the same `N` (one pass over the data
//! on the same engine), recorded under its own opcode.

use super::base::Site;
use super::op::Op;
use crate::builder::instruction;
use crate::dtype::DType;
use crate::emit::trace::Call;
use crate::error::ErrorKind;
use crate::record::{Engine, MemKind, Opcode};
use crate::tile::TileRef;

/// Elements per partition `max8` / `nc_find_index8` read at most.
pub const MAX8_MAX_ELEMENTS: usize = 16384;

/// The positions of `row` ordered by descending value, NaN above every number; stable, so
/// equal values keep their data order (the order of `max8` and `topk`).
pub(crate) fn descending(row: &[f32]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..row.len()).collect();
    idx.sort_by(|&a, &b| {
        let (x, y) = (row[a], row[b]);
        match (x.is_nan(), y.is_nan()) {
            (true, true) => std::cmp::Ordering::Equal,
            (true, false) => std::cmp::Ordering::Less,
            (false, true) => std::cmp::Ordering::Greater,
            _ => y.partial_cmp(&x).expect("no NaN here"),
        }
    });
    idx
}

/// The 8 largest of `row` in descending order (fp32 values; NaN above every number; equal
/// values kept, earlier first).
pub(crate) fn top8(row: &[f32]) -> [f32; 8] {
    let idx = descending(row);
    let mut out = [0.0f32; 8];
    for (o, &i) in out.iter_mut().zip(&idx) {
        *o = row[i];
    }
    out
}

/// For each of `vals`, the index of its matching element of `row`: the m-th copy of a value
/// (counting from column 0) gets its m-th match in ascending order, or `sentinel`.
pub(crate) fn find8(row: &[f32], vals: &[f32], sentinel: i64) -> Vec<i64> {
    vals.iter()
        .enumerate()
        .map(|(j, &v)| {
            let copy = vals[..j].iter().filter(|&&u| u == v).count();
            row.iter()
                .enumerate()
                .filter(|&(_, &x)| x == v)
                .nth(copy)
                .map_or(sentinel, |(i, _)| i as i64)
        })
        .collect()
}

/// `row` with each of `vals` (processed from the last to the first) replacing its first
/// not yet replaced match by `imm`; returns the matched positions by column (`sentinel` when
/// none is left).
pub(crate) fn match_replace8(row: &mut [f32], vals: &[f32], imm: f32, sentinel: i64) -> Vec<i64> {
    let mut taken = vec![false; row.len()];
    let mut idx = vec![sentinel; vals.len()];
    for j in (0..vals.len()).rev() {
        let v = vals[j];
        if let Some(i) = (0..row.len()).find(|&i| !taken[i] && row[i] == v) {
            taken[i] = true;
            idx[j] = i as i64;
        }
    }
    for (i, t) in taken.iter().enumerate() {
        if *t {
            row[i] = imm;
        }
    }
    idx
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
    dst_operand_named(ins, "dst", dst, p);
}

/// [`dst_operand`] for the operand named `what`.
fn dst_operand_named(ins: &Op, what: &str, dst: &TileRef, p: usize) {
    ins.operand(what, dst);
    ins.memory(what, dst, &[MemKind::Sbuf, MemKind::Psum]);
    if dst.partitions() != p || dst.free_size() != 8 {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "{what} {} of '{}' must have shape [{p}, 8] (the source's partitions, 8 elements each)",
                dst.describe(),
                ins.api.trim_start_matches("nisa.")
            ),
        );
    }
}

/// The all-ones sentinel of an index operand `what` (uint32 or uint16; anything else fails).
fn index_sentinel(ins: &Op, what: &str, t: &TileRef) -> i64 {
    match t.dtype() {
        DType::U32 => u32::MAX as i64,
        DType::U16 => u16::MAX as i64,
        d => ins.fail(
            ErrorKind::DType,
            format!(
                "{what} {} of '{}' must be uint32 or uint16, got {d}",
                t.describe(),
                ins.api.trim_start_matches("nisa.")
            ),
        ),
    }
}

/// `vals` must be on chip with `data`'s partitions and exactly 8 values per partition.
fn vals_operand(ins: &Op, vals: &TileRef, data: &TileRef) {
    ins.operand("vals", vals);
    ins.same_partitions(("data", data), ("vals", vals));
    if vals.free_size() != 8 {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "'vals' {} of '{}' must hold exactly 8 values per partition",
                vals.describe(),
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
    ins.trace(|| {
        use super::trace_args as ta;
        Call::new("nisa.max8")
            .arg("dst", ta::tile(&dst))
            .arg("src", ta::tile(&src))
    });
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

instruction! {
    /// Writes into `dst` (`[P, 8]`, uint32 or uint16) the index of the first element of each
    /// partition of `data` equal to each of that partition's 8 `vals` (NKI 0.7
    /// `nisa.nc_find_index8(dst, data, vals)`); a value that does not occur gets the all-ones
    /// sentinel of `dst`'s dtype. A value repeated in `vals` takes its successive matches in
    /// ascending order across the columns. `data` has 8..=16384 elements per partition (indices
    /// count over its flattened free dimensions); `vals` has exactly 8. Values compare in fp32.
    /// One VectorE instruction of `N` cycles.
    pub fn nc_find_index8<'d, 'a, 'v>(
        dst: into TileRef<'d>, data: into TileRef<'a>, vals: into TileRef<'v>,
    ) as ins = "nisa.nc_find_index8" {
        ins.trace(|| {
            use super::trace_args as ta;
            Call::new("nisa.nc_find_index8")
                .arg("dst", ta::tile(&dst))
                .arg("data", ta::tile(&data))
                .arg("vals", ta::tile(&vals))
        });
        find_index8(&ins, [dst, data, vals]);
    }
}

/// [`nc_find_index8`] on its converted operands.
#[track_caller]
fn find_index8(ins: &Op, [dst, data, vals]: [TileRef; 3]) {
    data_operand(ins, "data", &data);
    vals_operand(ins, &vals, &data);
    dst_operand(ins, &dst, data.partitions());
    let sentinel = index_sentinel(ins, "dst", &dst);
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

instruction! {
    /// Writes `data` into `dst` (same partitions and elements per partition, rounded to `dst`'s
    /// dtype) with the first occurrence of each of the 8 `vals` of a partition replaced by `imm`
    /// (NKI 0.7 `nisa.nc_match_replace8(dst, data, vals, imm, dst_idx)`); `dst_idx` (`[P, 8]`,
    /// uint32 or uint16), when given, receives the matched positions. Values are processed from
    /// column 7 down to 0, each taking the first match not yet taken, so a repeated value's
    /// first match lands in its highest column; a value without a match writes the all-ones
    /// sentinel. `data` has 8..=16384 elements per partition and is read as fp32. One VectorE
    /// instruction (assumed `N` cycles, as its siblings).
    pub fn nc_match_replace8<'d, 'a, 'v, 'i>(
        dst: into TileRef<'d>, data: into TileRef<'a>, vals: into TileRef<'v>, imm: f32,
        dst_idx: Option<TileRef<'i>>,
    ) as ins = "nisa.nc_match_replace8" {
        replace8_on(&ins, [dst, data, vals], imm, dst_idx);
    }
}

/// [`nc_match_replace8`] on its converted operands.
#[track_caller]
fn replace8_on(ins: &Op, [dst, data, vals]: [TileRef; 3], imm: f32, dst_idx: Option<TileRef>) {
    data_operand(ins, "data", &data);
    vals_operand(ins, &vals, &data);
    ins.operand("dst", &dst);
    ins.memory("dst", &dst, &[MemKind::Sbuf, MemKind::Psum]);
    ins.same_partitions(("data", &data), ("dst", &dst));
    ins.same_free(("data", &data), ("dst", &dst));
    let sentinel = dst_idx.as_ref().map(|t| {
        dst_operand_named(ins, "dst_idx", t, data.partitions());
        index_sentinel(ins, "dst_idx", t)
    });
    let site = Site::new(Engine::Vector, Opcode::MatchReplace8);
    let outs: Vec<&TileRef> = std::iter::once(&dst).chain(dst_idx.as_ref()).collect();
    ins.compute(site, &[&data], &[&vals], &outs, || {
        let (mut d, v) = (ins.read(&data), ins.read(&vals));
        let n = data.free_size();
        let mut idx = Vec::with_capacity(data.partitions() * 8);
        for (row, vals) in d.chunks_mut(n).zip(v.chunks(8)) {
            idx.extend(match_replace8(row, vals, imm, sentinel.unwrap_or(-1)));
        }
        dst.scatter(d);
        if let (Some(t), Some(_)) = (&dst_idx, sentinel) {
            let d = t.dtype();
            t.scatter_slots(idx.into_iter().map(|i| d.slot_of_int(i)).collect());
        }
    });
}
