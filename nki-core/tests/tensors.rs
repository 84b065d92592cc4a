//! NKI 0.7's one tensor type through launched kernels: `nl::ndarray(shape, dtype, buffer)` in
//! SBUF, PSUM, private and shared HBM; kernels returning their outputs (`-> Hbm<T>`, tuples);
//! `name` and `address`; views and `.ap` on tensors in every memory; tensors named by kernel
//! parameter names in errors; and the errors of bad input, each at the user's line.

use nki_core::prelude::*;
// The Beta-1 instruction forms (allocating, `_into` twins): the seeds' dialect.
use nki_core::nisa::classic as nisa;

fn seq(n: usize) -> Vec<f32> {
    (0..n).map(|x| x as f32).collect()
}

/// A source line noted inside a kernel.
#[derive(Default)]
struct Line(std::sync::atomic::AtomicU32);

impl Line {
    fn set(&self, l: u32) {
        self.0.store(l, std::sync::atomic::Ordering::Relaxed)
    }
    fn get(&self) -> u32 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// This file's name as error locations show it.
const FILE: &str = file!();

/// `a + b` over row blocks of 64, written the 0.7 way: the output allocated in shared HBM and
/// returned, tiles made with `nl::ndarray(.., nl::sbuf)`, data moved by `dma_copy`.
#[nki_kernel(nki = "0.7")]
fn add_07(a: &Hbm<f32>, b: &Hbm<f32>) -> Hbm<f32> {
    let out = nl::ndarray(a.shape(), DType::F32, nl::shared_hbm.name("sum"));
    let r0 = nl::program_id(0) * 64;
    let x = nl::ndarray(&[64, 32], DType::F32, nl::sbuf);
    let y = nl::ndarray(&[64, 32], DType::F32, nl::sbuf);
    nisa::dma_copy(&x, a.slice((r0..r0 + 64, ..)));
    nisa::dma_copy(&y, b.slice((r0..r0 + 64, ..)));
    let z = nl::ndarray(&[64, 32], DType::F32, nl::sbuf);
    nisa::tensor_tensor_into(&z, &x, &y, nl::AluOp::Add);
    nisa::dma_copy(out.slice((r0..r0 + 64, ..)), &z);
    out
}

/// The same kernel in the seeds' dialect (`&mut Hbm` output, Beta-1 tiles).
#[nki_kernel]
fn add_beta1(a: &Hbm<f32>, b: &Hbm<f32>, out: &mut Hbm<f32>) {
    let r0 = nl::program_id(0) * 64;
    let x = nl::ndarray(&[64, 32], DType::F32, nl::SBUF);
    let y = nl::ndarray(&[64, 32], DType::F32, nl::SBUF);
    nisa::dma_copy(&x, a.slice((r0..r0 + 64, ..)));
    nisa::dma_copy(&y, b.slice((r0..r0 + 64, ..)));
    let z = nl::ndarray(&[64, 32], DType::F32, nl::SBUF);
    nisa::tensor_tensor_into(&z, &x, &y, nl::AluOp::Add);
    nisa::dma_copy(out.slice((r0..r0 + 64, ..)), &z);
}

fn inputs() -> (Hbm<f32>, Hbm<f32>, Vec<f32>) {
    let a = Hbm::from_vec(&[128, 32], seq(128 * 32)).unwrap();
    let b = Hbm::from_vec(&[128, 32], seq(128 * 32).iter().map(|x| 0.5 * x).collect()).unwrap();
    let want = seq(128 * 32).iter().map(|x| 1.5 * x).collect();
    (a, b, want)
}

#[test]
fn a_kernel_returns_its_output_in_every_mode() {
    let (a, b, want) = inputs();
    let (out, report) = add_07::launch(2, &a, &b).unwrap();
    assert_eq!(report.instances.len(), 2);
    assert_eq!(out.shape(), &[128, 32]);
    assert_eq!(out.name(), "sum");
    assert_eq!(out.to_f32_vec().unwrap(), want);

    let (out, profile) = add_07::simulate(2, Target::Trn2, &a, &b).unwrap();
    assert_eq!(out.to_f32_vec().unwrap(), want);
    assert!(profile.latency_ns > 0.0);

    let (sa, sb) = (
        Hbm::<f32>::shape_only([128, 32]),
        Hbm::<f32>::shape_only([128, 32]),
    );
    let (out, estimate) = add_07::estimate(2, Target::Trn2, &sa, &sb).unwrap();
    assert!(!out.has_data());
    assert_eq!(out.shape(), &[128, 32]);
    assert_eq!(estimate.latency_ns, profile.latency_ns);
}

#[test]
fn the_07_form_records_exactly_what_the_beta1_form_records() {
    let (a, b, _) = inputs();
    let (_, p07) = add_07::simulate(2, Target::Trn2, &a, &b).unwrap();
    let mut out = Hbm::<f32>::zeros([128, 32]);
    // NKI 0.7's kernel[2] is Beta 1's one instance on each of two cores.
    let p1 = add_beta1::simulate(Grid::lnc(2), Target::Trn2, &a, &b, &mut out).unwrap();
    assert_eq!(p07.instructions, p1.instructions);
    assert_eq!(p07.instruction_counts, p1.instruction_counts);
    assert_eq!(p07.latency_ns, p1.latency_ns);
}

/// Two outputs, one of them written through PSUM scratch and private HBM scratch.
#[nki_kernel]
fn two_outputs(a: &Hbm<f32>) -> (Hbm<f32>, Hbm<bf16>) {
    let doubled = nl::ndarray(&[4, 8], DType::F32, nl::shared_hbm);
    let halved = nl::ndarray(&[4, 8], DType::BF16, nl::shared_hbm);
    let scratch = nl::ndarray(&[4, 8], DType::F32, nl::private_hbm.name("scratch"));
    let x = nl::ndarray(&[4, 8], DType::F32, nl::sbuf);
    nisa::dma_copy(&x, a);
    // Round trip through private HBM scratch.
    nisa::dma_copy(&scratch, &x);
    let y = nl::ndarray(&[4, 8], DType::F32, nl::sbuf);
    nisa::dma_copy(&y, &scratch);
    let d = nl::multiply(&y, 2.0);
    nisa::dma_copy(&doubled, &d);
    let h = nl::multiply(&y, 0.5);
    nisa::dma_copy(&halved, &h);
    (doubled, halved)
}

#[test]
fn a_kernel_returns_a_tuple_of_outputs_and_uses_hbm_scratch() {
    let a = Hbm::from_vec(&[4, 8], seq(32)).unwrap();
    let ((d, h), _) = two_outputs::launch(1, &a).unwrap();
    assert_eq!(
        d.to_f32_vec().unwrap(),
        seq(32).iter().map(|x| 2.0 * x).collect::<Vec<_>>()
    );
    assert_eq!(h.dtype(), DType::BF16);
    assert_eq!(
        h.to_f32_vec().unwrap(),
        seq(32).iter().map(|x| 0.5 * x).collect::<Vec<_>>()
    );
}

#[nki_kernel]
fn returns_sbuf(a: &Hbm<f32>) -> Hbm<f32> {
    let x = nl::ndarray(&[4, 8], DType::F32, nl::sbuf);
    nisa::dma_copy(&x, a);
    x
}

#[nki_kernel]
fn never_writes_its_output(a: &Hbm<f32>) -> Hbm<f32> {
    let _ = a;
    nl::ndarray(&[4, 8], DType::F32, nl::shared_hbm.name("result"))
}

#[nki_kernel]
fn returns_the_wrong_dtype(a: &Hbm<f32>) -> Hbm<f32> {
    let out = nl::ndarray(&[4, 8], DType::BF16, nl::shared_hbm);
    nisa::dma_copy(&out, a);
    out
}

#[nki_kernel(nki = "0.7")]
fn instances_disagree(a: &Hbm<f32>) -> Hbm<f32> {
    let rows = 4 + nl::program_id(0);
    let out = nl::ndarray(&[rows, 8], DType::F32, nl::shared_hbm);
    nisa::dma_copy(out.slice((0..4, ..)), a);
    out
}

#[test]
fn bad_returns_are_clear_errors() {
    let a = Hbm::from_vec(&[4, 8], seq(32)).unwrap();
    let e = returns_sbuf::launch(1, &a).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WrongMemory, "{e}");
    assert!(e.message().contains("nl::shared_hbm"), "{e}");

    let e = never_writes_its_output::launch(1, &a).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutputNotWritten, "{e}");
    assert!(e.message().contains("result"), "{e}");

    let e = returns_the_wrong_dtype::launch(1, &a).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DType, "{e}");
    assert!(
        e.message().contains("Hbm<float32>") || e.message().contains("bfloat16"),
        "{e}"
    );

    let e = instances_disagree::launch(2, &a).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch, "{e}");
    assert!(e.message().contains("same order"), "{e}");
}

#[nki_kernel]
fn reads_too_far(a: &Hbm<f32>, out: &mut Hbm<f32>) {
    let x = nl::load(a.slice((0..8, ..)));
    nl::store(out, &x);
}

#[test]
fn tensors_are_named_by_kernel_parameters() {
    let a = Hbm::from_vec(&[4, 8], seq(32)).unwrap();
    let mut result = Hbm::<f32>::zeros([4, 8]);
    let e = reads_too_far::launch(1, &a, &mut result).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfBounds, "{e}");
    assert!(e.message().contains("tensor a "), "{e}");
    assert_eq!(a.name(), "a");
    assert_eq!(result.name(), "out");
}

#[test]
fn on_chip_tensors_carry_their_name_into_errors_in_every_mode() {
    for mode in [Mode::Execute, Mode::Estimate] {
        let e = Launch::new(1)
            .mode(mode)
            .run(|| {
                let acc = nl::ndarray(&[4, 8], DType::F32, nl::sbuf.name("acc"));
                assert_eq!(acc.name(), "acc");
                let _ = nl::add(&acc, 1.0);
            })
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UninitializedRead, "{mode:?}: {e}");
        assert!(e.message().contains("'acc'"), "{mode:?}: {e}");
    }
}

#[test]
fn tensors_have_nkis_attributes() {
    Launch::new(1)
        .run(|| {
            let t = nl::ndarray(&[16, 4, 8], DType::BF16, nl::sbuf);
            assert_eq!(t.buffer(), nl::Buffer::Sbuf);
            assert_eq!((t.ndim(), t.size(), t.dtype()), (3, 512, DType::BF16));
            assert_eq!(t.strides(), vec![32, 8, 1]);
            let v = t.slice((2, 1..3, 0..8));
            // An integer on the partition dimension keeps it, with size 1.
            assert_eq!(v.shape(), &[1, 2, 8]);
            assert_eq!(v.offset(), 2 * 32 + 8);
            assert!(!v.is_contiguous() || v.shape()[0] == 1);
            let p = nl::ndarray(&[8, 512], DType::F32, nl::psum);
            assert_eq!(p.buffer(), nl::Buffer::Psum);
            let h = nl::ndarray(&[3, 5], DType::F32, nl::hbm);
            assert_eq!(h.buffer(), nl::Buffer::PrivateHbm);
            // In HBM an integer index drops its dimension.
            assert_eq!(h.slice((1, ..)).shape(), &[5]);
            assert_eq!(h.reshape(&[15]).shape(), &[15]);
            let s = nl::ndarray(&[3, 5], DType::F32, nl::shared_hbm);
            assert_eq!(s.buffer(), nl::Buffer::SharedHbm);
            // Written so the launch's shared tensor is not an unwritten output.
            nisa::dma_copy(&s, &nl::zeros(&[3, 5], DType::F32, nl::sbuf));
        })
        .unwrap();
}

#[test]
fn ap_is_absolute_on_the_storage_in_every_memory() {
    let a = Hbm::from_vec(&[4, 8], seq(32)).unwrap();
    let mut out = Hbm::<f32>::zeros([2, 4]);
    let dst = out.as_output();
    Launch::new(1)
        .run(|| {
            let t = nl::ndarray(&[4, 8], DType::F32, nl::sbuf);
            nisa::dma_copy(&t, &a);
            // Partitions 0..2, every other element from element 1: ignores the view it is
            // called on (a slice of partition 3).
            let v = t.slice((3, ..)).ap(&[[8, 2], [2, 4]], 1);
            assert_eq!(v.shape(), &[2, 4]);
            let c = nl::copy(v.clone(), None);
            assert_eq!(c.values(), vec![1., 3., 5., 7., 9., 11., 13., 15.]);
            // The same pattern on an HBM tensor: row-major over its storage.
            let h = nl::ndarray(&[4, 8], DType::F32, nl::private_hbm);
            nisa::dma_copy(&h, &t);
            let hv = h.slice((2, 0..2)).ap(&[[8, 2], [2, 4]], 1);
            let u = nl::ndarray(&[2, 4], DType::F32, nl::sbuf);
            nisa::dma_copy(&u, hv);
            assert_eq!(u.tile().values(), c.values());
            nl::store(&dst, &u);
        })
        .unwrap();
    assert_eq!(
        out.to_f32_vec().unwrap(),
        vec![1., 3., 5., 7., 9., 11., 13., 15.]
    );
}

#[test]
fn ap_outside_its_storage_or_striding_partitions_fails_at_the_users_line() {
    let cases: [(&[[usize; 2]], usize, ErrorKind); 3] = [
        (&[[8, 2], [1, 8]], 25, ErrorKind::OutOfBounds),
        (&[[8, 5], [1, 8]], 0, ErrorKind::OutOfBounds),
        (&[[16, 2], [1, 8]], 0, ErrorKind::PartitionOffset),
    ];
    for (pattern, offset, kind) in cases {
        let line = Line::default();
        let e = Launch::new(1)
            .run(|| {
                let t = nl::ndarray(&[4, 8], DType::F32, nl::sbuf.name("tile_t"));
                line.set(line!() + 1);
                let _ = t.ap(pattern, offset);
            })
            .unwrap_err();
        assert_eq!(e.kind(), kind, "{pattern:?}: {e}");
        assert!(e.message().contains("tile_t"), "{e}");
        let loc = e.location().unwrap();
        assert_eq!((loc.file, loc.line), (FILE, line.get()), "{e}");
    }
    let e = Launch::new(1)
        .run(|| {
            let h = nl::ndarray(&[4, 8], DType::F32, nl::private_hbm.name("scratch"));
            let _ = h.ap(&[[8, 4], [1, 8]], 1);
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfBounds, "{e}");
    assert!(e.message().contains("scratch"), "{e}");
}

#[test]
fn an_hbm_tensor_as_a_compute_operand_fails_at_the_users_line() {
    let line = Line::default();
    let e = Launch::new(1)
        .run(|| {
            let h = nl::ndarray(&[4, 8], DType::F32, nl::private_hbm.name("scratch"));
            line.set(line!() + 1);
            let _ = nl::add(&h, 1.0);
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WrongMemory, "{e}");
    assert!(e.message().contains("scratch"), "{e}");
    let loc = e.location().unwrap();
    assert_eq!((loc.file, loc.line), (FILE, line.get()), "{e}");
}

#[test]
fn unwritten_hbm_scratch_reads_are_errors() {
    let e = Launch::new(1)
        .run(|| {
            let h = nl::ndarray(&[4, 8], DType::F32, nl::private_hbm.name("scratch"));
            let t = nl::ndarray(&[4, 8], DType::F32, nl::sbuf);
            nisa::dma_copy(&t, &h);
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UninitializedRead, "{e}");
    assert!(e.message().contains("scratch"), "{e}");
}

#[test]
fn manual_addresses_are_checked_for_overlap_and_psum_banks() {
    // Placed side by side: fine; a third overlapping the second: an error naming both.
    let line = Line::default();
    let e = Launch::new(1)
        .run(|| {
            let _a = nl::ndarray(&[128, 512], DType::F32, nl::sbuf.name("a").address(0, 0));
            let _b = nl::ndarray(&[64, 256], DType::F32, nl::sbuf.name("b").address(0, 2048));
            let _c = nl::ndarray(
                &[32, 128],
                DType::BF16,
                nl::sbuf.name("c").address(64, 2048),
            );
            line.set(line!() + 1);
            let _d = nl::ndarray(
                &[32, 128],
                DType::BF16,
                nl::sbuf.name("d").address(32, 2560),
            );
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AddressOverlap, "{e}");
    assert!(
        e.message().contains("'d'") && e.message().contains("'b'"),
        "{e}"
    );
    assert_eq!(e.location().unwrap().line, line.get(), "{e}");

    // A placed tensor that was dropped frees its place.
    Launch::new(1)
        .run(|| {
            {
                let _a = nl::ndarray(&[128, 512], DType::F32, nl::sbuf.address(0, 0));
            }
            let _b = nl::ndarray(&[128, 512], DType::F32, nl::sbuf.address(0, 0));
            let _p = nl::ndarray(&[128, 512], DType::F32, nl::psum.address(0, 2 * 2048));
        })
        .unwrap();

    let e = Launch::new(1)
        .run(|| {
            let _p = nl::ndarray(
                &[128, 256],
                DType::F32,
                nl::psum.name("acc").address(0, 1024),
            );
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AddressOverlap, "{e}");
    assert!(e.message().contains("bank"), "{e}");

    let e = Launch::new(1)
        .run(|| {
            let _p = nl::ndarray(&[100, 256], DType::F32, nl::sbuf.name("far").address(64, 0));
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfBounds, "{e}");
    assert!(e.message().contains("far"), "{e}");
}

#[test]
fn zeros_and_full_make_on_chip_tensors_only() {
    Launch::new(1)
        .run(|| {
            let z = nl::zeros(&[2, 3], DType::F32, nl::sbuf);
            assert_eq!(z.tile().values(), vec![0.0; 6]);
            let f = nl::full(&[2, 3], 2.5, DType::F32, nl::psum);
            assert_eq!(f.tile().values(), vec![2.5; 6]);
        })
        .unwrap();
    let e = Launch::new(1)
        .run(|| {
            let _ = nl::zeros(&[2, 3], DType::F32, nl::shared_hbm);
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WrongMemory, "{e}");
}

#[test]
fn capacity_errors_name_the_live_tensors() {
    // Two allocated tensors that together exceed SBUF are no error (the compiler resolves
    // them); one instruction that needs more than SBUF at once is, naming its tensors.
    Launch::new(1)
        .target(Target::Trn1)
        .run(|| {
            let _big = nl::ndarray(&[128, 40_000], DType::F32, nl::sbuf.name("big"));
            let _more = nl::ndarray(&[128, 40_000], DType::F32, nl::sbuf);
        })
        .unwrap();
    let e = Launch::new(1)
        .target(Target::Trn1)
        .mode(Mode::Estimate)
        .run(|| {
            let big = nl::zeros(&[128, 20_000], DType::F32, nl::sbuf.name("big"));
            let more = nl::zeros(&[128, 20_000], DType::F32, nl::sbuf);
            let _sum = nl::add(&big, &more);
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Capacity, "{e}");
    assert!(e.message().contains("'big' float32[128, 20000]"), "{e}");
}

#[nki_kernel]
fn ap_of_an_input_slice(a: &Hbm<f32>, out: &mut Hbm<f32>) {
    // The slice is ignored: the pattern reads columns 1, 3, 5, 7 of rows 0 and 1.
    let t = nl::load(a.slice((3, ..)).ap(&[[8, 2], [2, 4]], 1));
    nl::store(out, &t);
}

#[test]
fn ap_of_an_hbm_view_is_absolute_on_the_tensor() {
    let a = Hbm::from_vec(&[4, 8], seq(32)).unwrap();
    let mut out = Hbm::<f32>::zeros([2, 4]);
    ap_of_an_input_slice::launch(1, &a, &mut out).unwrap();
    assert_eq!(
        out.to_f32_vec().unwrap(),
        vec![1., 3., 5., 7., 9., 11., 13., 15.]
    );
}

/// Issue 19's "Done when" errors, with the op, the tensors, their shapes and the user's line
/// each names (a wrong-shape and a wrong-dtype `dst` name the operand role, not the tensor:
/// noted in the issue-19 report): a `dst` of the wrong shape, dtype and memory (dst-first
/// forms), an `.ap`
/// reaching outside its storage (on chip and in HBM), and an overlapping `address`. (The
/// out-of-range gather index is tests/indirect_dma.rs's
/// `an_out_of_range_index_under_oob_error_names_op_tensor_shape_and_line`.)
#[test]
fn issue_19_errors_name_the_op_tensors_shapes_and_line() {
    use nki_core::nisa as isa;
    let check = |e: &NkiError, op: &str, parts: &[&str], line: u32| {
        assert!(e.op().contains(op), "op {op}: {e}");
        for p in parts {
            assert!(e.message().contains(p), "missing {p:?}: {e}");
        }
        let loc = e.location().expect("a location");
        assert_eq!((loc.file, loc.line), (FILE, line), "{e}");
        assert_eq!(e.program_id(), Some(&[0][..]), "{e}");
    };
    let line = Line::default();
    let run = |f: &(dyn Fn() + Sync)| Launch::new(1).run(f).unwrap_err();
    // A dst of the wrong shape.
    let e = run(&|| {
        let a = nl::zeros(&[4, 8], DType::F32, nl::sbuf.name("lhs"));
        let b = nl::zeros(&[4, 8], DType::F32, nl::sbuf.name("rhs"));
        let d = nl::ndarray(&[4, 6], DType::F32, nl::sbuf.name("out"));
        line.set(line!() + 1);
        isa::tensor_tensor(&d, &a, &b, isa::AluOp::Add, None);
    });
    check(
        &e,
        "tensor_tensor",
        &["dst[4, 6]", "[4, 8]", "'out'"],
        line.get(),
    );
    // A dst of the wrong dtype: nc_matmul writes fp32 PSUM on trn2.
    let e = run(&|| {
        let w = nl::zeros(&[8, 4], DType::BF16, nl::sbuf.name("w"));
        let x = nl::zeros(&[8, 16], DType::BF16, nl::sbuf.name("x"));
        let acc = nl::ndarray(&[4, 16], DType::BF16, nl::psum.name("acc"));
        line.set(line!() + 1);
        isa::nc_matmul(&acc, &w, &x, None);
    });
    check(
        &e,
        "nc_matmul",
        &["dst", "bfloat16", "float32", "'acc'", "[4, 16]"],
        line.get(),
    );
    // A dst in the wrong memory: nc_matmul writes PSUM.
    let e = run(&|| {
        let w = nl::zeros(&[8, 4], DType::BF16, nl::sbuf.name("w"));
        let x = nl::zeros(&[8, 16], DType::BF16, nl::sbuf.name("x"));
        let acc = nl::ndarray(&[4, 16], DType::F32, nl::sbuf.name("acc_sb"));
        line.set(line!() + 1);
        isa::nc_matmul(&acc, &w, &x, None);
    });
    assert_eq!(e.kind(), ErrorKind::WrongMemory, "{e}");
    check(&e, "nc_matmul", &["acc_sb", "[4, 16]", "sbuf"], line.get());
    // An .ap reaching outside its storage, on chip and in HBM.
    let e = run(&|| {
        let t = nl::ndarray(&[4, 8], DType::F32, nl::sbuf.name("tile_t"));
        line.set(line!() + 1);
        let _ = t.ap(&[[8, 5], [1, 8]], 0);
    });
    check(
        &e,
        "ap",
        &["tile_t", "[4, 8]", "[[8, 5], [1, 8]]"],
        line.get(),
    );
    let e = run(&|| {
        let h = nl::ndarray(&[4, 8], DType::F32, nl::private_hbm.name("scratch"));
        line.set(line!() + 1);
        let _ = h.ap(&[[8, 4], [1, 8]], 1);
    });
    check(
        &e,
        "ap",
        &["scratch", "[4, 8]", "[[8, 4], [1, 8]]"],
        line.get(),
    );
    // An address overlapping a live tensor.
    let e = run(&|| {
        let _b = nl::ndarray(&[64, 256], DType::F32, nl::sbuf.name("b").address(0, 2048));
        line.set(line!() + 1);
        let _d = nl::ndarray(
            &[32, 128],
            DType::BF16,
            nl::sbuf.name("d").address(32, 2560),
        );
    });
    assert_eq!(e.kind(), ErrorKind::AddressOverlap, "{e}");
    check(
        &e,
        "ndarray",
        &["'d'", "'b'", "[32, 128]", "[64, 256]"],
        line.get(),
    );
}
