use nki_core::prelude::*;

// A kernel writes its results into `&mut Hbm<T>` outputs; it cannot return a value.
#[nki_kernel]
fn returns_a_tile(a: &Hbm<f32>) -> usize {
    a.shape()[0]
}

fn main() {}
