use nki_core::prelude::*;

// `&mut` parameters are HBM outputs; a `&mut` of anything else is rejected.
#[nki_kernel]
fn mut_scalar(a: &Hbm<f32>, n: &mut usize) {
    let _ = (a, n);
}

fn main() {}
