//! The NKI 0.8 surface (Neuron 2.34): the `#[nki_kernel(nki = "0.8")]` dialect and the
//! entries 0.8 added, each against a plain-Rust reference or its documented rule.

use nki_core::prelude::*;

/// One row per core of an LNC=2 launch, written the 0.8 way (the output allocated and
/// returned; `nl.store` into it).
#[nki_kernel(nki = "0.8")]
fn rows_per_core08(x: &Hbm<f32>) -> Hbm<f32> {
    let out = nl::ndarray(x.shape(), DType::F32, nl::shared_hbm);
    let me = nl::program_id(0);
    let n = nl::num_programs(0);
    let rows = x.shape()[0] / n;
    let t = nl::load(x.slice((me * rows..(me + 1) * rows, ..)));
    nl::store(out.slice((me * rows..(me + 1) * rows, ..)), &t);
    out
}

#[test]
fn an_08_kernel_launches_on_a_logical_neuroncore() {
    assert_eq!(rows_per_core08::DIALECT, Dialect::Nki08);
    let vals: Vec<f32> = (0..64 * 4).map(|v| v as f32).collect();
    let x = Hbm::from_vec(&[64, 4], vals.clone()).unwrap();
    for k in [1, 2] {
        let (out, report) = rows_per_core08::launch(k, &x).unwrap();
        assert_eq!(report.dialect, Dialect::Nki08);
        assert_eq!(report.instances.len(), k);
        assert_eq!(out.to_f32_vec().unwrap(), vals);
    }
    // As in 0.7, there is no SPMD grid: kernel[4] is an error naming the dialect.
    let e = rows_per_core08::launch(4, &x).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidGrid, "{e}");
    assert!(e.message().contains("NKI 0.8"), "{e}");
}
