use nki_core::prelude::*;

// The NKI dialect of a kernel is "0.8", "0.7" or "beta1": no other version.
#[nki_kernel(debug, nki = "0.6")]
fn copy(a: &Hbm<f32>, b: &mut Hbm<f32>) {
    let _ = (a, b);
}

fn main() {}
