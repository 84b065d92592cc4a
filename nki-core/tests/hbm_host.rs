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

#[test]
fn a_shape_the_host_cannot_allocate_is_an_error_not_an_abort() {
    // 2^36 f32 slots (256 GiB): a valid shape no test machine holds.
    let e = Hbm::<f32>::zeros_dyn(&[1 << 18, 1 << 18])
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::HostMemory, "{e}");
    assert!(e.message().contains("[262144, 262144]"), "{e}");
    assert!(e.message().contains("274877906944 bytes"), "{e}");
    let m = nki_core::mesh::Mesh::new([2], ["x"]).unwrap();
    let spec = nki_core::mesh::PartitionSpec::new([Some("x"), None]);
    let e = nki_core::mesh::ShardedHbm::<f32>::zeros(&m, &[1 << 19, 1 << 18], spec)
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::HostMemory, "{e}");
}
