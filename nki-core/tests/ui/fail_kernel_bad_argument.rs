use nki_core::prelude::*;

// `#[nki_kernel]` takes no arguments but `debug` and `nki = ".."`.
#[nki_kernel(fast)]
fn copy(a: &Hbm<f32>, b: &mut Hbm<f32>) {
    let _ = (a, b);
}

fn main() {}
