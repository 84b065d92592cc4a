//! `nc_matmul`'s 0.7 options: FP8 `perf_mode=double_row` (the contraction over the
//! partitions and a first free dimension of 2, at the cycles of a single-row matmul) against a
//! plain-Rust reference, and the PE tiling rules of `tile_position`/`tile_size`.

use nki_core::nisa::{MatmulOpts, MatmulPerfMode};
use nki_core::prelude::*;

mod common;
use common::{fails_with, hbm, run_into, Rng};

#[test]
fn double_row_contracts_over_partitions_and_the_row_pair() {
    let (k, mm, n) = (128, 96, 200);
    let mut rng = Rng(31);
    // Integers in [-2, 2]: exact in fp8 e4m3 and in every sum.
    let s = rng.int_f32s(k * 2 * mm, -2, 2);
    let m = rng.int_f32s(k * 2 * n, -2, 2);
    let (sh, mh) = (hbm(&[k, 2, mm], s.clone()), hbm(&[k, 2, n], m.clone()));
    for acc_twice in [false, true] {
        let got = run_into(Hbm::<f32>::zeros([mm, n]), |o| {
            let st = nl::load_as(&sh, DType::F8E4M3);
            let mv = nl::load_as(&mh, DType::F8E5M2);
            let ps = nl::ndarray(&[mm, n], DType::F32, MemKind::Psum);
            let opts = MatmulOpts::new().perf_mode(MatmulPerfMode::DoubleRow);
            nisa::nc_matmul(&ps, &st, &mv, opts);
            if acc_twice {
                nisa::nc_matmul(&ps, &st, &mv, opts.accumulate(true));
            }
            let sb = nl::ndarray(&[mm, n], DType::F32, MemKind::Sbuf);
            nisa::tensor_copy(&sb, &ps, None);
            nl::store(o, &sb);
        })
        .unwrap();
        let times = if acc_twice { 2.0 } else { 1.0 };
        let mut want = vec![0.0f32; mm * n];
        for i in 0..mm {
            for j in 0..n {
                let mut a = 0.0;
                for p in 0..k {
                    for r in 0..2 {
                        a += s[(p * 2 + r) * mm + i] * m[(p * 2 + r) * n + j];
                    }
                }
                want[i * n + j] = a * times;
            }
        }
        assert_eq!(got, want, "accumulate twice: {acc_twice}");
    }
}

#[test]
fn double_row_costs_one_single_row_matmul() {
    // The same M, N: a double-row fp8 matmul (K = 2 x 128) models the TensorE time of a
    // bf16 K = 128 matmul.
    let busy = |double: bool| {
        let rep = Launch::new(1)
            .mode(Mode::Estimate)
            .run(|| {
                let (st, mv) = if double {
                    (
                        nl::ndarray(&[128, 2, 128], DType::F8E4M3, MemKind::Sbuf),
                        nl::ndarray(&[128, 2, 512], DType::F8E4M3, MemKind::Sbuf),
                    )
                } else {
                    (
                        nl::ndarray(&[128, 128], DType::BF16, MemKind::Sbuf),
                        nl::ndarray(&[128, 512], DType::BF16, MemKind::Sbuf),
                    )
                };
                nisa::memset(&st, 1.0, None);
                nisa::memset(&mv, 1.0, None);
                let ps = nl::ndarray(&[128, 512], DType::F32, MemKind::Psum);
                let mode = if double {
                    MatmulPerfMode::DoubleRow
                } else {
                    MatmulPerfMode::None
                };
                for _ in 0..8 {
                    nisa::nc_matmul(&ps, &st, &mv, MatmulOpts::new().perf_mode(mode));
                }
            })
            .unwrap();
        let p = rep.profile.expect("estimate profile");
        p.engine("TensorE").expect("TensorE ran").active_ns
    };
    let (one, two) = (busy(false), busy(true));
    assert!(one > 0.0 && (one - two).abs() < 1e-6, "{one} vs {two}");
}

#[test]
fn double_row_and_tiling_rules() {
    // double_row needs fp8 [K, 2, F] operands, NeuronCore-v3+, no column tiling.
    let e = fails_with(ErrorKind::DType, || {
        let st = nl::ndarray(&[128, 2, 8], DType::BF16, MemKind::Sbuf);
        let ps = nl::ndarray(&[8, 8], DType::F32, MemKind::Psum);
        nisa::memset(&st, 0.0, None);
        let o = MatmulOpts::new().perf_mode(MatmulPerfMode::DoubleRow);
        nisa::nc_matmul(&ps, &st, &st, o);
    });
    assert!(e.to_string().contains("fp8"), "{e}");
    let e = fails_with(ErrorKind::InvalidArgument, || {
        let st = nl::ndarray(&[64, 2, 8], DType::F8E4M3, MemKind::Sbuf);
        let ps = nl::ndarray(&[8, 8], DType::F32, MemKind::Psum);
        nisa::memset(&st, 0.0, None);
        let o = MatmulOpts::new()
            .perf_mode(MatmulPerfMode::DoubleRow)
            .tile((0, 0), (64, 64));
        nisa::nc_matmul(&ps, &st, &st, o);
    });
    assert!(e.to_string().contains("column tiling"), "{e}");
    // Tiling: the bottom half of the array runs a K = 64 matmul with the same values.
    let a = Rng(37).int_f32s(64 * 32, -3, 3);
    let ah = hbm(&[64, 32], a.clone());
    let got = run_into(Hbm::<f32>::zeros([32, 32]), |o| {
        let st = nl::load_as(&ah, DType::BF16);
        let ps = nl::ndarray(&[32, 32], DType::F32, MemKind::Psum);
        nisa::nc_matmul(&ps, &st, &st, MatmulOpts::new().tile((64, 0), (64, 128)));
        let sb = nl::ndarray(&[32, 32], DType::F32, MemKind::Sbuf);
        nisa::tensor_copy(&sb, &ps, None);
        nl::store(o, &sb);
    })
    .unwrap();
    for i in 0..32 {
        for j in 0..32 {
            let w: f32 = (0..64).map(|p| a[p * 32 + i] * a[p * 32 + j]).sum();
            assert_eq!(got[i * 32 + j], w);
        }
    }
    // K = 128 does not fit 64 rows; start 32 is not a multiple of 64; 32-row tiles are v3+.
    for (pos, size, k, target) in [
        ((0, 0), (64, 128), 128, Target::Trn2),
        ((32, 0), (64, 128), 32, Target::Trn2),
        ((0, 0), (32, 128), 32, Target::Trn1),
    ] {
        let e = Launch::new(1)
            .target(target)
            .run(|| {
                let st = nl::ndarray(&[k, 16], DType::BF16, MemKind::Sbuf);
                let ps = nl::ndarray(&[16, 16], DType::F32, MemKind::Psum);
                nisa::memset(&st, 0.0, None);
                nisa::nc_matmul(&ps, &st, &st, MatmulOpts::new().tile(pos, size));
            })
            .expect_err("an illegal tile");
        assert_eq!(e.kind(), ErrorKind::MatmulLimit, "{e}");
    }
}

#[test]
fn nc_transpose_collapses_several_free_axes() {
    // data[4, 2, 3] is transposed as data[4, 6] (SDK: "implicitly flattens all free axes"),
    // on TensorE (into PSUM) and on VectorE.
    let (p, a, b) = (4, 2, 3);
    let x = Rng(41).int_f32s(p * a * b, -50, 50);
    let xh = hbm(&[p, a, b], x.clone());
    for engine in [nisa::Engine::Tensor, nisa::Engine::Vector] {
        let got = run_into(Hbm::<f32>::zeros([a * b, p]), |o| {
            let t = nl::load(&xh);
            let mem = if engine == nisa::Engine::Tensor {
                MemKind::Psum
            } else {
                MemKind::Sbuf
            };
            let d = nl::ndarray(&[a * b, p], DType::F32, mem);
            nisa::nc_transpose(&d, &t, nisa::Opts::new().engine(engine));
            let sb = nl::ndarray(&[a * b, p], DType::F32, MemKind::Sbuf);
            nisa::tensor_copy(&sb, &d, None);
            nl::store(o, &sb);
        })
        .unwrap();
        for j in 0..a * b {
            for i in 0..p {
                assert_eq!(got[j * p + i], x[i * a * b + j], "{engine:?} [{j}, {i}]");
            }
        }
    }
}
