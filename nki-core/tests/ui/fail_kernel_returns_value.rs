use nki_core::prelude::*;

// A kernel returns its outputs as `Hbm<T>` (or a tuple of them), or nothing: not a value.
#[nki_kernel]
fn returns_a_tile(a: &Hbm<f32>) -> usize {
    a.shape()[0]
}

fn main() {}
