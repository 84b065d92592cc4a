//! The records `nisa` instructions leave: one per call, with the right engine, opcode, sizes,
//! dtypes, PSUM flag and regions; and estimate mode (records without values).

use super::classic::*;
use super::trace::{run, run_on};
use crate::context::Mode;
use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::hbm::Hbm;
use crate::lang;
use crate::record::{BufId, Instr, MemKind, Opcode};
use crate::target::Target;
use crate::tile::Tile;

/// Runs `f`, which must issue exactly one instruction after `setup` instructions; returns it.
fn one(mode: Mode, setup: usize, f: impl FnOnce()) -> Instr {
    let recs = run(mode, f).expect("kernel runs");
    assert_eq!(recs.len(), setup + 1, "{recs:#?}");
    recs.into_iter().last().unwrap()
}

fn zeros(dims: &[usize], dtype: DType, mem: MemKind) -> Tile {
    lang::zeros(dims, dtype, mem)
}

#[test]
fn vector_and_scalar_records() {
    for mode in [Mode::Simulate, Mode::Estimate] {
        let r = one(mode, 2, || {
            let a = zeros(&[128, 512], DType::BF16, MemKind::Sbuf);
            let b = zeros(&[128, 512], DType::F32, MemKind::Psum);
            tensor_tensor(&a, &b, AluOp::Add, None);
        });
        assert_eq!((r.engine, r.opcode), (Engine::Vector, Opcode::TensorTensor));
        assert_eq!((r.partitions, r.free, r.inputs), (128, 512, 2));
        assert_eq!((r.in_dtype, r.out_dtype), (DType::BF16, DType::F32));
        assert!(r.psum && r.contiguous);
        assert_eq!((r.reads.len(), r.writes.len()), (2, 1));

        let r = one(mode, 1, || {
            let a = zeros(&[128, 64], DType::I32, MemKind::Sbuf);
            tensor_tensor(&a, &a, AluOp::Multiply, None);
        });
        assert_eq!(r.engine, Engine::GpSimd);

        let r = one(mode, 2, || {
            let a = zeros(&[64, 1024], DType::F32, MemKind::Sbuf);
            let v = zeros(&[64, 1], DType::F32, MemKind::Sbuf);
            let args = TensorScalarOpts::new()
                .then(AluOp::Add, 2.5)
                .engine(Engine::Scalar);
            tensor_scalar(&a, AluOp::Multiply, &v, args);
        });
        assert_eq!((r.engine, r.opcode), (Engine::Scalar, Opcode::TensorScalar));
        assert_eq!((r.partitions, r.free, r.inputs), (64, 1024, 1));
        assert_eq!(r.reads.len(), 2, "the [P, 1] operand is read");

        let r = one(mode, 3, || {
            let a = zeros(&[128, 512], DType::F32, MemKind::Psum);
            let b = zeros(&[128, 1], DType::F32, MemKind::Sbuf);
            let s = zeros(&[128, 1], DType::F32, MemKind::Sbuf);
            activation_reduce(
                ActFn::Exp,
                &a,
                ActivationOpts::new().bias(&b).scale(&s).dtype(DType::BF16),
            );
        });
        assert_eq!((r.engine, r.opcode), (Engine::Scalar, Opcode::Activation));
        assert_eq!(r.api, "nisa.activation_reduce");
        assert_eq!((r.partitions, r.free, r.inputs), (128, 512, 1));
        assert_eq!((r.in_dtype, r.out_dtype), (DType::F32, DType::BF16));
        assert!(r.psum && r.accumulate);
        assert_eq!((r.reads.len(), r.writes.len()), (3, 2));

        let r = one(mode, 1, || {
            let a = zeros(&[128, 8, 64], DType::F32, MemKind::Sbuf);
            tensor_reduce(AluOp::Maximum, &a, &[1, 2], false, false, None);
        });
        assert_eq!((r.engine, r.opcode), (Engine::Vector, Opcode::TensorReduce));
        assert_eq!((r.free, r.writes[0].hi - r.writes[0].lo), (512, 4));

        let r = one(mode, 2, || {
            let a = zeros(&[128, 1024], DType::F32, MemKind::Sbuf);
            let b = zeros(&[128, 1024], DType::F32, MemKind::Sbuf);
            tensor_tensor_scan(
                &a,
                &b,
                0.0,
                AluOp::Multiply,
                AluOp::Add,
                ScanOpts::default(),
            );
        });
        assert_eq!(
            (r.engine, r.opcode, r.inputs),
            (Engine::Vector, Opcode::TensorTensorScan, 2)
        );

        let r = one(mode, 1, || {
            let a = zeros(&[128, 512], DType::F32, MemKind::Sbuf);
            bn_stats(&a, None);
        });
        assert_eq!((r.opcode, r.free), (Opcode::BnStats, 512));
        let r = one(mode, 1, || {
            let a = zeros(&[128, 12], DType::F32, MemKind::Sbuf);
            bn_aggr(&a, None);
        });
        assert_eq!((r.opcode, r.free), (Opcode::BnAggr, 12));
        let r = one(mode, 1, || {
            let a = zeros(&[128, 512], DType::F32, MemKind::Sbuf);
            reciprocal(&a, None);
        });
        assert_eq!((r.engine, r.opcode), (Engine::Vector, Opcode::Reciprocal));
        let r = one(mode, 1, || {
            let a = zeros(&[8, 8], DType::F32, MemKind::Psum);
            tensor_copy(&a, Some(DType::BF16), Engine::Scalar);
        });
        assert_eq!((r.engine, r.opcode), (Engine::Scalar, Opcode::TensorCopy));
        assert!(r.psum);
        let r = one(mode, 0, || {
            memset(&[128, 128], 0.2, DType::BF16, Engine::GpSimd);
        });
        assert_eq!(
            (r.engine, r.opcode, r.inputs),
            (Engine::GpSimd, Opcode::Memset, 0)
        );
        assert_eq!((r.partitions, r.free, r.reads.len()), (128, 128, 0));
    }
}

#[test]
fn gpsimd_tensor_and_dma_records() {
    for mode in [Mode::Simulate, Mode::Estimate] {
        let r = one(mode, 0, || {
            iota(&AffineExpr::new(128, 1).free(1, 512), DType::I32);
        });
        assert_eq!((r.engine, r.opcode), (Engine::GpSimd, Opcode::Iota));
        assert_eq!((r.partitions, r.free, r.out_dtype), (128, 512, DType::I32));
        let r = one(mode, 1, || {
            let a = zeros(&[128, 128], DType::F32, MemKind::Sbuf);
            affine_select(
                &AffineExpr::new(128, 1).free(-1, 128),
                AluOp::GreaterEqual,
                &a,
                -1e4,
                None,
            );
        });
        assert_eq!((r.engine, r.opcode), (Engine::GpSimd, Opcode::AffineSelect));
        let r = one(mode, 1, || {
            let a = zeros(&[128, 32, 4], DType::F32, MemKind::Sbuf);
            tensor_partition_reduce(AluOp::Add, &a, None);
        });
        assert_eq!(
            (r.engine, r.opcode),
            (Engine::GpSimd, Opcode::PartitionReduce)
        );
        assert_eq!((r.partitions, r.free, r.writes[0].p1), (128, 128, 1));

        let r = one(mode, 1, || {
            let a = zeros(&[128, 64], DType::BF16, MemKind::Sbuf);
            nc_transpose(&a, Engine::Tensor);
        });
        assert_eq!((r.engine, r.opcode), (Engine::Tensor, Opcode::Transpose));
        let r = one(mode, 1, || {
            let a = zeros(&[32, 2], DType::BF16, MemKind::Psum);
            nc_transpose(&a, Engine::Vector);
        });
        assert_eq!(
            (r.engine, r.opcode),
            (Engine::Vector, Opcode::VectorTranspose)
        );
        assert_eq!((r.partitions, r.free, r.out_dtype), (32, 2, DType::BF16));
        assert!(r.psum);

        // DMA: HBM -> SBUF slice; SBUF -> SBUF; HBM -> HBM (output of the same tensor).
        let a = if mode == Mode::Estimate {
            Hbm::<f32>::shape_only([256, 256])
        } else {
            Hbm::<f32>::zeros([256, 256])
        };
        let r = one(mode, 0, || {
            let t = lang::ndarray(&[128, 128], DType::BF16, MemKind::Sbuf);
            dma_copy(t.slice((64..128, ..)), a.slice((0..64, 128..256)));
        });
        assert_eq!((r.engine, r.opcode), (Engine::Dma, Opcode::DmaCopy));
        let d = r.dma.unwrap();
        assert_eq!((d.src, d.dst), (MemKind::Hbm, MemKind::Sbuf));
        assert_eq!(
            (d.bytes, d.partitions, d.start_partition),
            (64 * 128 * 4, 64, 64)
        );
        assert_eq!((r.in_dtype, r.out_dtype), (DType::F32, DType::BF16));
        assert!(matches!(r.reads[0].buf, BufId::Hbm(_)));
        assert_eq!((r.writes[0].p0, r.writes[0].p1), (64, 128));

        let r = one(mode, 1, || {
            let t = zeros(&[128, 64], DType::BF16, MemKind::Sbuf);
            let u = lang::ndarray(&[128, 64], DType::F32, MemKind::Sbuf);
            dma_copy(&u, &t);
        });
        let d = r.dma.unwrap();
        assert_eq!(
            (d.src, d.dst, d.bytes),
            (MemKind::Sbuf, MemKind::Sbuf, 128 * 64 * 2)
        );
        assert_eq!((d.chunk_bytes, d.partitions), (64 * 2, 128));
    }
}

#[test]
fn estimate_mode_touches_no_values() {
    // Shape-only inputs: any value access would fail with NoData.
    let a = Hbm::<f32>::shape_only([128, 512]);
    let recs = run(Mode::Estimate, || {
        let t = lang::ndarray(&[128, 512], DType::F32, MemKind::Sbuf);
        dma_copy(&t, &a);
        let b = lang::ndarray(&[128, 1], DType::F32, MemKind::Sbuf);
        dma_copy(&b, a.slice((.., 0..1)));
        let y = activation(ActFn::Exp, &t, ActivationOpts::new().bias(&b));
        let z = tensor_tensor(&y, &t, AluOp::Multiply, None);
        let s = tensor_scalar(&z, AluOp::Add, &b, TensorScalarOpts::new());
        let r = tensor_reduce(AluOp::Add, &s, &[1], true, false, None);
        let st = bn_stats(&s, None);
        bn_aggr(&st, None);
        tensor_partition_reduce(AluOp::Maximum, &r, None);
        tensor_tensor_scan(&s, &z, &b, AluOp::Multiply, AluOp::Add, ScanOpts::default());
        reciprocal(&s, None);
        tensor_copy(&s, Some(DType::BF16), Engine::GpSimd);
        iota(&AffineExpr::new(128, 1).free(1, 512), DType::F32);
        affine_select(
            &AffineExpr::new(128, 1).free(-1, 512),
            AluOp::Less,
            &s,
            0.0,
            None,
        );
        nc_transpose(s.slice((.., 0..128)), Engine::Tensor);
        assert!(s.values().is_empty());
    })
    .unwrap();
    assert_eq!(recs.len(), 15);
}

#[test]
fn errors_carry_the_caller_location() {
    let e = run(Mode::Execute, || {
        let a = zeros(&[128, 64], DType::F32, MemKind::Sbuf);
        let b = zeros(&[64, 64], DType::F32, MemKind::Sbuf);
        tensor_tensor(&a, &b, AluOp::Add, None);
    })
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PartitionMismatch);
    assert_eq!(e.op(), "nisa.tensor_tensor");
    let l = e.location().unwrap();
    assert!(l.file.ends_with("isa/tests.rs"), "{l}");
    assert_eq!(l.line, line!() - 7);
    // The partition-start rule applies to nisa operands too.
    let e = run(Mode::Execute, || {
        let a = zeros(&[128, 64], DType::F32, MemKind::Sbuf);
        tensor_copy(a.slice((16..80, ..)), None, Engine::Vector);
    })
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PartitionOffset, "{e}");
    // bias on reciprocal is rejected on trn1 only: default target (trn2) accepts it.
    run(Mode::Execute, || {
        let a = lang::full(&[4, 4], 2.0, DType::F32, MemKind::Sbuf);
        let b = lang::full(&[4, 1], 0.5, DType::F32, MemKind::Sbuf);
        let y = activation(ActFn::Reciprocal, &a, ActivationOpts::new().bias(&b));
        assert_eq!(y.values(), vec![0.4; 16]);
    })
    .unwrap();
}

#[test]
fn trn1_restrictions() {
    let scalar_ts = || {
        let a = lang::full(&[4, 4], 2.0, DType::F32, MemKind::Sbuf);
        let args = TensorScalarOpts::new().engine(Engine::Scalar);
        tensor_scalar(&a, AluOp::Multiply, 3.0, args);
    };
    let e = run_on(Target::Trn1, Mode::Execute, scalar_ts).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    run_on(Target::Trn2, Mode::Execute, scalar_ts).unwrap();
    let recip_bias = || {
        let a = lang::full(&[4, 4], 2.0, DType::F32, MemKind::Sbuf);
        let b = lang::full(&[4, 1], 0.5, DType::F32, MemKind::Sbuf);
        activation(ActFn::Reciprocal, &a, ActivationOpts::new().bias(&b));
    };
    let e = run_on(Target::Trn1, Mode::Execute, recip_bias).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    run_on(Target::Trn3, Mode::Execute, recip_bias).unwrap();
}

/// `full(dims, v)` as an f32 SBUF tile.
fn filled(dims: &[usize], v: f32) -> Tile {
    lang::full(dims, v, DType::F32, MemKind::Sbuf)
}

/// Row-major values of a `[4, 16]` tile whose columns `8..16` hold `v` and the rest 0.
fn right_half(v: f32) -> Vec<f32> {
    (0..64).map(|i| if i % 16 >= 8 { v } else { 0.0 }).collect()
}

#[test]
fn destination_forms_write_part_of_a_tile_with_one_instruction() {
    // Each case: setup tiles (dst first, one memset each), one `_into` call into dst's right
    // half, then dst's values.
    type Case = (&'static str, fn() -> Vec<f32>, Vec<f32>);
    let cases: Vec<Case> = vec![
        (
            "tensor_tensor",
            || {
                let (dst, a, b) = (
                    filled(&[4, 16], 0.0),
                    filled(&[4, 8], 2.0),
                    filled(&[4, 8], 3.0),
                );
                tensor_tensor_into(dst.slice((0..4, 8..16)), &a, &b, AluOp::Add);
                dst.values()
            },
            right_half(5.0),
        ),
        (
            "tensor_scalar",
            || {
                let (dst, a) = (filled(&[4, 16], 0.0), filled(&[4, 8], 2.0));
                let args = TensorScalarOpts::new().reverse0();
                tensor_scalar_into(dst.slice((0..4, 8..16)), &a, AluOp::Subtract, 1.0, args);
                dst.values()
            },
            right_half(-1.0),
        ),
        (
            "activation",
            || {
                let (dst, a) = (filled(&[4, 16], 0.0), filled(&[4, 8], -2.0));
                let args = ActivationOpts::new().scale(-1.5);
                activation_into(dst.slice((0..4, 8..16)), ActFn::Relu, &a, args);
                dst.values()
            },
            right_half(3.0),
        ),
        (
            "tensor_copy",
            || {
                let (dst, a) = (filled(&[4, 16], 0.0), filled(&[4, 8], 7.0));
                tensor_copy_into(dst.slice((0..4, 8..16)), &a, Engine::GpSimd);
                dst.values()
            },
            right_half(7.0),
        ),
        (
            "tensor_reduce",
            || {
                let (dst, a) = (filled(&[4, 2], 0.0), filled(&[4, 8], 1.5));
                tensor_reduce_into(dst.slice((0..4, 1..2)), AluOp::Add, &a, &[1], true, false);
                dst.values()
            },
            [0.0, 12.0].repeat(4),
        ),
        (
            "bn_stats",
            || {
                let (dst, a) = (filled(&[4, 12], 0.0), filled(&[4, 8], 3.0));
                bn_stats_into(dst.slice((0..4, 6..12)), &a);
                dst.values()
            },
            [[0.0; 6].as_slice(), &[4.0, 3.0, 0.0, 4.0, 3.0, 0.0]]
                .concat()
                .repeat(4),
        ),
        (
            "nc_transpose vector",
            || {
                let (dst, a) = (filled(&[8, 8], 0.0), filled(&[4, 8], 2.0));
                nc_transpose_into(dst.slice((0..8, 4..8)), &a, Engine::Vector);
                dst.values()
            },
            [[0.0; 4], [2.0; 4]].concat().repeat(8),
        ),
        (
            "nc_matmul",
            || {
                let dst = lang::zeros(&[4, 16], DType::F32, MemKind::Psum);
                let (s, m) = (filled(&[2, 4], 1.0), filled(&[2, 8], 2.5));
                nc_matmul_into(dst.slice((0..4, 8..16)), &s, &m);
                dst.values()
            },
            right_half(5.0),
        ),
        (
            "nc_transpose tensor",
            || {
                let dst = lang::zeros(&[8, 8], DType::F32, MemKind::Psum);
                let a = filled(&[4, 8], 2.0);
                nc_transpose_into(dst.slice((0..8, 4..8)), &a, Engine::Tensor);
                dst.values()
            },
            [[0.0; 4], [2.0; 4]].concat().repeat(8),
        ),
    ];
    for (name, f, want) in cases {
        let mut got = Vec::new();
        let recs = run(Mode::Simulate, || got = f()).expect(name);
        assert_eq!(got, want, "{name}");
        let last = recs.last().unwrap();
        let dst_id = match recs[0].writes[0].buf {
            BufId::Tile(id) => id,
            BufId::Hbm(_) => unreachable!(),
        };
        assert_eq!(last.writes.len(), 1, "{name}: one write region");
        assert_eq!(last.writes[0].buf, BufId::Tile(dst_id), "{name} writes dst");
        assert!(last.writes[0].lo > 0, "{name}: only part of dst is written");
        // Estimate mode: one record too, and the written destination reads as initialised.
        let n = recs.len();
        let recs = run(Mode::Estimate, || {
            f();
        })
        .expect(name);
        assert_eq!(recs.len(), n, "{name}: same records in estimate mode");
    }
}

#[test]
fn destination_marks_an_unwritten_tile_written_in_estimate_mode() {
    for mode in [Mode::Simulate, Mode::Estimate] {
        run(mode, || {
            let dst = lang::ndarray(&[4, 8], DType::F32, MemKind::Sbuf);
            let a = filled(&[4, 8], 2.0);
            tensor_tensor_into(&dst, &a, &a, AluOp::Multiply);
            let y = tensor_copy(&dst, None, Engine::Vector);
            if mode == Mode::Simulate {
                assert_eq!(y.values(), vec![4.0; 32]);
            }
        })
        .unwrap();
    }
}

#[test]
fn destination_errors() {
    let e = run(Mode::Execute, || {
        let (dst, a) = (filled(&[4, 16], 0.0), filled(&[4, 8], 2.0));
        tensor_tensor_into(dst.slice((0..4, 0..4)), &a, &a, AluOp::Add);
    })
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch, "{e}");
    assert_eq!(e.op(), "nisa.tensor_tensor");
    assert!(e.message().contains("destination dst[4, 4]"), "{e}");
    assert_eq!(e.location().unwrap().line, line!() - 6);
    let e = run(Mode::Execute, || {
        let (dst, a) = (filled(&[2, 6], 0.0), filled(&[4, 8], 2.0));
        bn_stats_into(&dst, &a);
    })
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch, "{e}");
    // GpSimd cannot write PSUM; a matmul needs a PSUM destination of the result's shape.
    let e = run(Mode::Execute, || {
        let dst = lang::zeros(&[4, 8], DType::F32, MemKind::Psum);
        tensor_copy_into(&dst, &filled(&[4, 8], 1.0), Engine::GpSimd);
    })
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WrongMemory, "{e}");
    let e = run(Mode::Execute, || {
        let (dst, s, m) = (
            filled(&[4, 8], 0.0),
            filled(&[2, 4], 1.0),
            filled(&[2, 8], 1.0),
        );
        nc_matmul_into(&dst, &s, &m);
    })
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WrongMemory, "{e}");
    let e = run(Mode::Execute, || {
        let dst = lang::zeros(&[4, 4], DType::F32, MemKind::Psum);
        let (s, m) = (filled(&[2, 4], 1.0), filled(&[2, 8], 1.0));
        nc_matmul_into(&dst, &s, &m);
    })
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch, "{e}");
}

#[test]
fn one_vector_instruction_with_two_tile_inputs_in_every_mode() {
    for mode in [Mode::Simulate, Mode::Estimate] {
        let recs = run(mode, || {
            let x = lang::ones(&[32, 64], DType::BF16, MemKind::Sbuf);
            let s = lang::full(&[32, 1], 2.0, DType::F32, MemKind::Sbuf);
            let r = scalar_tensor_tensor(&x, AluOp::Multiply, &s, AluOp::Add, &x, None);
            // The output counts as written in estimate mode too.
            lang::copy(&r, None);
        })
        .unwrap();
        let r = recs
            .iter()
            .find(|r| r.opcode == Opcode::ScalarTensorTensor)
            .expect("a scalar_tensor_tensor record");
        assert_eq!((r.engine, r.inputs, r.free), (Engine::Vector, 2, 64));
        assert_eq!((r.alu, r.reads.len()), (Some(AluOp::Add), 3));
        assert_eq!(r.out_dtype, DType::BF16);
    }
}
