//! HBM stores with write tracking: values are written while each element's writer tag is
//! checked against the previous writer of this launch.

use crate::access::Ap;
use crate::context::LaunchShared;
use crate::error::{ErrorKind, NkiError, Result};
use crate::hbm::{no_data, HbmView};

/// Writes row-major `vals` (rounded to the tensor dtype) into `dst`, tagging each element with
/// `writer`. An element already written in this launch by a conflicting writer is an
/// output-dependency error naming both writers and the element.
pub(crate) fn write(
    dst: &HbmView,
    vals: Vec<f32>,
    writer: u32,
    shared: &LaunchShared,
) -> Result<()> {
    let r = write_slice(dst, &vals, false, writer, shared);
    crate::tile::give_buf(vals);
    r
}

/// [`write`] from a borrowed slice; `exact` says the values are already representable in the
/// tensor's dtype (no rounding needed).
pub(crate) fn write_slice(
    dst: &HbmView,
    vals: &[f32],
    exact: bool,
    writer: u32,
    shared: &LaunchShared,
) -> Result<()> {
    let st = &dst.st;
    let dtype = st.dtype;
    let mut g = st.write();
    let data = &mut *g;
    if data.values.is_none() {
        return Err(no_data(st, "store"));
    }
    if data.writers.len() != st.shape.numel() {
        data.writers = vec![0; st.shape.numel()];
    }
    let values = data.values.as_mut().expect("checked above");
    let writers = &mut data.writers;
    let base = shared.writer_base;
    let mut conflict: Option<(u32, usize)> = None;
    let mut ok_pair: Option<u32> = None;
    let s = dst.ap.inner_stride();
    let mut pos = 0;
    dst.ap.for_each_row(|off, n| {
        let src = &vals[pos..pos + n];
        pos += n;
        if s == 1 {
            // Fast path: a contiguous run none of whose elements was written by another
            // writer of this launch (checked without branches so it vectorises).
            let tags = &mut writers[off..off + n];
            if tags
                .iter()
                .fold(true, |ok, &old| ok & ((old == writer) | (old < base)))
            {
                tags.fill(writer);
                crate::exec::copy_round(dtype, exact, &mut values[off..off + n], src);
                return;
            }
        }
        for (j, &v) in src.iter().enumerate() {
            let e = (off as isize + j as isize * s) as usize;
            let old = writers[e];
            if old != writer && old >= base && conflict.is_none() && ok_pair != Some(old) {
                if shared.conflicts(old, writer) {
                    conflict = Some((old, e));
                } else {
                    ok_pair = Some(old);
                }
            }
            writers[e] = writer;
            values[e] = if exact { v } else { dtype.round(v) };
        }
    });
    if let Some((old, e)) = conflict {
        let idx = Ap::unravel(e, &st.shape);
        return Err(NkiError::new(
            ErrorKind::OutputDependency,
            "store",
            format!(
                "unexpected output dependencies: element {idx:?} of {} is written by {} and again by {} \
                 (this store covers {}); each program instance and each affine_range iteration must \
                 write distinct locations, or use sequential_range",
                st.name,
                shared.describe_writer(old),
                shared.describe_writer(writer),
                dst.describe()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;

    #[test]
    fn interleaved_column_stores_are_not_races_but_overlaps_are() {
        let a = Hbm::<f32>::from_vec(&[2, 8], (0..16).map(|i| i as f32).collect()).unwrap();
        let mut c = Hbm::<f32>::zeros([2, 8]);
        // Two instances store the even and the odd columns (strided views): no conflict.
        for _ in 0..2 {
            let out = c.as_output();
            Launch::new(2)
                .run(|| {
                    let p = nl::program_id(0);
                    let cols = stepped(p..8, 2);
                    let t = nl::load(a.slice((.., cols)));
                    nl::store(out.slice((.., cols)), &t);
                })
                .unwrap();
        }
        assert_eq!(c.to_array().unwrap(), a.to_array().unwrap());
        // Both storing the same contiguous row is a race on the first element.
        let out = c.as_output();
        let e = Launch::new(2)
            .run(|| {
                let t = nl::load(a.slice((0..1, ..)));
                nl::store(out.slice((0..1, ..)), &t);
            })
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::OutputDependency);
        assert!(e.message().contains("element [0, 0]"), "{e}");
    }

    #[test]
    fn stores_round_to_the_tensor_dtype() {
        let vals = [1.0 + 2f32.powi(-8), 1.0 + 3.0 * 2f32.powi(-8), -3.3, 1e-40];
        let a = Hbm::<f32>::from_vec(&[1, 4], vals.to_vec()).unwrap();
        let mut c = Hbm::<bf16>::zeros([1, 4]);
        let out = c.as_output();
        Launch::new(1)
            .run(|| nl::store(&out, &nl::load(&a)))
            .unwrap();
        let want: Vec<f32> = vals.iter().map(|&v| bf16::from_f32(v).to_f32()).collect();
        assert_eq!(c.to_f32_vec().unwrap(), want);
    }
}
