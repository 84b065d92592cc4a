//! The DMA family's options and rules: `dma_copy` with `DmaOpts`, `dma_compute` (scatter-add
//! into HBM, gather-add into SBUF).

use super::trace::{run, run_on};
use super::*;
use crate::context::Mode;
use crate::dtype::DType;
use crate::hbm::Hbm;
use crate::lang;
use crate::record::{MemKind, Opcode};
use crate::target::Target;

#[test]
fn dma_compute_scatter_add_into_hbm_and_gather_add_into_sbuf() {
    let mut c = Hbm::<f32>::from_vec(&[2, 4], (0..8).map(|i| i as f32).collect()).unwrap();
    let x = Hbm::<f32>::from_vec(&[2, 4], vec![0.5; 8]).unwrap();
    let out = c.as_output();
    let got = std::cell::RefCell::new(Vec::new());
    let recs = run(Mode::Simulate, || {
        let t = lang::full(&[2, 4], 10.0, DType::BF16, MemKind::Sbuf);
        // Scatter-add: out = out + t (read-modify-write of HBM).
        dma_compute(
            out.view(),
            &[DmaEndpoint::of(out.view()), DmaEndpoint::of(&t)],
            AluOp::Add,
            None,
        );
        // Gather-add: acc = acc + x (into SBUF), three sources.
        let acc = lang::full(&[2, 4], 1.0, DType::F32, MemKind::Sbuf);
        let srcs = [
            DmaEndpoint::of(&acc),
            DmaEndpoint::of(x.view()),
            DmaEndpoint::of(x.view()),
        ];
        dma_compute(&acc, &srcs, AluOp::Add, None);
        *got.borrow_mut() = acc.values();
    })
    .expect("runs");
    assert_eq!(
        c.to_vec().unwrap(),
        (0..8).map(|i| i as f32 + 10.0).collect::<Vec<_>>()
    );
    assert_eq!(got.into_inner(), vec![2.0; 8]);
    let r = recs
        .iter()
        .find(|r| r.api == "nisa.dma_compute")
        .expect("recorded");
    assert_eq!((r.engine, r.opcode), (Engine::Dma, Opcode::DmaCopy));
    assert_eq!(
        (r.reads.len(), r.writes.len(), r.alu),
        (2, 1, Some(AluOp::Add))
    );
    assert_eq!(
        r.reads[0], r.writes[0],
        "a read-modify-write reads what it writes"
    );
}

#[test]
fn dma_rules_are_clear_errors() {
    let err = |f: &dyn Fn()| {
        run_on(Target::Trn2, Mode::Simulate, f)
            .expect_err("fails")
            .to_string()
    };
    let x = Hbm::<f32>::from_vec(&[2, 4], vec![0.5; 8]).unwrap();
    // hwdge cannot cast.
    let e = err(&|| {
        let t = lang::ndarray(&[2, 4], DType::BF16, MemKind::Sbuf);
        dma_copy(&t, x.view(), DmaOpts::new().dge_mode(DgeMode::Hwdge));
    });
    assert!(e.contains("hwdge") && e.contains("dma_copy"), "{e}");
    // hwdge is triggered by Sync or Scalar only.
    let e = err(&|| {
        let t = lang::ndarray(&[2, 4], DType::F32, MemKind::Sbuf);
        dma_copy(
            &t,
            x.view(),
            DmaOpts::new()
                .dge_mode(DgeMode::Hwdge)
                .engine(Engine::Vector),
        );
    });
    assert!(
        e.contains("Sync") || e.contains("sync") || e.contains("supported engines"),
        "{e}"
    );
    // QoS classes are 0..=3.
    let e = err(&|| {
        let t = lang::ndarray(&[2, 4], DType::F32, MemKind::Sbuf);
        dma_copy(&t, x.view(), DmaOpts::new().priority(4));
    });
    assert!(e.contains("priority 4"), "{e}");
    // No PSUM source; element counts must match.
    let e = err(&|| {
        let p = lang::zeros(&[2, 4], DType::F32, MemKind::Psum);
        let t = lang::ndarray(&[2, 4], DType::F32, MemKind::Sbuf);
        dma_copy(&t, &p, None);
    });
    assert!(e.contains("psum"), "{e}");
    let e = err(&|| {
        let t = lang::ndarray(&[2, 2], DType::F32, MemKind::Sbuf);
        dma_copy(&t, x.view(), None);
    });
    assert!(e.contains("different numbers of elements"), "{e}");
    let e = err(&|| {
        let t = lang::ndarray(&[2, 4], DType::F32, MemKind::Sbuf);
        dma_compute(&t, &[DmaEndpoint::of(x.view())], AluOp::Maximum, None);
    });
    assert!(e.contains("reduce_op"), "{e}");
    // Legal options pass; the transfer's record is the defaults' (hwdge adds its
    // descriptor generation before it).
    let rec = |o: DmaOpts| {
        run_on(Target::Trn2, Mode::Estimate, || {
            let t = lang::ndarray(&[2, 4], DType::F32, MemKind::Sbuf);
            dma_copy(&t, x.view(), o);
        })
        .expect("runs")
    };
    let a = rec(DmaOpts::new());
    let b = rec(DmaOpts::new()
        .dge_mode(DgeMode::Hwdge)
        .engine(Engine::Scalar));
    let t = b.last().expect("the transfer");
    assert_eq!((a[0].engine, a[0].dma, b.len()), (t.engine, t.dma, 2));
    // A QoS priority is NeuronCore-v4's (trn3), with DGE on: legal there, an error on trn2
    // and with dge_mode=none.
    let opts = DmaOpts::new()
        .dge_mode(DgeMode::Hwdge)
        .engine(Engine::Scalar)
        .priority(2);
    let c = run_on(Target::Trn3, Mode::Estimate, || {
        let t = lang::ndarray(&[2, 4], DType::F32, MemKind::Sbuf);
        dma_copy(&t, x.view(), opts);
    })
    .expect("runs");
    assert_eq!(
        (c.len(), c[1].dma.map(|d| d.bytes)),
        (2, a[0].dma.map(|d| d.bytes))
    );
    let e = err(&|| {
        let t = lang::ndarray(&[2, 4], DType::F32, MemKind::Sbuf);
        dma_copy(&t, x.view(), opts);
    });
    assert!(e.contains("priority 2") && e.contains("trn3"), "{e}");
    let e = run_on(Target::Trn3, Mode::Simulate, || {
        let t = lang::ndarray(&[2, 4], DType::F32, MemKind::Sbuf);
        dma_copy(
            &t,
            x.view(),
            DmaOpts::new().dge_mode(DgeMode::None).priority(1),
        );
    })
    .expect_err("fails")
    .to_string();
    assert!(e.contains("dge_mode=none"), "{e}");
    // The engine option picks hardware DGE's trigger: not with another dge_mode.
    let e = err(&|| {
        let t = lang::ndarray(&[2, 4], DType::F32, MemKind::Sbuf);
        dma_copy(&t, x.view(), DmaOpts::new().engine(Engine::Sync));
    });
    assert!(e.contains("only with dge_mode=hwdge"), "{e}");
}

#[test]
fn dge_modes_cost_descriptor_generation_on_their_engine() {
    let x = Hbm::<f32>::from_vec(&[128, 64], vec![0.5; 128 * 64]).unwrap();
    let recs = |o: DmaOpts| {
        run_on(Target::Trn2, Mode::Estimate, || {
            let t = lang::ndarray(&[128, 64], DType::F32, MemKind::Sbuf);
            dma_copy(&t, x.view(), o);
        })
        .expect("runs")
    };
    let spec = Target::Trn2.spec();
    // Default / none: the transfer only, as before.
    assert_eq!(recs(DmaOpts::new()).len(), 1);
    assert_eq!(recs(DmaOpts::new().dge_mode(DgeMode::None)).len(), 1);
    // Hardware DGE: ~600 ns on the triggering engine, then the transfer, which waits for it.
    for (engine, want) in [(None, Engine::Sync), (Some(Engine::Scalar), Engine::Scalar)] {
        let mut o = DmaOpts::new().dge_mode(DgeMode::Hwdge);
        if let Some(e) = engine {
            o = o.engine(e);
        }
        let r = recs(o);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].engine, r[0].opcode), (want, Opcode::DmaDescriptors));
        let ns = crate::timing::cost::compute_ns(spec, &r[0]);
        assert!((ns - spec.hwdge_ns).abs() < 1.0, "{ns}");
        assert_eq!(
            r[0].writes[0], r[1].writes[0],
            "the transfer waits for its descriptors"
        );
    }
    // Software DGE: GpSimdE, start-up plus one cycle per descriptor (one row per partition).
    let r = recs(DmaOpts::new().dge_mode(DgeMode::Swdge));
    assert_eq!((r[0].engine, r[0].free), (Engine::GpSimd, 1));
    let strided = run_on(Target::Trn2, Mode::Estimate, || {
        let t = lang::ndarray(&[128, 32], DType::F32, MemKind::Sbuf);
        let o = DmaOpts::new().dge_mode(DgeMode::Swdge);
        dma_copy(&t, x.slice((.., crate::access::stepped(0..64, 2))), o);
    })
    .expect("runs");
    assert!(
        strided[0].free > 1,
        "a strided source needs a descriptor per element run"
    );
    // hwdge does not exist on trn1.
    let e = run_on(Target::Trn1, Mode::Estimate, || {
        let t = lang::ndarray(&[128, 64], DType::F32, MemKind::Sbuf);
        dma_copy(&t, x.view(), DmaOpts::new().dge_mode(DgeMode::Hwdge));
    })
    .expect_err("trn1 has no hwdge")
    .to_string();
    assert!(e.contains("trn2+"), "{e}");
}

#[test]
fn dma_transpose_permutes_2_3_and_4_d_and_checks_its_rules() {
    let x = Hbm::<half::bf16>::from_vec(
        &[2, 3, 4],
        (0..24).map(|i| half::bf16::from_f32(i as f32)).collect(),
    )
    .unwrap();
    let got = std::cell::RefCell::new(Vec::new());
    let recs = run(Mode::Simulate, || {
        // [2, 3, 4] -> [4, 3, 2] (axes 2, 1, 0: 0.7's 3-D permutation).
        let t = lang::ndarray(&[4, 3, 2], DType::BF16, MemKind::Sbuf);
        dma_transpose(&t, x.view(), &[2, 1, 0], None);
        *got.borrow_mut() = t.values();
        // A 2-D view, and a 4-D permutation.
        let t2 = lang::ndarray(&[4, 6], DType::BF16, MemKind::Sbuf);
        dma_transpose(&t2, x.view().reshape(&[6, 4]), &[1, 0], None);
        let t4 = lang::ndarray(&[4, 1, 3, 2], DType::BF16, MemKind::Sbuf);
        dma_transpose(&t4, x.view().reshape(&[2, 1, 3, 4]), &[3, 1, 2, 0], None);
    })
    .expect("runs");
    let want: Vec<f32> = (0..4)
        .flat_map(|k| (0..3).flat_map(move |j| (0..2).map(move |i| (i * 12 + j * 4 + k) as f32)))
        .collect();
    assert_eq!(got.into_inner(), want);
    let r = recs
        .iter()
        .find(|r| r.api == "nisa.dma_transpose")
        .expect("recorded");
    assert_eq!((r.engine, r.opcode), (Engine::Dma, Opcode::DmaTranspose));
    assert_eq!(r.dma.expect("dims").chunk_bytes, 2);
    let err = |f: &dyn Fn()| run(Mode::Simulate, f).expect_err("fails").to_string();
    // A 4-byte dtype transposes with the default dge_mode: the `nki.isa.dma_transpose` page
    // limits only the hardware-DGE and the indirect transpose to 2-byte dtypes.
    let y = Hbm::<f32>::from_vec(&[2, 4], (0..8).map(|i| i as f32).collect()).unwrap();
    let wide = std::cell::RefCell::new(Vec::new());
    run(Mode::Simulate, || {
        let t = lang::ndarray(&[4, 2], DType::F32, MemKind::Sbuf);
        dma_transpose(&t, y.view(), &[1, 0], None);
        *wide.borrow_mut() = t.values();
    })
    .expect("a 4-byte transpose with the default dge_mode runs");
    assert_eq!(wide.into_inner(), vec![0., 4., 1., 5., 2., 6., 3., 7.]);
    let e = err(&|| {
        let t = lang::ndarray(&[4, 2], DType::F32, MemKind::Sbuf);
        dma_transpose(
            &t,
            y.view(),
            &[1, 0],
            DmaOpts::new().dge_mode(DgeMode::Hwdge),
        );
    });
    assert!(e.contains("2-byte") && e.contains("hardware-DGE"), "{e}");
    let e = err(&|| {
        let t = lang::ndarray(&[3, 2, 4], DType::BF16, MemKind::Sbuf);
        dma_transpose(&t, x.view(), &[2, 1, 0], None);
    });
    assert!(e.contains("transposed shape [4, 3, 2]"), "{e}");
    let e = err(&|| {
        let t = lang::ndarray(&[4, 2, 3], DType::BF16, MemKind::Sbuf);
        dma_transpose(&t, x.view(), &[2, 0, 0], None);
    });
    assert!(e.contains("permutation"), "{e}");
    // 0.7 takes one permutation per rank: (2, 0, 1) is not among them.
    let e = err(&|| {
        let t = lang::ndarray(&[4, 2, 3], DType::BF16, MemKind::Sbuf);
        dma_transpose(&t, x.view(), &[2, 0, 1], None);
    });
    assert!(
        e.contains("(2, 1, 0)") && e.contains("not supported"),
        "{e}"
    );
}
