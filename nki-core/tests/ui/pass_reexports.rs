// A user crate that depends on nki-core alone: the `ndarray` and `half` versions nki-core's API
// takes come from nki-core's re-exports, so the user never names (or adds) either crate.
use nki_core::half::bf16;
use nki_core::ndarray::{Array2, ArrayD};
use nki_core::prelude::*;

fn main() {
    let a: Array2<bf16> = Array2::from_shape_fn((4, 8), |(i, j)| bf16::from_f32((i * 8 + j) as f32));
    let h = Hbm::<bf16>::from_array(&a).unwrap();
    let back: ArrayD<bf16> = h.to_array().unwrap();
    assert_eq!(back.shape(), &[4, 8]);
    assert_eq!(back[[3, 7]], bf16::from_f32(31.0));
    // The prelude's `bf16` is the same type as `nki_core::half::bf16`.
    let x: nki_core::prelude::bf16 = back[[0, 1]];
    assert_eq!(x.to_f32(), 1.0);
}
