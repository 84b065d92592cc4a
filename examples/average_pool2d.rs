//! The NKI `average_pool2d` tutorial, re-told in Rust.
//!
//! `out[c, i, j]` is the mean of the `pool x pool` window of `input[c]` at `(pool*i, pool*j)`
//! (`nki_kernels::average_pool2d`). Channels go to partitions; each channel's image is loaded
//! straight into a `[C, H/p, p, W/p, p]` tile (the pool windows as their own dimensions), one
//! VectorE reduce sums the innermost window axis, `p - 1` adds fold the window rows, and one
//! multiply scales. The example
//!
//! 1. pools the tutorial's `arange` `[2, 6, 6]` bf16 input by 2 and checks it exactly ("match")
//!    against a plain-loop reference;
//! 2. models the tutorial shape and a `[128, 224, 224]` fp32 image on trn1 and trn2 (DMA-bound:
//!    one load, one store and `p + 1` VectorE instructions per channel tile).
//!
//! ```text
//! cargo run --release --example average_pool2d
//! ```

use ndarray::Array3;
use nki_core::prelude::*;
use nki_kernels::average_pool2d::average_pool2d;
use nki_kernels::reference;
use nki_kernels::report::{finish, print_check, print_profiles, Version};
use nki_kernels::testing::allclose;
use std::process::ExitCode;

fn run() -> Result<bool, NkiError> {
    let (c, h, w, pool) = (2, 6, 6, 2);
    let x = Array3::from_shape_fn((c, h, w), |(a, i, j)| {
        bf16::from_f32((a * h * w + i * w + j) as f32)
    });
    let mut out = Hbm::<bf16>::zeros([c, h / pool, w / pool]);
    average_pool2d::launch(1, &Hbm::from_array(&x)?, &mut out, pool)?;
    let got = out.to_array()?;
    println!("average_pool2d: [C, H, W] = [{c}, {h}, {w}] bf16 arange, pool {pool}");
    println!(
        "channel 0 pooled: {:?}",
        got.index_axis(ndarray::Axis(0), 0)
            .mapv(f32::from)
            .to_string()
            .replace('\n', "")
    );
    let ok = print_check(
        "tutorial arange [2, 6, 6] / 2, exact",
        allclose(&got, &reference::average_pool2d(x.view(), pool), 0.0, 0.0),
    );

    let model = |dims: [usize; 3], p: usize| {
        move |t: Target| {
            let mut o = Hbm::<f32>::shape_only([dims[0], dims[1] / p, dims[2] / p]);
            average_pool2d::estimate(1, t, &Hbm::<f32>::shape_only(dims), &mut o, p)
        }
    };
    print_profiles(
        "the tutorial's [2, 6, 6], pool 2",
        &[Version::new("average_pool2d", &model([2, 6, 6], 2))],
    )?;
    print_profiles(
        "[128, 224, 224] fp32, pool 2",
        &[Version::new("average_pool2d", &model([128, 224, 224], 2))],
    )?;
    Ok(ok)
}

fn main() -> ExitCode {
    finish(run())
}
