//! Host-side construction and read-back of HBM tensors from slices (what framework bridges use).

use nki_core::prelude::*;

#[test]
fn from_slice_and_to_vec_round_trip_each_dtype() {
    let values: Vec<f32> = (0..24).map(|i| i as f32 * 0.25 - 3.0).collect();
    let t = Hbm::<f32>::from_slice(&[2, 3, 4], &values).unwrap();
    assert_eq!(t.shape(), &[2, 3, 4]);
    assert_eq!(t.to_vec().unwrap(), values);

    // bf16 stores values rounded to bf16; these quarters are exact.
    let halves: Vec<bf16> = values.iter().map(|&v| bf16::from_f32(v)).collect();
    let b = Hbm::<bf16>::from_slice(&[24], &halves).unwrap();
    assert_eq!(b.to_vec().unwrap(), halves);
    assert_eq!(b.dtype(), DType::BF16);
}

#[test]
fn from_slice_rejects_a_length_that_does_not_fit_the_shape() {
    let e = Hbm::<f32>::from_slice(&[4, 4], &[0.0; 15]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
    assert!(e.to_string().contains("16 elements but 15 values"), "{e}");
    assert!(
        Hbm::<f32>::from_slice(&[], &[]).is_err(),
        "rank 0 is not a tensor shape"
    );
}

#[test]
fn zeros_dyn_takes_a_run_time_shape() {
    let z = Hbm::<f16>::zeros_dyn(&[3, 5]).unwrap();
    assert_eq!(z.shape(), &[3, 5]);
    assert!(z.to_vec().unwrap().iter().all(|v| v.to_f32() == 0.0));
    assert!(Hbm::<f16>::zeros_dyn(&[1, 1, 1, 1, 1, 1]).is_err());
}
