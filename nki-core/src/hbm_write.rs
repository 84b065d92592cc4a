//! HBM stores with write tracking: values are written element by element while each element's
//! writer tag is checked against the previous writer of this launch.

use crate::access::Ap;
use crate::context::LaunchShared;
use crate::error::{ErrorKind, NkiError, Result};
use crate::hbm::{no_data, HbmView};

/// Writes row-major `vals` (rounded to the tensor dtype) into `dst`, tagging each element with
/// `writer`. An element already written in this launch by a conflicting writer is an
/// output-dependency error naming both writers and the element.
pub(crate) fn write(
    dst: &HbmView,
    mut vals: Vec<f32>,
    writer: u32,
    shared: &LaunchShared,
) -> Result<()> {
    let st = &dst.st;
    st.dtype.round_slice(&mut vals);
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
    let mut conflict: Option<(u32, usize)> = None;
    let mut ok_pair: Option<u32> = None;
    let s = dst.ap.inner_stride();
    let mut pos = 0;
    dst.ap.for_each_row(|off, n| {
        for j in 0..n {
            let e = (off as isize + j as isize * s) as usize;
            let old = writers[e];
            if old != writer
                && old >= shared.writer_base
                && conflict.is_none()
                && ok_pair != Some(old)
            {
                if shared.conflicts(old, writer) {
                    conflict = Some((old, e));
                } else {
                    ok_pair = Some(old);
                }
            }
            writers[e] = writer;
            values[e] = vals[pos + j];
        }
        pos += n;
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
