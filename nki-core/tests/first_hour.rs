//! What a new kernel author meets first: errors that use the names they wrote (the `let`
//! bindings of their kernel, the API they called), no message ending in an empty list, the
//! NKI 0.7 kernel written without `nki = "0.7"` caught with the fix, and sweeps of kernels that
//! return their outputs.

// The 0.7 entries NKI 0.8 deprecated (nisa LNC calls, virtual registers) stay provided and
// tested here unchanged.
#![allow(deprecated)]

use nki_core::prelude::*;
use nki_core::sweep::{ParamGrid, Sweep};

/// An NKI 0.7 kernel that reads an SBUF tensor nothing wrote: the error names it `y`.
#[nki_kernel(nki = "0.7")]
fn reads_unwritten_y(a: &Hbm<f32>) -> Hbm<f32> {
    let out = nl::ndarray(a.shape(), DType::F32, nl::shared_hbm);
    let x = nl::ndarray(&[4, 8], DType::F32, nl::sbuf);
    nisa::dma_copy(&x, a, None);
    let y = nl::ndarray(&[4, 8], DType::F32, nl::sbuf);
    let z = nl::ndarray(&[4, 8], DType::F32, nl::sbuf);
    nisa::tensor_tensor(&z, &x, &y, nl::AluOp::Add, None);
    nisa::dma_copy(&out, &z, None);
    out
}

#[test]
fn an_error_names_a_tensor_after_its_let_binding() {
    let a = Hbm::<f32>::full([4, 8], 1.0);
    for mode in [Mode::Execute, Mode::Estimate] {
        let e = reads_unwritten_y::run(Launch::new(1).mode(mode), &a).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UninitializedRead, "{mode:?}: {e}");
        assert!(e.message().contains("'y'"), "{mode:?}: {e}");
    }
}

/// Returns its output named after the binding, and one named by `name=`, which wins.
#[nki_kernel(nki = "0.7")]
fn named_outputs(a: &Hbm<f32>) -> (Hbm<f32>, Hbm<f32>) {
    let doubled = nl::ndarray(a.shape(), DType::F32, nl::shared_hbm);
    let other = nl::ndarray(a.shape(), DType::F32, nl::shared_hbm.name("explicit"));
    let x = nl::ndarray(&[4, 8], DType::F32, nl::sbuf);
    nisa::dma_copy(&x, a, None);
    nisa::dma_copy(&doubled, &x, None);
    nisa::dma_copy(&other, &x, None);
    (doubled, other)
}

#[test]
fn returned_outputs_are_named_after_their_binding_unless_named() {
    let a = Hbm::<f32>::full([4, 8], 1.0);
    let ((doubled, other), _) = named_outputs::launch(1, &a).unwrap();
    assert_eq!(doubled.name(), "doubled");
    assert_eq!(other.name(), "explicit");
}

/// A Beta-1 kernel that never writes its HBM scratch tensor and reads it: the error names the
/// binding. Its tiles `p` fill PSUM: the capacity error lists them by name.
#[nki_kernel]
fn fills_psum(out: &mut Hbm<f32>) {
    let mut held = Vec::new();
    for _ in 0..9 {
        let p = nl::zeros(&[128, 512], DType::F32, nl::PSUM);
        held.push(p);
    }
    nl::store(out, &held[0]);
}

#[test]
fn beta1_tiles_are_named_after_their_binding_in_capacity_errors() {
    let mut out = Hbm::<f32>::zeros([128, 512]);
    let e = launch!(fills_psum[1](&mut out)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Capacity, "{e}");
    assert!(e.message().contains("'p' float32[128, 512]"), "{e}");
}

#[test]
fn a_tile_too_large_on_its_own_lists_no_live_tiles() {
    let e = Launch::new(1)
        .run(|| {
            let _ = nl::zeros(&[128, 65536], DType::F32, nl::SBUF);
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Capacity, "{e}");
    let m = e.message();
    assert!(m.contains("more than a partition holds"), "{e}");
    assert!(!m.contains("0 live") && !m.trim_end().ends_with(':'), "{e}");
}

/// Written in NKI 0.7 (an output allocated in HBM and returned, the work split over
/// `program_id`), but without `nki = "0.7"`.
#[nki_kernel]
fn add_07_without_dialect(a: &Hbm<f32>) -> Hbm<f32> {
    let out = nl::ndarray(a.shape(), DType::F32, nl::shared_hbm);
    let r = nl::program_id(0) * 2;
    let x = nl::ndarray(&[2, 8], DType::F32, nl::sbuf);
    nisa::dma_copy(&x, a.slice((r..r + 2, ..)), None);
    nisa::dma_copy(out.slice((r..r + 2, ..)), &x, None);
    out
}

/// The same kernel, marked NKI 0.7.
#[nki_kernel(nki = "0.7")]
fn add_07(a: &Hbm<f32>) -> Hbm<f32> {
    let out = nl::ndarray(a.shape(), DType::F32, nl::shared_hbm);
    let r = nl::program_id(0) * 2;
    let x = nl::ndarray(&[2, 8], DType::F32, nl::sbuf);
    nisa::dma_copy(&x, a.slice((r..r + 2, ..)), None);
    nisa::dma_copy(out.slice((r..r + 2, ..)), &x, None);
    out
}

#[test]
fn a_07_kernel_without_its_dialect_on_a_grid_of_two_is_an_error_with_the_fix() {
    let a = Hbm::<f32>::full([4, 8], 1.0);
    for mode in [Mode::Execute, Mode::Estimate] {
        let e = add_07_without_dialect::run(Launch::new(2).mode(mode), &a).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidGrid, "{mode:?}: {e}");
        assert!(e.message().contains("nki = \"0.7\""), "{mode:?}: {e}");
        assert!(e.message().contains("shared_hbm"), "{mode:?}: {e}");
        assert_eq!(e.location().unwrap().file, file!(), "{e}");
    }
    // Marked 0.7, [2] is the two cores of a logical NeuronCore.
    let (out, report) = add_07::launch(2, &a).unwrap();
    assert_eq!(report.instances.len(), 2);
    assert_eq!(out.to_vec().unwrap(), vec![1.0; 32]);
    // On [1], or on a grid that is no NKI 0.7 launch, the meaning is Beta 1's, unchanged.
    let a2 = Hbm::<f32>::full([2, 8], 1.0);
    add_07_without_dialect::launch(1, &a2).unwrap();
    add_07_without_dialect::launch(Grid::new([1, 1]), &a2).unwrap();
}

#[test]
fn a_kernel_2_profile_reads_as_the_two_cores_of_one_logical_neuroncore() {
    let a = Hbm::<f32>::full([4, 8], 1.0);
    let (_, p) = add_07::estimate(2, Target::Trn2, &a).unwrap();
    let text = p.to_string();
    assert!(
        text.contains("the 2 physical cores of one logical NeuronCore (LNC=2):"),
        "{text}"
    );
    assert!(text.contains("nc0: program_id 0, latency"), "{text}");
    assert!(text.contains("nc1: program_id 1, latency"), "{text}");
    assert!(!text.contains("1 instances"), "{text}");
    // A Beta-1 grid placing four instances on each core says they run one after another.
    let (a, mut out) = (Hbm::<f32>::full([8, 8], 1.0), Hbm::<f32>::zeros([8, 8]));
    let grid = Grid::new([spmd_dim(2, nc(2)), spmd_dim(2, 1)]);
    let launch = Launch::new(grid).target(Target::Trn2).mode(Mode::Estimate);
    let report = copy_beta1::run(launch, &a, &mut out).unwrap();
    let text = report.profile.unwrap().to_string();
    assert!(
        text.contains("nc0: 4 program instances, one after another, latency"),
        "{text}"
    );
}

/// Copies two rows and four columns of `a` per program instance into `out` (NKI Beta 1: the
/// program id of the first grid dimension picks the rows, the second the columns).
#[nki_kernel]
fn copy_beta1(a: &Hbm<f32>, out: &mut Hbm<f32>) {
    let (r, c) = (nl::program_id(0) * 2, nl::program_id(1) * 4);
    let x = nl::load(a.slice((r..r + 2, c..c + 4)));
    nl::store(out.slice((r..r + 2, c..c + 4)), &x);
}

/// Exchanges a tile between the two cores: NKI 0.7 only.
#[nki_kernel]
fn swaps_without_dialect(out: &mut Hbm<f32>) {
    let t = nl::zeros(&[4, 8], DType::F32, nl::SBUF);
    let r = nl::ndarray(&[4, 8], DType::F32, nl::SBUF);
    nisa::sendrecv(&t, &r, 1 - nl::program_id(0), 1 - nl::program_id(0));
    nl::store(
        out.slice((nl::program_id(0) * 4..nl::program_id(0) * 4 + 4, ..)),
        &r,
    );
}

#[test]
fn sendrecv_in_a_beta1_kernel_on_a_grid_of_two_says_to_add_the_dialect() {
    let mut out = Hbm::<f32>::zeros([8, 8]);
    let e = launch!(swaps_without_dialect[2](&mut out)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidGrid, "{e}");
    assert!(e.message().contains("nki = \"0.7\""), "{e}");
    assert!(e.message().contains("sendrecv"), "{e}");
}

/// Scales `a` in column chunks of `chunk`, returning the result (NKI 0.7).
#[nki_kernel(nki = "0.7")]
fn scale(a: &Hbm<f32>, chunk: usize) -> Hbm<f32> {
    let out = nl::ndarray(a.shape(), DType::F32, nl::shared_hbm);
    for j in 0..a.shape()[1] / chunk {
        let cols = j * chunk..(j + 1) * chunk;
        let x = nl::ndarray(&[128, chunk], DType::F32, nl::sbuf);
        nisa::dma_copy(&x, a.slice((.., cols.clone())), None);
        let y = nl::ndarray(&[128, chunk], DType::F32, nl::sbuf);
        nisa::tensor_scalar(&y, &x, nl::AluOp::Multiply, 2.0, None);
        nisa::dma_copy(out.slice((.., cols)), &y, None);
    }
    out
}

#[test]
fn a_sweep_takes_a_returning_kernels_estimate_as_it_comes() {
    let a = Hbm::<f32>::shape_only([128, 4096]);
    let grid = ParamGrid::new().axis("chunk", [512, 1024, 2048]);
    let report = Sweep::new(grid)
        .progress(false)
        .run(|p| scale::estimate(1, Target::Trn2, &a, p["chunk"]));
    assert_eq!(report.points.len(), 3);
    assert!(report.best().is_some(), "{report}");
}

#[test]
fn an_element_wise_kernels_profile_shows_no_tensor_engine_or_mfu() {
    let a = Hbm::<f32>::shape_only([128, 4096]);
    let (_, p) = scale::estimate(1, Target::Trn2, &a, 1024).unwrap();
    assert!(!p.uses_tensor_engine());
    let shown = p.to_string();
    assert!(!shown.contains("MFU"), "{shown}");
    // No engine row of TensorE (the bounds section may still name TensorE's peak).
    let row = |engine: &str| shown.lines().any(|l| l.trim_start().starts_with(engine));
    assert!(!row("TensorE "), "{shown}");
    // Only the engines it used: the multiply (on VectorE or ScalarE) and DMA; no GpSimdE.
    assert!(!row("GpSimdE "), "{shown}");
    assert!(shown.contains("  DMA    "), "{shown}");
    let html = p.to_html();
    assert!(!html.contains("MFU"));
    // A kernel with a matmul keeps both.
    let p = Launch::new(1)
        .mode(Mode::Estimate)
        .target(Target::Trn2)
        .run(|| {
            let x = nl::zeros(&[128, 128], DType::BF16, nl::SBUF);
            let _ = nl::matmul(&x, &x, true);
        })
        .unwrap()
        .profile
        .unwrap();
    assert!(p.uses_tensor_engine());
    let shown = p.to_string();
    assert!(
        shown.contains("MFU") && shown.contains("\n  TensorE "),
        "{shown}"
    );
}

/// The option structs' former `*Args` names still compile, as aliases of the `*Opts` names
/// (deprecated; this file allows it), in `nisa` and in `nisa::classic`.
#[test]
fn the_former_args_names_of_option_structs_still_work() {
    use nki_core::nisa::{
        AccumOpts, Activate2Args, Activate2Opts, ActivationArgs, ActivationOpts, ReduceArgs,
        ReduceCmd, ScanArgs, ScanOpts, TensorScalarArgs, TensorScalarOpts,
    };
    // The same types: a value built with the old name is one of the new type.
    let _: ActivationOpts = ActivationArgs::new().scale(2.0);
    let _: TensorScalarOpts = TensorScalarArgs::new();
    let _: ScanOpts = ScanArgs::new();
    let _: AccumOpts = ReduceArgs::new();
    let _: Activate2Opts = Activate2Args::new();
    let _: ActivationOpts = nki_core::nisa::classic::ActivationArgs::new();
    let _: TensorScalarOpts = nki_core::nisa::classic::TensorScalarArgs::new();
    let _: ScanOpts = nki_core::nisa::classic::ScanArgs::new();
    // And a kernel written with them runs as before.
    let x = Hbm::<f32>::from_vec(&[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let mut out = Hbm::<f32>::zeros([2, 3]);
    let mut sums = Hbm::<f32>::zeros([2, 1]);
    let (o, s) = (out.as_output(), sums.as_output());
    Launch::new(1)
        .run(|| {
            let t = nl::load(&x);
            let y = nl::ndarray(&[2, 3], DType::F32, nl::SBUF);
            nisa::activation(&y, nl::ActFn::Copy, &t, ActivationArgs::new().scale(2.0));
            let z = nl::ndarray(&[2, 3], DType::F32, nl::SBUF);
            nisa::tensor_scalar(
                &z,
                &y,
                nl::AluOp::Add,
                1.0,
                TensorScalarArgs::new().then(nl::AluOp::Multiply, 10.0),
            );
            let r = nl::ndarray(&[2, 1], DType::F32, nl::SBUF);
            let w = nl::ndarray(&[2, 3], DType::F32, nl::SBUF);
            let args = ReduceArgs::new().cmd(ReduceCmd::ResetReduce).reduce_res(&r);
            nisa::tensor_scalar_reduce(&w, &t, nl::AluOp::Multiply, 1.0, nl::AluOp::Add, args);
            nl::store(&o, &z);
            nl::store(&s, &r);
        })
        .unwrap();
    assert_eq!(
        out.to_vec().unwrap(),
        [30.0, 50.0, 70.0, 90.0, 110.0, 130.0]
    );
    assert_eq!(sums.to_vec().unwrap(), [6.0, 15.0]);
}
