//! The NKI fused Mamba tutorial, re-told in Rust: two versions side by side, each in NKI Beta 1
//! and in NKI 0.7.
//!
//! The selective scan of a Mamba layer (`nki_kernels::mamba`): `dA = exp(delta * A)`,
//! `dBu = delta * u * B`, `h = dA * h + dBu` scanned along the sequence on VectorE
//! (`tensor_tensor_scan`), `y = sum over states of C * h`. Channels go to partitions, the
//! sequence is the free dimension.
//!
//! - v1 loops batch, state, channel tile and reloads `delta` and `u` (and recomputes
//!   `delta * u`) for every state.
//! - v2 loops batch, channel tile, state: `delta`, `u` and `delta * u` are loaded / computed
//!   once per channel tile and reused by all states.
//!
//! `mamba_v1_07` and `mamba_v2_07` are their NKI 0.7 twins (tensors from `nl::ndarray`,
//! `nisa::dma_copy`, instructions writing into a destination given first, the output
//! returned). The example checks all four on the tutorial's all-ones toy `[1, 256, 512, 16]` and on random
//! inputs against an f64 scan (atol = rtol = 1e-2: "match"), then models both at the toy shape
//! and at Autocomp's `L = 2048` on trn1 and trn2.
//!
//! ```text
//! cargo run --release --example fused_mamba
//! ```

use ndarray::{Array2, Array3};
use nki_core::prelude::*;
use nki_kernels::mamba::{mamba_v1, mamba_v1_07, mamba_v2, mamba_v2_07};
use nki_kernels::reference::{self, ScanInputs};
use nki_kernels::report::{finish, print_check, print_profiles, Version};
use nki_kernels::testing::{allclose, random_range};
use std::process::ExitCode;

fn check(label: &str, x: &ScanInputs) -> Result<bool, NkiError> {
    let want = reference::selective_scan(x);
    let h3 = |a: &Array3<f32>| Hbm::from_array(a);
    let (d, u, a, b, c) = (
        h3(&x.delta)?,
        h3(&x.u)?,
        Hbm::from_array(&x.a)?,
        h3(&x.b)?,
        h3(&x.c)?,
    );
    let dims = x.delta.dim();
    let mut ok = true;
    for (name, v2) in [("v1", false), ("v2", true)] {
        let mut out = Hbm::<f32>::zeros([dims.0, dims.1, dims.2]);
        if v2 {
            mamba_v2::launch(1, &d, &u, &a, &b, &c, &mut out)?;
        } else {
            mamba_v1::launch(1, &d, &u, &a, &b, &c, &mut out)?;
        }
        ok &= print_check(
            &format!("{name} {label}"),
            allclose(&out.to_array()?, &want, 1e-2, 1e-2),
        );
        // NKI 0.7's kernel[1]: one core; the kernel returns its output.
        let (out, _report) = if v2 {
            mamba_v2_07::launch(1, &d, &u, &a, &b, &c)?
        } else {
            mamba_v1_07::launch(1, &d, &u, &a, &b, &c)?
        };
        let close = allclose(&out.to_array()?, &want, 1e-2, 1e-2);
        ok &= print_check(&format!("{name} {label}, NKI 0.7"), close);
    }
    Ok(ok)
}

fn run() -> Result<bool, NkiError> {
    let (batch, chans, len, states) = (1, 256, 512, 16);
    println!("mamba selective scan [B, C, L, N] = [{batch}, {chans}, {len}, {states}] against an f64 scan:");
    let ones = |d1| Array3::from_elem((batch, d1, len), 1.0f32);
    let toy = ScanInputs {
        delta: ones(chans),
        u: ones(chans),
        a: Array2::from_elem((chans, states), -1.0),
        b: ones(states),
        c: ones(states),
    };
    let mut ok = check("all-ones toy", &toy)?;
    let r3 = |d1, lo, hi, seed| {
        Array3::from_shape_vec(
            (batch, d1, len),
            random_range(batch * d1 * len, lo, hi, seed),
        )
        .expect("shape")
    };
    let random = ScanInputs {
        delta: r3(chans, 0.0, 0.2, 1),
        u: r3(chans, -1.0, 1.0, 2),
        a: Array2::from_shape_vec((chans, states), random_range(chans * states, -1.0, -0.1, 3))
            .expect("shape"),
        b: r3(states, -1.0, 1.0, 4),
        c: r3(states, -1.0, 1.0, 5),
    };
    ok &= check("random", &random)?;

    for len in [512, 2048] {
        let s3 = |d1| Hbm::<f32>::shape_only([batch, d1, len]);
        let (d, u, a, b, c) = (
            s3(chans),
            s3(chans),
            Hbm::<f32>::shape_only([chans, states]),
            s3(states),
            s3(states),
        );
        let v1 = |t: Target| mamba_v1::estimate(1, t, &d, &u, &a, &b, &c, &mut s3(chans));
        let v2 = |t: Target| mamba_v2::estimate(1, t, &d, &u, &a, &b, &c, &mut s3(chans));
        // A returning kernel's estimate gives (output, profile).
        let v1_07 = |t: Target| mamba_v1_07::estimate(1, t, &d, &u, &a, &b, &c).map(|(_, p)| p);
        let v2_07 = |t: Target| mamba_v2_07::estimate(1, t, &d, &u, &a, &b, &c).map(|(_, p)| p);
        print_profiles(
            &format!("[{batch}, {chans}, {len}, {states}] fp32"),
            &[
                Version::new("mamba v1", &v1),
                Version::new("mamba v2", &v2),
                Version::new("mamba v1 (0.7)", &v1_07),
                Version::new("mamba v2 (0.7)", &v2_07),
            ],
        )?;
    }
    Ok(ok)
}

fn main() -> ExitCode {
    finish(run())
}
