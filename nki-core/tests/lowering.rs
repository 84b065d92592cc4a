//! Lowerings that decide the bottleneck, as the compiler does them (issue 8, deliverable 4):
//! partition broadcast on TensorE, free-dimension broadcast as a `tensor_scalar`-class
//! instruction, the default PSUM -> SBUF copy engine, and `nc_matmul` with `is_transpose`.

use nki_core::prelude::*;
// The Beta-1 instruction forms (allocating, `_into` twins): the seeds' dialect.
use nki_core::nisa::classic as nisa;
use nki_core::{Engine, Opcode};

fn ops(p: &Profile) -> Vec<(Engine, Opcode, &'static str)> {
    p.ops.iter().map(|o| (o.engine, o.opcode, o.api)).collect()
}

#[nki_kernel]
fn broadcasts(row: &Hbm<f32>, col: &Hbm<f32>, out_p: &mut Hbm<f32>, out_f: &mut Hbm<f32>) {
    let r = nl::load(row);
    let wide = nl::broadcast_to(&r, &[128, 600]);
    nl::store(out_p, &wide);
    let c = nl::load(col);
    let long = nl::broadcast_to(&c, &[128, 600]);
    nl::store(out_f, &long);
}

#[test]
fn partition_broadcast_runs_on_tensor_engine_and_free_broadcast_is_tensor_scalar() {
    let row = Hbm::from_vec(&[1, 600], (0..600).map(|i| i as f32).collect()).unwrap();
    let col = Hbm::from_vec(&[128, 1], (0..128).map(|i| i as f32).collect()).unwrap();
    let mut out_p = Hbm::<f32>::zeros([128, 600]);
    let mut out_f = Hbm::<f32>::zeros([128, 600]);
    let p = broadcasts::simulate(
        Grid::new([1]),
        Target::Trn2,
        &row,
        &col,
        &mut out_p,
        &mut out_f,
    )
    .unwrap();
    let bcast: Vec<_> = ops(&p)
        .into_iter()
        .filter(|o| o.2 == "nl.broadcast_to")
        .map(|o| (o.0, o.1))
        .collect();
    // 600 columns: two ones-vector matmuls (512 + 88) each read out of PSUM by ScalarE, then
    // one tensor_scalar-class VectorE instruction for the [128, 1] column.
    assert_eq!(
        bcast,
        vec![
            (Engine::Tensor, Opcode::Matmul),
            (Engine::Scalar, Opcode::TensorCopy),
            (Engine::Tensor, Opcode::Matmul),
            (Engine::Scalar, Opcode::TensorCopy),
            (Engine::Vector, Opcode::TensorScalar),
        ]
    );
    let kmn: Vec<_> = p.ops.iter().filter_map(|o| o.kmn).collect();
    assert_eq!(kmn, vec![[1, 128, 512], [1, 128, 88]]);
    let wide = out_p.to_f32_vec().unwrap();
    let long = out_f.to_f32_vec().unwrap();
    for r in [0usize, 77, 127] {
        for c in [0usize, 511, 599] {
            assert_eq!(wide[r * 600 + c], c as f32);
            assert_eq!(long[r * 600 + c], r as f32);
        }
    }
}

#[nki_kernel]
fn psum_copy_and_column_add(a: &Hbm<bf16>, col: &Hbm<f32>, out: &mut Hbm<f32>) {
    let x = nl::load(a);
    let t = nisa::nc_transpose(&x, nisa::Engine::Tensor);
    let y = nl::copy(&t, Some(DType::F32));
    let c = nl::load(col);
    let z = nl::add(&y, &c);
    nl::store(out, &z);
}

#[test]
fn psum_copies_default_to_scalar_engine_and_column_operands_are_tensor_scalar() {
    let a = Hbm::<bf16>::shape_only([128, 128]);
    let col = Hbm::<f32>::shape_only([128, 1]);
    let mut out = Hbm::<f32>::shape_only([128, 128]);
    let p = psum_copy_and_column_add::estimate(Grid::new([1]), Target::Trn1, &a, &col, &mut out)
        .unwrap();
    let o = ops(&p);
    assert!(
        o.contains(&(Engine::Scalar, Opcode::TensorCopy, "nl.copy")),
        "{o:?}"
    );
    assert!(
        o.contains(&(Engine::Vector, Opcode::TensorScalar, "nl.add")),
        "{o:?}"
    );
}

#[nki_kernel]
fn transpose_with_identity(a: &Hbm<f32>, id: &Hbm<f32>, out: &mut Hbm<f32>) {
    let x = nl::load(a);
    let i = nl::load(id);
    let t = nisa::nc_matmul_transpose(&x, &i);
    let y = nl::copy(&t, None);
    nl::store(out, &y);
}

#[test]
fn nc_matmul_is_transpose_needs_an_identity_and_transposes() {
    let (p, f) = (64usize, 96usize);
    let a = Hbm::from_vec(&[p, f], (0..p * f).map(|i| i as f32).collect()).unwrap();
    let eye: Vec<f32> = (0..p * p)
        .map(|i| if i / p == i % p { 1.0 } else { 0.0 })
        .collect();
    let id = Hbm::from_vec(&[p, p], eye.clone()).unwrap();
    let mut out = Hbm::<f32>::zeros([f, p]);
    let prof =
        transpose_with_identity::simulate(Grid::new([1]), Target::Trn2, &a, &id, &mut out).unwrap();
    let v = out.to_f32_vec().unwrap();
    for (r, c) in [(0usize, 0usize), (5, 7), (95, 63)] {
        assert_eq!(v[r * p + c], (c * f + r) as f32);
    }
    assert!(ops(&prof).contains(&(Engine::Tensor, Opcode::Transpose, "nisa.nc_matmul")));
    // Not an identity: an error naming the offending element, not a silently wrong result.
    let mut bad = eye;
    bad[1] = 2.0;
    let bad = Hbm::from_vec(&[p, p], bad).unwrap();
    let err = launch!(transpose_with_identity[1](&a, &bad, &mut out)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("[0, 1]"), "{err}");
    // Wrong shape.
    let small = Hbm::<f32>::zeros([32, 32]);
    let err = launch!(transpose_with_identity[1](&a, &small, &mut out)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ShapeMismatch);
}

/// Stores column block `[.., 0..512]` (`strided == false`) or every second column of a
/// `[128, 1024]` tile into a `[128, 512]` output.
#[nki_kernel]
fn store_columns(src: &Hbm<f32>, out: &mut Hbm<f32>, strided: bool) {
    let t = nl::load(src);
    if strided {
        nl::store(out, t.view().ap(&[[1024, 128], [2, 512]], 0));
    } else {
        nl::store(out, t.slice((.., 0..512)));
    }
}

#[test]
fn a_strided_store_is_recorded_as_nisa_dma_copy_records_it() {
    // `nl.store` lowers to the DMA record `nisa.dma_copy` makes: a tile read with a stride
    // moves element by element (non-contiguous), so it costs more than whole rows.
    let src = Hbm::from_vec(&[128, 1024], (0..128 * 1024).map(|i| i as f32).collect()).unwrap();
    let run = |strided: bool| {
        let mut out = Hbm::<f32>::zeros([128, 512]);
        let p =
            store_columns::simulate(Grid::new([1]), Target::Trn2, &src, &mut out, strided).unwrap();
        (p, out.to_f32_vec().unwrap())
    };
    let (rows, a) = run(false);
    let (every_second, b) = run(true);
    assert_eq!(a[513], 1024.0 + 1.0);
    assert_eq!(b[513], 1024.0 + 2.0);
    assert!(
        every_second.latency_ns > rows.latency_ns,
        "strided store {} ns, contiguous {} ns",
        every_second.latency_ns,
        rows.latency_ns
    );
}
