//! Issue 10, class 8: integers are exact. int32/uint32 values beyond 2^24 (not exact f32
//! values) survive loads, stores, DMA copies and tensor copies bit for bit, GpSimdE's native
//! 32-bit integer arithmetic and the bitvec operators are exact, and casts to float round to
//! nearest even, as the hardware converts — in every mode that computes values.

use nki_core::nisa::{AffineExpr, AluOp, Engine, TensorScalarOpts};
use nki_core::prelude::*;
// The Beta-1 instruction forms (allocating, `_into` twins): the seeds' dialect.
use nki_core::nisa::classic as nisa;

/// The modes that compute values.
const VALUE_MODES: [Mode; 2] = [Mode::Execute, Mode::Simulate];

/// int32 values no f32 holds exactly (and the extremes).
const I32S: [i32; 8] = [
    i32::MAX,
    -i32::MAX,
    i32::MIN,
    16_777_217,
    -16_777_219,
    1 << 30 | 1,
    123_456_789,
    0,
];

/// uint32 values no f32 holds exactly (and the extremes).
const U32S: [u32; 8] = [
    u32::MAX,
    u32::MAX - 2,
    3_000_000_001,
    16_777_217,
    1 << 31 | 1,
    0,
    1,
    987_654_321,
];

/// Runs `kernel(input, output)` on a [2, 4] tensor in every value mode and returns what each
/// mode stored.
fn each_mode<T: Element + PartialEq>(
    vals: &[T],
    out_zero: T,
    kernel: impl Fn(&Hbm<T>, &HbmOut<T>) + Sync,
) -> Vec<Vec<T>> {
    let a = Hbm::<T>::from_vec(&[2, 4], vals.to_vec()).unwrap();
    VALUE_MODES
        .iter()
        .map(|&mode| {
            let mut c = Hbm::<T>::full([2, 4], out_zero);
            let out = c.as_output();
            Launch::new(1).mode(mode).run(|| kernel(&a, &out)).unwrap();
            c.to_vec().unwrap()
        })
        .collect()
}

#[test]
fn hbm_holds_32_bit_integers_exactly() {
    let a = Hbm::<i32>::from_vec(&[8], I32S.to_vec()).unwrap();
    assert_eq!(a.to_vec().unwrap(), I32S);
    let b = Hbm::<u32>::from_vec(&[8], U32S.to_vec()).unwrap();
    assert_eq!(b.to_vec().unwrap(), U32S);
    assert_eq!(
        Hbm::<i32>::full([2], i32::MAX).to_vec().unwrap(),
        [i32::MAX; 2]
    );
    // The f32 view is the value rounded to nearest even, as an int -> fp32 cast.
    assert_eq!(a.to_f32_vec().unwrap()[3], 16_777_216.0);
}

#[test]
fn load_store_round_trips_are_exact() {
    for got in each_mode(&I32S, 0, |a, out| nl::store(out, &nl::load(a))) {
        assert_eq!(got, I32S);
    }
    for got in each_mode(&U32S, 0, |a, out| nl::store(out, &nl::load(a))) {
        assert_eq!(got, U32S);
    }
    // A strided load (copied, not read in place) and a store of a view.
    let a = Hbm::<i32>::from_vec(&[2, 4], I32S.to_vec()).unwrap();
    let mut c = Hbm::<i32>::zeros([2, 2]);
    let out = c.as_output();
    Launch::new(1)
        .run(|| {
            let t = nl::load(a.slice((.., stepped(0..4, 2))));
            nl::store(&out, &t);
        })
        .unwrap();
    assert_eq!(c.to_vec().unwrap(), [I32S[0], I32S[2], I32S[4], I32S[6]]);
}

#[test]
fn dma_copies_and_tensor_copies_are_exact() {
    for got in each_mode(&I32S, 0, |a, out| {
        let t = nl::ndarray(&[2, 4], DType::I32, MemKind::Sbuf);
        nisa::dma_copy(&t, a);
        let v = nisa::tensor_copy(&t, None, Engine::Vector);
        let g = nisa::tensor_copy(&v, None, Engine::GpSimd);
        let c = nl::copy(&g, None);
        let w = nl::ndarray(&[2, 4], DType::I32, MemKind::Sbuf);
        nl::assign(&w, &c);
        nisa::dma_copy(out, &w);
    }) {
        assert_eq!(got, I32S);
    }
    for got in each_mode(&U32S, 0, |a, out| {
        nl::store(out, &nl::copy(&nl::load(a), Some(DType::U32)))
    }) {
        assert_eq!(got, U32S);
    }
}

#[test]
fn int32_add_subtract_and_multiply_are_exact_and_wrap() {
    let b: Vec<i32> = vec![1, 1, 1, 3, -5, 7, 1000, -1];
    let a = Hbm::<i32>::from_vec(&[2, 4], I32S.to_vec()).unwrap();
    let bt = Hbm::<i32>::from_vec(&[2, 4], b.clone()).unwrap();
    for mode in VALUE_MODES {
        let mut sum = Hbm::<i32>::zeros([2, 4]);
        let mut diff = Hbm::<i32>::zeros([2, 4]);
        let mut prod = Hbm::<i32>::zeros([2, 4]);
        let mut isa = Hbm::<i32>::zeros([2, 4]);
        let (s, d, p, i) = (
            sum.as_output(),
            diff.as_output(),
            prod.as_output(),
            isa.as_output(),
        );
        Launch::new(1)
            .mode(mode)
            .run(|| {
                let (x, y) = (nl::load(&a), nl::load(&bt));
                nl::store(&s, &nl::add(&x, &y));
                nl::store(&d, &nl::subtract(&x, &y));
                nl::store(&p, &nl::multiply(&x, &y));
                nl::store(&i, &nisa::tensor_tensor(&x, &y, AluOp::Add, None));
            })
            .unwrap();
        let want = |f: fn(i32, i32) -> i32| -> Vec<i32> {
            I32S.iter().zip(&b).map(|(&x, &y)| f(x, y)).collect()
        };
        assert_eq!(sum.to_vec().unwrap(), want(i32::wrapping_add), "{mode:?}");
        assert_eq!(diff.to_vec().unwrap(), want(i32::wrapping_sub), "{mode:?}");
        assert_eq!(prod.to_vec().unwrap(), want(i32::wrapping_mul), "{mode:?}");
        assert_eq!(isa.to_vec().unwrap(), want(i32::wrapping_add), "{mode:?}");
    }
}

#[test]
fn uint32_and_scalar_arithmetic_is_exact() {
    for got in each_mode(&U32S, 0, |a, out| {
        let x = nl::load(a);
        nl::store(out, &nl::add(&x, &nl::multiply(&x, &x)))
    }) {
        let want: Vec<u32> = U32S
            .iter()
            .map(|x| x.wrapping_add(x.wrapping_mul(*x)))
            .collect();
        assert_eq!(got, want);
    }
    // An int32 tile with a weak int scalar computes in int32.
    for got in each_mode(&I32S, 0, |a, out| nl::store(out, &nl::add(&nl::load(a), 2))) {
        let want: Vec<i32> = I32S.iter().map(|x| x.wrapping_add(2)).collect();
        assert_eq!(got, want);
    }
}

#[test]
fn bitvec_operators_work_on_exact_bit_patterns() {
    for got in each_mode(&I32S, 0, |a, out| {
        let x = nl::load(a);
        let ones = nl::invert(&nl::bitwise_xor(&x, &x));
        let y = nl::bitwise_and(&x, &ones);
        nl::store(
            out,
            &nisa::tensor_scalar(&y, AluOp::BitwiseXor, 1, TensorScalarOpts::new()),
        );
    }) {
        let want: Vec<i32> = I32S.iter().map(|x| x ^ 1).collect();
        assert_eq!(got, want);
    }
}

#[test]
fn casting_int32_to_float_rounds_to_nearest_even() {
    let a =
        Hbm::<i32>::from_vec(&[1, 4], vec![16_777_217, 16_777_219, -16_777_217, i32::MAX]).unwrap();
    let want = [
        16_777_216.0f32,
        16_777_220.0,
        -16_777_216.0,
        2_147_483_648.0,
    ];
    for mode in VALUE_MODES {
        let mut by_copy = Hbm::<f32>::zeros([1, 4]);
        let mut by_load = Hbm::<f32>::zeros([1, 4]);
        let mut by_store = Hbm::<f32>::zeros([1, 4]);
        let (c, l, s) = (
            by_copy.as_output(),
            by_load.as_output(),
            by_store.as_output(),
        );
        Launch::new(1)
            .mode(mode)
            .run(|| {
                nl::store(&c, &nl::copy(&nl::load(&a), Some(DType::F32)));
                nl::store(&l, &nl::load_as(&a, DType::F32));
                nl::store(&s, &nl::load(&a));
            })
            .unwrap();
        for h in [&by_copy, &by_load, &by_store] {
            assert_eq!(h.to_vec().unwrap(), want, "{mode:?}");
        }
    }
}

#[test]
fn index_tiles_hold_exact_integers() {
    let big = 16_777_217;
    for mode in VALUE_MODES {
        let mut c = Hbm::<i32>::zeros([2, 4]);
        let mut d = Hbm::<i32>::zeros([1, 4]);
        let (o, p) = (c.as_output(), d.as_output());
        Launch::new(1)
            .mode(mode)
            .run(|| {
                let e = AffineExpr::new(2, 1 << 25).free(1, 4).offset(big);
                nl::store(&o, &nisa::iota(&e, DType::I32));
                nl::store(&p, &nl::classic::arange(big, 3, 4, DType::I32));
            })
            .unwrap();
        let want: Vec<i32> = (0..2)
            .flat_map(|r| (0..4).map(move |j| big + r * (1 << 25) + j))
            .collect();
        assert_eq!(c.to_vec().unwrap(), want, "{mode:?}");
        let want: Vec<i32> = (0..4).map(|j| big + 3 * j).collect();
        assert_eq!(d.to_vec().unwrap(), want, "{mode:?}");
    }
}

#[test]
fn float_math_on_int32_uses_the_rounded_value() {
    // VectorE computes arithmetic in fp32: a maximum on int32 compares the fp32 values, and a
    // float scalar promotes to float32 (16777217 + 0.5 rounds to 16777216 in fp32).
    let a = Hbm::<i32>::from_vec(&[1, 2], vec![16_777_217, 5]).unwrap();
    let mut c = Hbm::<f32>::zeros([1, 2]);
    let out = c.as_output();
    Launch::new(1)
        .run(|| nl::store(&out, &nl::add(&nl::load(&a), 0.5)))
        .unwrap();
    assert_eq!(c.to_vec().unwrap(), [16_777_216.0, 5.5]);
}

#[test]
fn scalar_engine_copies_go_through_fp32() {
    // ScalarE (tensor_copy on Engine::Scalar, nl.copy out of PSUM) reads fp32 values.
    for got in each_mode(&I32S, 0, |a, out| {
        let t = nisa::tensor_copy(&nl::load(a), None, Engine::Scalar);
        let p = nisa::tensor_copy(&t, None, Engine::Vector);
        nl::store(out, &p)
    }) {
        let want: Vec<i32> = I32S
            .iter()
            .map(|&x| (x as f32).min(i32::MAX as f32) as i32)
            .collect();
        assert_eq!(got, want);
    }
}

#[test]
fn atomic_adds_compute_in_fp32_as_the_dma_engine_does() {
    // `atomic_rmw` is a DMA read-modify-write; the DMA engines compute in fp32 whatever the
    // dtypes (nki.isa.dma_compute docs), so int32 sums round to the nearest fp32 value
    // before they are cast back: 16,777,217 + 0 lands as 16,777,216, small sums stay exact.
    let start = [16_777_217, 5, -16_777_219, 1_000];
    let add = [0, 7, 0, -1_000];
    let v = Hbm::<i32>::from_vec(&[1, 4], add.to_vec()).unwrap();
    for mode in VALUE_MODES {
        let mut c = Hbm::<i32>::from_vec(&[1, 4], start.to_vec()).unwrap();
        let out = c.as_output();
        Launch::new(1)
            .mode(mode)
            .run(|| nl::atomic_rmw(&out, &nl::load(&v), AluOp::Add))
            .unwrap();
        let want: Vec<i32> = start
            .iter()
            .zip(add)
            .map(|(&a, b)| (a as f32 + b as f32) as i32)
            .collect();
        assert_eq!(want, [16_777_216, 12, -16_777_220, 0]);
        assert_eq!(c.to_vec().unwrap(), want, "{mode:?}");
    }
}

#[test]
fn partition_bitwise_reductions_are_exact() {
    // GpSimdE's tensor_partition_reduce with the bitvec operators (bitwise_xor is NKI 0.7's)
    // works on the 32-bit patterns, also beyond 2^24.
    let a = Hbm::<i32>::from_vec(&[2, 4], I32S.to_vec()).unwrap();
    for (op, f) in [
        (AluOp::BitwiseXor, (|x, y| x ^ y) as fn(i32, i32) -> i32),
        (AluOp::BitwiseOr, |x, y| x | y),
        (AluOp::BitwiseAnd, |x, y| x & y),
    ] {
        for mode in VALUE_MODES {
            let mut c = Hbm::<i32>::zeros([1, 4]);
            let out = c.as_output();
            Launch::new(1)
                .mode(mode)
                .run(|| {
                    let r = nisa::tensor_partition_reduce(op, &nl::load(&a), None);
                    nl::store(&out, &r)
                })
                .unwrap();
            let want: Vec<i32> = (0..4).map(|j| f(I32S[j], I32S[4 + j])).collect();
            assert_eq!(c.to_vec().unwrap(), want, "{op} {mode:?}");
        }
    }
}

#[test]
fn transposing_and_indirect_loads_are_exact() {
    // [2, 4] -> transposed [4, 2]; then rows 1, 0 of the input by index.
    let a = Hbm::<i32>::from_vec(&[2, 4], I32S.to_vec()).unwrap();
    for mode in VALUE_MODES {
        let mut t = Hbm::<i32>::zeros([4, 2]);
        let mut r = Hbm::<i32>::zeros([2, 4]);
        let (to, ro) = (t.as_output(), r.as_output());
        Launch::new(1)
            .mode(mode)
            .run(|| {
                nl::store(&to, &nl::load_transpose2d(&a));
                // Indices [1, 0] (one per partition).
                let ids = nisa::iota(&AffineExpr::new(2, -1).free(0, 1).offset(1), DType::I32);
                nl::store(&ro, &nl::load_indirect(a.view(), &ids));
            })
            .unwrap();
        let want: Vec<i32> = (0..4).flat_map(|c| [I32S[c], I32S[4 + c]]).collect();
        assert_eq!(t.to_vec().unwrap(), want, "{mode:?}");
        let want: Vec<i32> = I32S[4..].iter().chain(&I32S[..4]).copied().collect();
        assert_eq!(r.to_vec().unwrap(), want, "{mode:?}");
    }
}

#[test]
fn gathered_elements_are_exact() {
    let idx = Hbm::<u32>::from_vec(&[2, 3], vec![3, 0, 3, 1, 2, 0]).unwrap();
    for got in each_mode(&I32S, 0, |a, out| {
        let g = nl::gather_flattened(&nl::load(a), &nl::load(&idx));
        nl::store(out.slice((.., 0..3)), &g);
        nl::store(
            out.slice((.., 3..4)),
            &nl::zeros(&[2, 1], DType::I32, MemKind::Sbuf),
        );
    }) {
        let want = [I32S[3], I32S[0], I32S[3], 0, I32S[5], I32S[6], I32S[4], 0];
        assert_eq!(got, want);
    }
}

#[test]
fn broadcasts_along_the_free_dimension_are_exact() {
    for got in each_mode(&I32S, 0, |a, out| {
        let col = nl::load(a.slice((.., 0..1)));
        nl::store(out, &nl::broadcast_to(&col, &[2, 4]));
    }) {
        assert_eq!(
            got,
            [I32S[0]; 4]
                .iter()
                .chain(&[I32S[4]; 4])
                .copied()
                .collect::<Vec<_>>()
        );
    }
}

#[test]
fn remote_copies_move_32_bit_integers_exactly() {
    use nki_core::mesh::{self, Mesh, MeshLaunch, PartitionSpec, ShardedHbm};
    let m = Mesh::new([2], ["x"]).unwrap();
    let spec = || PartitionSpec::new([Some("x"), None]);
    let a = ndarray::Array2::from_shape_vec((2, 4), I32S.to_vec()).unwrap();
    let x = ShardedHbm::from_array(&m, &a, spec()).unwrap();
    let (by_hbm, by_tile) = (
        ShardedHbm::<i32>::zeros(&m, &[2, 4], spec()).unwrap(),
        ShardedHbm::<i32>::zeros(&m, &[2, 4], spec()).unwrap(),
    );
    MeshLaunch::new(&m)
        .run(|| {
            let other = 1 - mesh::device_id();
            let (send, recv) = (mesh::semaphore("send"), mesh::semaphore("recv"));
            let c = mesh::remote_copy(x.view(), &by_hbm.at(other), &send, &recv);
            c.start();
            c.wait();
            let t = nl::load(x.local().view());
            let c = mesh::remote_copy(&t, &by_tile.at(other), &send, &recv);
            c.start();
            c.wait();
        })
        .unwrap();
    let swapped: Vec<i32> = I32S[4..].iter().chain(&I32S[..4]).copied().collect();
    for got in [&by_hbm, &by_tile] {
        let v = got.to_array().unwrap();
        assert_eq!(v.iter().copied().collect::<Vec<_>>(), swapped);
    }
}

#[test]
fn integer_scalars_and_operand_columns_beyond_2_24_are_exact() {
    const BIG: i32 = 16_777_217;
    // nl.add with an int scalar: int32 arithmetic on GpSimdE, the scalar exact.
    for got in each_mode(&I32S, 0, |a, out| {
        nl::store(out, &nl::add(&nl::load(a), BIG))
    }) {
        let want: Vec<i32> = I32S.iter().map(|x| x.wrapping_add(BIG)).collect();
        assert_eq!(got, want);
    }
    // tensor_scalar with a bitvec operator: an int scalar, then a [P, 1] int32 column.
    for got in each_mode(&I32S, 0, |a, out| {
        let x = nl::load(a);
        nl::store(
            out,
            &nisa::tensor_scalar(&x, AluOp::BitwiseXor, BIG, TensorScalarOpts::new()),
        )
    }) {
        let want: Vec<i32> = I32S.iter().map(|x| x ^ BIG).collect();
        assert_eq!(got, want);
    }
    let col = Hbm::<i32>::from_vec(&[2, 1], vec![BIG, -BIG - 2]).unwrap();
    for got in each_mode(&I32S, 0, |a, out| {
        let (x, c) = (nl::load(a), nl::load(&col));
        nl::store(
            out,
            &nisa::tensor_scalar(&x, AluOp::BitwiseXor, &c, TensorScalarOpts::new()),
        )
    }) {
        let want: Vec<i32> = I32S
            .iter()
            .enumerate()
            .map(|(i, x)| x ^ if i < 4 { BIG } else { -BIG - 2 })
            .collect();
        assert_eq!(got, want);
    }
}

#[test]
fn where_selects_32_bit_integers_exactly() {
    let other = Hbm::<i32>::from_vec(&[2, 4], I32S.iter().map(|x| x ^ 1).collect()).unwrap();
    for got in each_mode(&I32S, 0, |a, out| {
        let x = nl::load(a);
        let y = nl::load(&other);
        let even = nl::equal(&nl::bitwise_and(&x, 1), 0);
        nl::store(out, &nl::where_(&even, &x, &y))
    }) {
        let want: Vec<i32> = I32S
            .iter()
            .map(|&x| if x & 1 == 0 { x } else { x ^ 1 })
            .collect();
        assert_eq!(got, want);
    }
    // An int scalar beyond 2^24 is selected exactly too.
    for got in each_mode(&I32S, 0, |a, out| {
        let x = nl::load(a);
        let even = nl::equal(&nl::bitwise_and(&x, 1), 0);
        nl::store(out, &nl::where_(&even, &x, 16_777_217))
    }) {
        let want: Vec<i32> = I32S
            .iter()
            .map(|&x| if x & 1 == 0 { x } else { 16_777_217 })
            .collect();
        assert_eq!(got, want);
    }
}

#[test]
fn indirect_loads_use_exact_row_numbers_beyond_2_pow_24() {
    // A one-column tensor of 2^24 + 3 rows holding each row's number: index 2^24 + 1 is no
    // f32, so a path through f32 would fetch row 2^24 instead.
    let rows = (1usize << 24) + 3;
    let data = Hbm::<u32>::from_vec(&[rows, 1], (0..rows as u32).collect()).unwrap();
    let picks: [u32; 4] = [16_777_217, 16_777_218, 3, 16_777_216];
    for dtype_i32 in [false, true] {
        let idx_u = Hbm::<u32>::from_vec(&[4, 1], picks.to_vec()).unwrap();
        let idx_i =
            Hbm::<i32>::from_vec(&[4, 1], picks.iter().map(|&p| p as i32).collect()).unwrap();
        for mode in VALUE_MODES {
            let mut c = Hbm::<u32>::zeros([4, 1]);
            let out = c.as_output();
            Launch::new(1)
                .mode(mode)
                .run(|| {
                    let idx = if dtype_i32 {
                        nl::load(&idx_i)
                    } else {
                        nl::load(&idx_u)
                    };
                    nl::store(&out, &nl::load_indirect(&data, &idx));
                })
                .unwrap();
            assert_eq!(
                c.to_vec().unwrap(),
                picks.to_vec(),
                "{mode:?} i32 {dtype_i32}"
            );
        }
    }
}

#[test]
fn vector_offset_gathers_use_exact_row_numbers_beyond_2_pow_24() {
    // NKI 0.7's indirect DMA (`.ap(.., vector_offset=idx)`): the same rows as the Beta-1
    // `load_indirect` above, through `ap_indirect` + `dma_copy` (the index tile is read as
    // integers, never through f32).
    let rows = (1usize << 24) + 3;
    let data = Hbm::<u32>::from_vec(&[rows, 1], (0..rows as u32).collect()).unwrap();
    let picks: [i32; 4] = [16_777_217, 16_777_218, 3, 16_777_216];
    let ids = Hbm::<i32>::from_vec(&[4, 1], picks.to_vec()).unwrap();
    for mode in VALUE_MODES {
        let mut c = Hbm::<u32>::zeros([4, 1]);
        let out = c.as_output();
        Launch::new(1)
            .mode(mode)
            .run(|| {
                let idx = nl::ndarray(&[4, 1], DType::I32, MemKind::Sbuf);
                nki_core::nisa::dma_copy(&idx, &ids, None);
                let t = nl::ndarray(&[4, 1], DType::U32, MemKind::Sbuf);
                let src = data.view().ap_indirect(&[[1, 4], [1, 1]], 0, &idx);
                nki_core::nisa::dma_copy(&t, src, None);
                nki_core::nisa::dma_copy(&out, &t, None);
            })
            .unwrap();
        let want: Vec<u32> = picks.iter().map(|&p| p as u32).collect();
        assert_eq!(c.to_vec().unwrap(), want, "{mode:?}");
    }
}

#[test]
fn out_of_range_indices_are_reported_exactly() {
    let data = Hbm::<f32>::zeros([8, 2]);
    let idx = Hbm::<u32>::from_vec(&[2, 1], vec![1, u32::MAX]).unwrap();
    let e = Launch::new(1)
        .run(|| {
            let i = nl::load(&idx);
            let _ = nl::load_indirect(&data, &i);
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfBounds, "{e}");
    assert!(
        e.message().contains("index 4294967295 at partition 1"),
        "{e}"
    );
    let neg = Hbm::<i32>::from_vec(&[1, 1], vec![-16_777_217]).unwrap();
    let e = Launch::new(1)
        .run(|| {
            let i = nl::load(&neg);
            let _ = nl::load_indirect(&data, &i);
        })
        .unwrap_err();
    assert!(
        e.message().contains("index -16777217 at partition 0"),
        "{e}"
    );
    // gather_flattened: a uint32 index no f32 holds is named exactly.
    let d = Hbm::<f32>::zeros([1, 4]);
    let gi = Hbm::<u32>::from_vec(&[1, 2], vec![0, 16_777_217]).unwrap();
    let e = Launch::new(1)
        .run(|| {
            let (t, i) = (nl::load(&d), nl::load(&gi));
            let _ = nl::gather_flattened(&t, &i);
        })
        .unwrap_err();
    assert!(e.message().contains("index 16777217 at partition 0"), "{e}");
}
