//! `nl.device_print`: a kernel's debugging print.
//!
//! NKI's `nl.device_print(prefix, x)` prints a tensor's values when the kernel runs in the
//! simulator (to stdout) or on hardware (to the runtime's debug stream), and is not part of
//! the kernel's instruction stream the compiler schedules. nki-rs prints in execute and
//! simulate mode, where values exist, and records no instruction: the timing model and the
//! profile do not see it. Estimate mode computes no values and prints nothing.

use crate::dtype::DType;
use crate::isa::op::Op;
use crate::tile::{give_buf, TileRef};
use std::fmt::Write as _;

/// Prints `prefix` and the values of the on-chip view `x` to stdout (NKI
/// `nl.device_print(prefix, x)`), one line, each partition's free elements (flattened) as one
/// bracketed row: `prefix float32[2, 3] [[1, 2, 3], [4, 5, 6]]`. Integer dtypes print exact
/// integers. Prints in execute and simulate mode; costs nothing on the modelled device (no
/// instruction is recorded); prints nothing in estimate mode.
#[track_caller]
pub fn device_print<'a>(prefix: &str, x: impl Into<TileRef<'a>>) {
    let ins = Op::begin("nl.device_print");
    let x: TileRef = x.into();
    if !ins.executes() {
        return;
    }
    let slots = x.gather_slots(ins.api, ins.loc);
    let line = print_line(prefix, x.shape(), x.dtype(), x.free_size(), &slots);
    give_buf(slots);
    println!("{line}");
}

/// The line [`device_print`] prints for the slots `slots` (row-major) of a view of `shape`
/// and `dtype` with `free` elements per partition.
pub(crate) fn print_line(
    prefix: &str,
    shape: &[usize],
    dtype: DType,
    free: usize,
    slots: &[f32],
) -> String {
    let mut line = format!("{prefix} {dtype}{shape:?} [");
    for (p, row) in slots.chunks(free.max(1)).enumerate() {
        line.push_str(if p == 0 { "[" } else { ", [" });
        for (j, &s) in row.iter().enumerate() {
            if j > 0 {
                line.push_str(", ");
            }
            if dtype.is_float() {
                let mut v = [s];
                dtype.to_values(&mut v);
                let _ = write!(line, "{}", v[0]);
            } else {
                let _ = write!(line, "{}", dtype.int(s));
            }
        }
        line.push(']');
    }
    line.push(']');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_per_call_with_rows_per_partition() {
        let line = print_line("x =", &[2, 3], DType::F32, 3, &[1., 2., 3., 4., 5.5, 6.]);
        assert_eq!(line, "x = float32[2, 3] [[1, 2, 3], [4, 5.5, 6]]");
        // int32 slots hold bit patterns: printed as the integers they are.
        let big = f32::from_bits(16_777_217);
        let line = print_line("i", &[1, 1], DType::I32, 1, &[big]);
        assert_eq!(line, "i int32[1, 1] [[16777217]]");
    }
}
