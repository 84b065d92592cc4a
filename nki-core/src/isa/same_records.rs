//! The two spellings of every instruction are one instruction: a Beta-1 call of
//! [`super::classic`] (a new tile) and the dst-first call into a tile allocated just before it
//! leave the same records (everything but the source line) and the same values.

use super::classic as c;
use super::trace::run;
use super::*;
use crate::context::Mode;
use crate::dtype::DType;
use crate::lang;
use crate::record::{Instr, MemKind};
use crate::tile::Tile;
use std::cell::RefCell;

/// A record stream as JSON without source lines (and API names unless `api`), with tile ids
/// renumbered in order of first appearance (ids are unique per process, not per instance).
fn plain(recs: &[Instr], api: bool) -> Vec<serde_json::Value> {
    let mut ids = std::collections::HashMap::new();
    recs.iter()
        .map(|r| {
            let mut v = serde_json::to_value(r).expect("records serialize");
            let fields = v.as_object_mut().expect("a record is an object");
            fields.remove("loc");
            if !api {
                fields.remove("api");
            }
            for side in ["reads", "writes"] {
                for reg in v[side].as_array_mut().expect("regions").iter_mut() {
                    if let Some(id) = reg["buf"].get_mut("Tile") {
                        let n = ids.len();
                        *id = (*ids.entry(id.as_u64().expect("an id")).or_insert(n)).into();
                    }
                }
            }
            v
        })
        .collect()
}

/// Runs `setup` then the classic call (`old`) and, in a fresh instance, `setup`, a new tile of
/// the classic output's shape, dtype and memory, and the dst-first call (`new`) into it;
/// asserts equal records and equal output values in both modes that record.
fn same(
    what: &str,
    setup: impl Fn() -> Vec<Tile>,
    old: impl Fn(&[Tile]) -> Tile,
    new: impl Fn(&[Tile], &Tile),
) {
    same_as(what, true, setup, old, new)
}

/// [`same`], comparing the records' API names when `api`: without, of an `nl` call (`old`)
/// and the `nisa` call it lowers to (`new`), whose records may differ in their API names only.
fn same_as(
    what: &str,
    api: bool,
    setup: impl Fn() -> Vec<Tile>,
    old: impl Fn(&[Tile]) -> Tile,
    new: impl Fn(&[Tile], &Tile),
) {
    for mode in [Mode::Simulate, Mode::Estimate] {
        let shape = RefCell::new(None);
        let vals = RefCell::new((Vec::new(), Vec::new()));
        let a = run(mode, || {
            let s = setup();
            let t = old(&s);
            *shape.borrow_mut() = Some((t.shape().to_vec(), t.dtype(), t.mem()));
            if mode == Mode::Simulate {
                vals.borrow_mut().0 = t.values();
            }
        })
        .unwrap_or_else(|e| panic!("{what}: classic form fails: {e}"));
        let (dims, dtype, mem) = shape.into_inner().expect("classic ran");
        let b = run(mode, || {
            let s = setup();
            let t = lang::ndarray(&dims, dtype, mem);
            new(&s, &t);
            if mode == Mode::Simulate {
                vals.borrow_mut().1 = t.values();
            }
        })
        .unwrap_or_else(|e| panic!("{what}: dst-first form fails: {e}"));
        assert_eq!(a.len(), b.len(), "{what}: record counts");
        for (x, y) in plain(&a, api).iter().zip(&plain(&b, api)) {
            assert_eq!(x, y, "{what}: records differ");
        }
        let (x, y) = vals.into_inner();
        assert_eq!(
            x.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "{what}: values differ"
        );
    }
}

/// A `[p, f]` SBUF tile of `dtype` holding `scale * (i + p * f / 3)` for element `i`
/// (varied values; one iota and one tensor_scalar record).
fn ramp(p: usize, f: usize, dtype: DType, scale: f32) -> Tile {
    let i = c::iota(&AffineExpr::new(p, f as i32).free(1, f), DType::F32);
    let args = TensorScalarOpts::new()
        .then(AluOp::Subtract, (p * f / 3) as f32)
        .dtype(dtype);
    c::tensor_scalar(&i, AluOp::Multiply, scale, args)
}

/// The sources of an instruction of a data tile and a per-partition vector: fp32 ramps
/// `[128, 64]` and `[128, 1]` with steps `data` and `vector`.
fn data_and_vector(data: f32, vector: f32) -> impl Fn() -> Vec<Tile> {
    move || {
        vec![
            ramp(128, 64, DType::F32, data),
            ramp(128, 1, DType::F32, vector),
        ]
    }
}

#[test]
fn vector_instructions_record_the_same_in_both_spellings() {
    let two = || {
        vec![
            ramp(128, 64, DType::BF16, 0.01),
            ramp(128, 64, DType::F32, -0.02),
        ]
    };
    same(
        "tensor_tensor",
        two,
        |s| c::tensor_tensor(&s[0], &s[1], AluOp::Multiply, None),
        |s, d| tensor_tensor(d, &s[0], &s[1], AluOp::Multiply, None),
    );
    same(
        "tensor_tensor (int32 on GpSimd)",
        || vec![ramp(64, 32, DType::I32, 3.0)],
        |s| c::tensor_tensor(&s[0], &s[0], AluOp::Add, None),
        |s, d| tensor_tensor(d, &s[0], &s[0], AluOp::Add, None),
    );
    let vec_and_data = data_and_vector(0.5, 0.25);
    same(
        "tensor_scalar",
        vec_and_data,
        |s| {
            let args = TensorScalarOpts::new().then(AluOp::Add, 2.5).reverse0();
            c::tensor_scalar(&s[0], AluOp::Subtract, &s[1], args)
        },
        |s, d| {
            let args = TensorScalarOpts::new().then(AluOp::Add, 2.5).reverse0();
            tensor_scalar(d, &s[0], AluOp::Subtract, &s[1], args)
        },
    );
    same(
        "tensor_reduce",
        || vec![ramp(128, 64, DType::F32, 0.5)],
        |s| c::tensor_reduce(AluOp::Maximum, &s[0], &[1], false, true, Some(DType::BF16)),
        |s, d| tensor_reduce(d, AluOp::Maximum, &s[0], &[1], ReduceOpts::new().negate()),
    );
    same(
        "tensor_copy",
        || vec![ramp(128, 64, DType::F32, 0.5)],
        |s| c::tensor_copy(&s[0], Some(DType::BF16), Engine::Scalar),
        |s, d| tensor_copy(d, &s[0], Opts::new().engine(Engine::Scalar)),
    );
    same(
        "tensor_tensor_scan",
        || vec![ramp(32, 16, DType::F32, 0.5), ramp(32, 16, DType::F32, 0.1)],
        |s| {
            c::tensor_tensor_scan(
                &s[0],
                &s[1],
                1.0,
                AluOp::Multiply,
                AluOp::Add,
                ScanOpts::default(),
            )
        },
        |s, d| tensor_tensor_scan(d, &s[0], &s[1], 1.0, AluOp::Multiply, AluOp::Add, None),
    );
    same(
        "reciprocal",
        || vec![ramp(128, 64, DType::F32, 0.5)],
        |s| c::reciprocal(&s[0], None),
        |s, d| reciprocal(d, &s[0], None),
    );
    same(
        "memset",
        Vec::<Tile>::new,
        |_| c::memset(&[128, 64], 1.5, DType::BF16, Engine::GpSimd),
        |_, d| memset(d, 1.5, Opts::new().engine(Engine::GpSimd)),
    );
    same(
        "bn_stats",
        || vec![ramp(128, 512, DType::F32, 0.01)],
        |s| c::bn_stats(&s[0], None),
        |s, d| bn_stats(d, &s[0], None),
    );
    same(
        "bn_aggr",
        || vec![c::bn_stats(&ramp(128, 512, DType::F32, 0.01), None)],
        |s| c::bn_aggr(&s[0], None),
        |s, d| bn_aggr(d, &s[0], None),
    );
    same(
        "scalar_tensor_tensor",
        two,
        |s| c::scalar_tensor_tensor(&s[0], AluOp::Multiply, 0.5, AluOp::Add, &s[1], None),
        |s, d| scalar_tensor_tensor(d, &s[0], AluOp::Multiply, 0.5, AluOp::Add, &s[1], None),
    );
}

#[test]
fn scalar_tensor_and_gpsimd_instructions_record_the_same_in_both_spellings() {
    let data_bias = data_and_vector(0.01, 0.1);
    same(
        "activation",
        data_bias,
        |s| {
            c::activation(
                ActFn::Exp,
                &s[0],
                ActivationOpts::new().bias(&s[1]).scale(0.5),
            )
        },
        |s, d| {
            activation(
                d,
                ActFn::Exp,
                &s[0],
                ActivationOpts::new().bias(&s[1]).scale(0.5),
            )
        },
    );
    same(
        "nc_matmul",
        || {
            vec![
                ramp(128, 64, DType::BF16, 0.01),
                ramp(128, 256, DType::BF16, 0.02),
            ]
        },
        |s| c::nc_matmul(&s[0], &s[1]),
        |s, d| nc_matmul(d, &s[0], &s[1], None),
    );
    same(
        "nc_transpose (TensorE)",
        || vec![ramp(128, 64, DType::BF16, 0.01)],
        |s| c::nc_transpose(&s[0], Engine::Tensor),
        |s, d| nc_transpose(d, &s[0], None),
    );
    same(
        "nc_transpose (VectorE)",
        || vec![ramp(32, 16, DType::F32, 0.01)],
        |s| c::nc_transpose(&s[0], Engine::Vector),
        |s, d| nc_transpose(d, &s[0], Opts::new().engine(Engine::Vector)),
    );
    let expr = AffineExpr::new(128, 1).free(-1, 64).offset(3);
    same(
        "iota",
        Vec::<Tile>::new,
        |_| c::iota(&expr, DType::I32),
        |_, d| iota(d, &expr, None),
    );
    same(
        "affine_select",
        || vec![ramp(128, 64, DType::BF16, 0.01)],
        |s| c::affine_select(&expr, AluOp::GreaterEqual, &s[0], -9984.0, None),
        |s, d| affine_select(d, &expr, AluOp::GreaterEqual, &s[0], -9984.0, None),
    );
    same(
        "tensor_partition_reduce",
        || vec![ramp(128, 64, DType::F32, 0.01)],
        |s| c::tensor_partition_reduce(AluOp::Add, &s[0], None),
        |s, d| tensor_partition_reduce(d, AluOp::Add, &s[0], None),
    );
}

#[test]
fn activation_reduce_and_accumulating_matmuls_record_the_same_in_both_spellings() {
    // activation_reduce: two outputs; the dst-first call takes both.
    let recs = |dst_first: bool| {
        run(Mode::Simulate, || {
            let x = ramp(128, 64, DType::F32, 0.01);
            if dst_first {
                let out = lang::ndarray(&[128, 64], DType::BF16, MemKind::Sbuf);
                let red = lang::ndarray(&[128, 1], DType::F32, MemKind::Sbuf);
                let args = ActivationOpts::new().scale(0.5);
                activation_reduce(&out, ActFn::Exp, &x, AluOp::Add, &red, args);
            } else {
                let args = ActivationOpts::new().scale(0.5).dtype(DType::BF16);
                c::activation_reduce(ActFn::Exp, &x, args);
            }
        })
        .expect("runs")
    };
    let (a, b) = (recs(false), recs(true));
    assert_eq!(plain(&a, true), plain(&b, true));

    // Three matmuls into one accumulator: nc_matmul_acc vs nc_matmul with its defaults.
    let recs = |dst_first: bool| {
        run(Mode::Simulate, || {
            let s = ramp(128, 64, DType::BF16, 0.01);
            let m = ramp(128, 256, DType::BF16, 0.02);
            let acc = lang::ndarray(&[64, 256], DType::F32, MemKind::Psum);
            for _ in 0..3 {
                if dst_first {
                    nc_matmul(&acc, &s, &m, None);
                } else {
                    c::nc_matmul_acc(&acc, &s, &m);
                }
            }
        })
        .expect("runs")
    };
    let (a, b) = (recs(false), recs(true));
    assert_eq!(plain(&a, true), plain(&b, true));
    assert_eq!(a[a.len() - 3].reads.len(), 2, "the first matmul overwrites");
    assert_eq!(
        a[a.len() - 1].reads.len(),
        3,
        "later matmuls read the accumulator"
    );
}

#[test]
fn dst_first_rules() {
    // A dst of the wrong shape, memory or classic dtype is an error naming the op.
    let err = |f: &dyn Fn()| run(Mode::Simulate, f).expect_err("must fail").to_string();
    let e = err(&|| {
        let a = lang::zeros(&[128, 64], DType::F32, MemKind::Sbuf);
        let d = lang::ndarray(&[128, 32], DType::F32, MemKind::Sbuf);
        tensor_tensor(&d, &a, &a, AluOp::Add, None);
    });
    assert!(
        e.contains("tensor_tensor") && e.contains("dst[128, 32]"),
        "{e}"
    );
    let e = err(&|| {
        let a = lang::zeros(&[128, 64], DType::F32, MemKind::Sbuf);
        let d = lang::ndarray(&[128, 64], DType::F32, MemKind::Sbuf);
        nc_matmul(&d, &a, &a, None);
    });
    assert!(e.contains("psum"), "{e}");
    let e = err(&|| {
        let a = lang::zeros(&[128, 64], DType::F32, MemKind::Sbuf);
        let d = lang::ndarray(&[128, 64], DType::F32, MemKind::Sbuf);
        tensor_scalar(
            &d,
            &a,
            AluOp::Add,
            1.0,
            TensorScalarOpts::new().dtype(DType::BF16),
        );
    });
    assert!(e.contains("dtype"), "{e}");
    let e = err(&|| {
        let a = lang::zeros(&[128, 64], DType::F32, MemKind::Sbuf);
        let d = lang::ndarray(&[128, 64], DType::F32, MemKind::Sbuf);
        reciprocal(&d, &a, Opts::new().engine(Engine::GpSimd));
    });
    assert!(e.contains("cannot run on"), "{e}");
    let e = err(&|| {
        let x = lang::zeros(&[128, 64], DType::F32, MemKind::Sbuf);
        let out = lang::ndarray(&[128, 64], DType::F32, MemKind::Sbuf);
        let red = lang::ndarray(&[128, 1], DType::F32, MemKind::Sbuf);
        activation_reduce(&out, ActFn::Exp, &x, AluOp::Maximum, &red, None);
    });
    assert!(e.contains("reduce_op"), "{e}");
    // scalar_tensor_tensor's reverse flags: (2 - x) / y, computed as reversed operands.
    run(Mode::Simulate, || {
        let x = lang::full(&[4, 4], 0.5, DType::F32, MemKind::Sbuf);
        let y = lang::full(&[4, 4], 4.0, DType::F32, MemKind::Sbuf);
        let d = lang::ndarray(&[4, 4], DType::F32, MemKind::Sbuf);
        let o = SttOpts::new().reverse0().reverse1();
        scalar_tensor_tensor(&d, &x, AluOp::Subtract, 2.0, AluOp::Divide, &y, o);
        assert!(
            d.values().iter().all(|&v| v == 4.0 / 1.5),
            "{:?}",
            d.values()
        );
    })
    .expect("runs");
}

#[test]
fn nl_copies_record_the_tensor_copy_they_lower_to() {
    let data = || vec![ramp(128, 64, DType::F32, 0.25)];
    same_as(
        "nl.copy (cast)",
        false,
        data,
        |s| lang::copy(&s[0], Some(DType::BF16)),
        |s, d| tensor_copy(d, &s[0], None),
    );
    same_as(
        "nl.astype",
        false,
        data,
        |s| s[0].astype(DType::I32),
        |s, d| tensor_copy(d, &s[0], None),
    );
    // One element per partition, read with a stride: a unit-stride access all the same.
    same_as(
        "nl.copy (strided column)",
        false,
        data,
        |s| lang::copy(s[0].slice((.., crate::access::stepped(3..64, 61))), None),
        |s, d| tensor_copy(d, s[0].slice((.., crate::access::stepped(3..64, 61))), None),
    );
    // From PSUM: on ScalarE, where the compiler puts a PSUM -> SBUF copy.
    let in_psum = || {
        let t = lang::ndarray(&[128, 64], DType::F32, MemKind::Psum);
        tensor_copy(&t, &ramp(128, 64, DType::F32, 0.5), None);
        vec![t]
    };
    same_as(
        "nl.copy (from PSUM)",
        false,
        in_psum,
        |s| lang::copy(&s[0], None),
        |s, d| tensor_copy(d, &s[0], Opts::new().engine(Engine::Scalar)),
    );
}

#[test]
fn nl_reductions_record_the_tensor_reduce_they_lower_to() {
    let data = || vec![ramp(128, 64, DType::F32, 0.25)];
    same_as(
        "nl.sum",
        false,
        data,
        |s| lang::sum(&s[0], &[1], true),
        |s, d| tensor_reduce(d, AluOp::Add, &s[0], &[1], None),
    );
    same_as(
        "nl.max",
        false,
        data,
        |s| lang::max(&s[0], &[1], false),
        |s, d| tensor_reduce(d, AluOp::Maximum, &s[0], &[1], None),
    );
    // A product of moderate values: exact in f64, rounded once, on both paths.
    same_as(
        "nl.prod",
        false,
        || vec![ramp(128, 8, DType::F32, 0.013)],
        |s| lang::prod(&s[0], &[1], false),
        |s, d| tensor_reduce(d, AluOp::Multiply, &s[0], &[1], None),
    );
    // One element per partition, read with a stride: a unit-stride access all the same.
    fn column(t: &Tile) -> crate::tile::TileRef<'_> {
        t.slice((.., crate::access::stepped(3..64, 61)))
    }
    same_as(
        "nl.min (strided column)",
        false,
        data,
        |s| lang::min(column(&s[0]), &[1], true),
        |s, d| tensor_reduce(d, AluOp::Minimum, column(&s[0]), &[1], None),
    );
    // nl.mean, nl.all and nl.var: the records of tensor_reduce (var: two passes, the second
    // also reading the mean it wrote).
    let records = |f: &dyn Fn(&Tile)| {
        let recs = run(Mode::Estimate, || f(&ramp(128, 64, DType::F32, 0.25))).expect("runs");
        plain(&recs, false)
    };
    let reduce_add = records(&|x| {
        let d = lang::ndarray(&[128, 1], DType::F32, MemKind::Sbuf);
        tensor_reduce(&d, AluOp::Add, x, &[1], None);
    });
    let mean = records(&|x| drop(lang::mean(x, &[1], true)));
    assert_eq!(mean, reduce_add, "nl.mean");
    let var = records(&|x| drop(lang::var(x, &[1])));
    assert_eq!(var.len(), reduce_add.len() + 1, "nl.var: two instructions");
    assert_eq!(var[..reduce_add.len()], reduce_add[..], "nl.var: the mean");
    let last = &var[var.len() - 1];
    assert_eq!(
        last["reads"].as_array().map(Vec::len),
        Some(2),
        "nl.var: x, mean"
    );
    let all = records(&|x| {
        let d = lang::ndarray(&[128, 1], DType::Bool, MemKind::Sbuf);
        tensor_reduce(&d, AluOp::Add, x, &[1], None);
    });
    assert_eq!(records(&|x| drop(lang::all(x, &[1], true))), all, "nl.all");
}

#[test]
fn nl_fills_record_the_memset_they_lower_to() {
    // nl.zeros in PSUM: on GpSimdE, where the compiler puts a PSUM fill.
    same_as(
        "nl.zeros (PSUM)",
        false,
        Vec::new,
        |_| lang::zeros(&[128, 512], DType::F32, MemKind::Psum),
        |_, d| memset(d, 0.0, None),
    );
    same_as(
        "nl.full (bf16)",
        false,
        Vec::new,
        |_| lang::full(&[64, 3, 7], 2.7, DType::BF16, MemKind::Sbuf),
        |_, d| memset(d, 2.7, None),
    );
}

#[test]
fn nl_assign_records_the_tensor_copy_it_lowers_to() {
    // Equal shapes, with a cast.
    same_as(
        "nl.assign (cast)",
        false,
        || vec![ramp(128, 64, DType::F32, 0.25)],
        |s| {
            let d = lang::ndarray(&[128, 64], DType::BF16, MemKind::Sbuf);
            lang::assign(&d, &s[0]);
            d
        },
        |s, d| tensor_copy(d, &s[0], None),
    );
    // A [P, 1] value broadcast along the free dimension: read through a stride-0 view.
    same_as(
        "nl.assign (free broadcast)",
        false,
        || vec![ramp(128, 1, DType::F32, 0.5)],
        |s| {
            let d = lang::ndarray(&[128, 64], DType::F32, MemKind::Sbuf);
            lang::assign(&d, &s[0]);
            d
        },
        |s, d| tensor_copy(d, s[0].broadcast(1, 64), None),
    );
    // A [1, F] value broadcast across partitions: the record reads its one partition.
    same_as(
        "nl.assign (partition broadcast)",
        false,
        || vec![ramp(1, 64, DType::F32, 0.5)],
        |s| {
            let d = lang::ndarray(&[128, 64], DType::F32, MemKind::Sbuf);
            lang::assign(&d, &s[0]);
            d
        },
        |s, d| {
            let v = s[0].view().broadcast_as(&[128, 64]).expect("broadcasts");
            let r = v.region();
            assert_eq!((r.p0, r.p1), (0, 1), "one partition read");
            tensor_copy(d, v, None)
        },
    );
    // From PSUM: on ScalarE, where the compiler puts a PSUM -> SBUF copy.
    let in_psum = || {
        let t = lang::ndarray(&[128, 64], DType::F32, MemKind::Psum);
        tensor_copy(&t, &ramp(128, 64, DType::F32, 0.5), None);
        vec![t]
    };
    same_as(
        "nl.assign (from PSUM)",
        false,
        in_psum,
        |s| {
            let d = lang::ndarray(&[128, 64], DType::F32, MemKind::Sbuf);
            lang::assign(&d, &s[0]);
            d
        },
        |s, d| tensor_copy(d, &s[0], Opts::new().engine(Engine::Scalar)),
    );
}

#[test]
fn an_nl_op_reading_an_unwritten_tile_names_the_nl_op() {
    type Read = fn(&Tile);
    let reads: [(&str, &str, Read); 3] = [
        ("nl.copy", "tensor_copy", |t| drop(lang::copy(t, None))),
        ("nl.reciprocal", "nisa.reciprocal", |t| {
            drop(lang::reciprocal(t))
        }),
        ("nl.abs", "tensor_scalar", |t| drop(lang::abs(t))),
    ];
    for (api, builder, read) in reads {
        let e = run(Mode::Simulate, || {
            read(&lang::ndarray(&[128, 64], DType::F32, MemKind::Sbuf))
        })
        .expect_err("reads an unwritten tile")
        .to_string();
        assert!(e.contains(api) && !e.contains(builder), "{api}: {e}");
    }
}

#[test]
fn nl_unary_functions_record_the_instructions_they_lower_to() {
    let data = || vec![ramp(128, 64, DType::F32, 0.05)];
    same_as(
        "nl.exp",
        false,
        data,
        |s| lang::exp(&s[0]),
        |s, d| activation(d, ActFn::Exp, &s[0], None),
    );
    same_as(
        "nl.gelu (bf16)",
        false,
        || vec![ramp(128, 64, DType::BF16, 0.05)],
        |s| lang::gelu(&s[0]),
        |s, d| activation(d, ActFn::Gelu, &s[0], None),
    );
    // One element per partition, read with a stride: a unit-stride access all the same.
    same_as(
        "nl.sqrt (strided column)",
        false,
        data,
        |s| lang::sqrt(s[0].slice((.., crate::access::stepped(3..64, 61)))),
        |s, d| {
            let col = s[0].slice((.., crate::access::stepped(3..64, 61)));
            activation(d, ActFn::Sqrt, col, None)
        },
    );
    same_as(
        "nl.reciprocal",
        false,
        data,
        |s| lang::reciprocal(&s[0]),
        |s, d| reciprocal(d, &s[0], None),
    );
    // abs and negative: VectorE tensor_scalars, exact on 32-bit integers (2^24 + 1 and its
    // neighbours are not fp32 values).
    let big_ints = || vec![ramp(64, 8, DType::I32, 1.0)];
    let plus = |s: &[Tile]| {
        let d = lang::ndarray(&[64, 8], DType::I32, MemKind::Sbuf);
        let args = TensorScalarOpts::new();
        tensor_scalar(&d, &s[0], AluOp::Add, (1 << 24) + 1, args);
        d
    };
    let on_vector = || TensorScalarOpts::new().engine(Engine::Vector);
    same_as(
        "nl.abs (int32)",
        false,
        || {
            let mut s = big_ints();
            let t = plus(&s);
            s.push(t);
            s
        },
        |s| lang::abs(&s[1]),
        |s, d| tensor_scalar(d, &s[1], AluOp::Abs, 0.0, on_vector()),
    );
    same_as(
        "nl.negative (int32)",
        false,
        || {
            let mut s = big_ints();
            let t = plus(&s);
            s.push(t);
            s
        },
        |s| lang::negative(&s[1]),
        |s, d| tensor_scalar(d, &s[1], AluOp::Multiply, -1.0, on_vector()),
    );
    same_as(
        "-tile",
        false,
        data,
        |s| -&s[0],
        |s, d| tensor_scalar(d, &s[0], AluOp::Multiply, -1.0, on_vector()),
    );
}

#[test]
fn nl_softmax_and_rms_norm_record_the_instructions_they_lower_to() {
    let x = || ramp(128, 64, DType::F32, 0.05);
    let softmax = run(Mode::Estimate, || drop(lang::softmax(&x(), 1))).expect("runs");
    let nisa = run(Mode::Estimate, || {
        let x = x();
        let neg_max = lang::ndarray(&[128, 1], DType::F32, MemKind::Sbuf);
        tensor_reduce(
            &neg_max,
            AluOp::Maximum,
            &x,
            &[1],
            ReduceOpts::new().negate(),
        );
        let e = lang::ndarray(&[128, 64], DType::F32, MemKind::Sbuf);
        let sums = lang::ndarray(&[128, 1], DType::F32, MemKind::Sbuf);
        let args = ActivationOpts::new().bias(&neg_max);
        activation_reduce(&e, ActFn::Exp, &x, AluOp::Add, &sums, args);
        let r = lang::ndarray(&[128, 1], DType::F32, MemKind::Sbuf);
        reciprocal(&r, &sums, None);
    })
    .expect("runs");
    let (a, b) = (plain(&softmax, false), plain(&nisa, false));
    assert_eq!(a[..b.len()], b[..], "nl.softmax up to its last multiply");
    let norm = run(Mode::Estimate, || {
        let w = ramp(1, 64, DType::F32, 0.01);
        drop(lang::rms_norm(&x(), &w, 1, 64, 1e-6));
    })
    .expect("runs");
    let nisa = run(Mode::Estimate, || {
        let _w = ramp(1, 64, DType::F32, 0.01);
        let x = x();
        let sq = lang::ndarray(&[128, 64], DType::F32, MemKind::Sbuf);
        let sums = lang::ndarray(&[128, 1], DType::F32, MemKind::Sbuf);
        activation_reduce(&sq, ActFn::Square, &x, AluOp::Add, &sums, None);
        let ms = lang::ndarray(&[128, 1], DType::F32, MemKind::Sbuf);
        let args = TensorScalarOpts::new()
            .then(AluOp::Add, 1e-6)
            .engine(Engine::Vector);
        tensor_scalar(&ms, &sums, AluOp::Multiply, 1.0 / 64.0, args);
        let rstd = lang::ndarray(&[128, 1], DType::F32, MemKind::Sbuf);
        activation(&rstd, ActFn::Rsqrt, &ms, None);
    })
    .expect("runs");
    let (a, b) = (plain(&norm, false), plain(&nisa, false));
    assert_eq!(a[..b.len()], b[..], "nl.rms_norm up to its multiplies");
}

#[test]
fn nl_binary_ops_of_two_tiles_record_the_tensor_tensor_they_lower_to() {
    let two = || {
        vec![
            ramp(128, 64, DType::BF16, 0.01),
            ramp(128, 64, DType::F32, -0.02),
        ]
    };
    same_as(
        "nl.add",
        false,
        two,
        |s| lang::add(&s[0], &s[1]),
        |s, d| tensor_tensor(d, &s[0], &s[1], AluOp::Add, None),
    );
    same_as(
        "tile * tile",
        false,
        two,
        |s| &s[0] * &s[1],
        |s, d| tensor_tensor(d, &s[0], &s[1], AluOp::Multiply, None),
    );
    same_as(
        "nl.maximum",
        false,
        two,
        |s| lang::maximum(&s[0], &s[1]),
        |s, d| tensor_tensor(d, &s[0], &s[1], AluOp::Maximum, None),
    );
    same_as(
        "nl.greater",
        false,
        two,
        |s| lang::greater(&s[0], &s[1]),
        |s, d| tensor_tensor(d, &s[0], &s[1], AluOp::Greater, None),
    );
    // int32: on GpSimdE, exact.
    let ints = || {
        vec![
            ramp(64, 32, DType::I32, 3.0),
            ramp(64, 32, DType::I32, -7.0),
        ]
    };
    same_as(
        "nl.add (int32)",
        false,
        ints,
        |s| lang::add(&s[0], &s[1]),
        |s, d| tensor_tensor(d, &s[0], &s[1], AluOp::Add, None),
    );
    same_as(
        "nl.bitwise_xor (int32)",
        false,
        ints,
        |s| lang::bitwise_xor(&s[0], &s[1]),
        |s, d| tensor_tensor(d, &s[0], &s[1], AluOp::BitwiseXor, None),
    );
    // One element per partition, read with a stride: a unit-stride access all the same.
    fn column(t: &Tile) -> crate::tile::TileRef<'_> {
        t.slice((.., crate::access::stepped(3..64, 61)))
    }
    same_as(
        "nl.subtract (strided columns)",
        false,
        two,
        |s| lang::subtract(column(&s[0]), column(&s[1])),
        |s, d| tensor_tensor(d, column(&s[0]), column(&s[1]), AluOp::Subtract, None),
    );
}
