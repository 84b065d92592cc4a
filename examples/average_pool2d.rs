//! The NKI `average_pool2d` tutorial, re-told in Rust, in NKI Beta 1 and in NKI 0.7.
//!
//! `out[c, i, j]` is the mean of the `pool x pool` window of `input[c]` at `(pool*i, pool*j)`
//! (`nki_kernels::average_pool2d`). Channels go to partitions; each channel's image is loaded
//! straight into a `[C, H/p, p, W/p, p]` tile (the pool windows as their own dimensions), one
//! VectorE reduce sums the innermost window axis, `p - 1` adds fold the window rows, and one
//! multiply scales. `average_pool2d` is the kernel in NKI Beta 1 (`nl::load`, `nl::reduce`,
//! operators returning new tiles, the output a `&mut Hbm` parameter); `average_pool2d_07` the
//! same instructions in NKI 0.7 (SBUF tensors from `nl::ndarray`, `nisa::dma_copy`, each
//! instruction writing into a destination given first, the output allocated in HBM and
//! returned). The example
//!
//! 1. pools the tutorial's `arange` `[2, 6, 6]` bf16 input by 2 with both and checks them
//!    exactly ("match") against a plain-loop reference;
//! 2. models both at the tutorial shape and on a `[128, 224, 224]` fp32 image on trn1 and trn2
//!    (DMA-bound: one load, one store and `p + 1` VectorE instructions per channel tile).
//!
//! ```text
//! cargo run --release --example average_pool2d
//! ```

use ndarray::Array3;
use nki_core::prelude::*;
use nki_kernels::average_pool2d::{average_pool2d, average_pool2d_07};
use nki_kernels::reference;
use nki_kernels::report::{finish, print_check, print_profiles, Version};
use nki_kernels::testing::allclose;
use std::process::ExitCode;

/// Both versions at `dims` fp32 with pool `p`, modelled on trn1 and trn2.
fn model(shape: &str, dims: [usize; 3], p: usize) -> Result<(), NkiError> {
    let input = Hbm::<f32>::shape_only(dims);
    let beta1 = |t: Target| {
        let mut o = Hbm::<f32>::shape_only([dims[0], dims[1] / p, dims[2] / p]);
        average_pool2d::estimate(1, t, &input, &mut o, p)
    };
    // A returning kernel's estimate gives (output, profile).
    let nki07 = |t: Target| average_pool2d_07::estimate(1, t, &input, p).map(|(_, p)| p);
    print_profiles(
        shape,
        &[
            Version::new("average_pool2d", &beta1),
            Version::new("average_pool2d_07", &nki07),
        ],
    )?;
    Ok(())
}

fn run() -> Result<bool, NkiError> {
    let (c, h, w, pool) = (2, 6, 6, 2);
    let x = Array3::from_shape_fn((c, h, w), |(a, i, j)| {
        bf16::from_f32((a * h * w + i * w + j) as f32)
    });
    let input = Hbm::from_array(&x)?;
    let mut out = Hbm::<bf16>::zeros([c, h / pool, w / pool]);
    average_pool2d::launch(1, &input, &mut out, pool)?;
    let got = out.to_array()?;
    println!("average_pool2d: [C, H, W] = [{c}, {h}, {w}] bf16 arange, pool {pool}");
    println!(
        "channel 0 pooled: {:?}",
        got.index_axis(ndarray::Axis(0), 0)
            .mapv(f32::from)
            .to_string()
            .replace('\n', "")
    );
    let want = reference::average_pool2d(x.view(), pool);
    let label = "tutorial arange [2, 6, 6] / 2, exact";
    let ok = print_check(label, allclose(&got, &want, 0.0, 0.0));
    // NKI 0.7's kernel[1]: one core; the kernel returns its output.
    let (out_07, _report) = average_pool2d_07::launch(1, &input, pool)?;
    let ok_07 = print_check(
        &format!("{label}, NKI 0.7"),
        allclose(&out_07.to_array()?, &want, 0.0, 0.0),
    );
    model("the tutorial's [2, 6, 6], pool 2", [2, 6, 6], 2)?;
    model("[128, 224, 224] fp32, pool 2", [128, 224, 224], 2)?;
    Ok(ok && ok_07)
}

fn main() -> ExitCode {
    finish(run())
}
