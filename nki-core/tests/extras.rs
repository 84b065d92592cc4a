//! The classic-NKI extras: `nl.gather_flattened` (GpSimdE per-partition gather), `nl.rand` /
//! `nl.random_seed` / `nl.dropout` (the VectorE PRNG) and `nl.atomic_rmw` (HBM atomic add).
//! Values are checked against plain-loop references and statistical bounds, errors by kind,
//! message, program id and kernel line, and records and modelled costs against the cost table.

mod common;

use common::Rng;
use nki_core::__private::cost;
use nki_core::prelude::*;
use nki_core::AluOp;
use nki_core::{Engine, Opcode};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

/// The kernel line expected in an error (set just before the failing call). One global for
/// all tests, so the tests that use it hold [`line_guard`] for their whole run.
static LINE: AtomicU32 = AtomicU32::new(0);

/// Serialises the tests that set and check [`LINE`] (tests run in parallel threads).
fn line_guard() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Marks the line after `line` as the one expected to fail.
fn next_line(line: u32) {
    LINE.store(line + 1, Ordering::SeqCst);
}

/// Checks kind, op, message fragments, program id and kernel line of `e`.
#[track_caller]
fn expect_err(e: &NkiError, kind: ErrorKind, op: &str, fragments: &[&str], pid: &[usize]) {
    assert_eq!(e.kind(), kind, "{e}");
    assert!(e.op().contains(op), "op {:?} lacks {op:?}: {e}", e.op());
    for f in fragments {
        assert!(e.message().contains(f), "message lacks {f:?}: {e}");
    }
    assert_eq!(e.program_id(), Some(pid), "{e}");
    let loc = e.location().expect("location attached");
    assert!(loc.file.ends_with("extras.rs"), "{loc}");
    assert_eq!(loc.line, LINE.load(Ordering::SeqCst), "{e}");
}

/// Runs `body` as a one-instance kernel that must fail, and checks the error with
/// [`expect_err`] (program id `[0]`).
#[track_caller]
fn fails_once(body: impl Fn() + Sync, kind: ErrorKind, op: &str, fragments: &[&str]) {
    let e = Launch::new(1).run(body).unwrap_err();
    expect_err(&e, kind, op, fragments, &[0]);
}

// ---------------------------------------------------------------------------------------------
// gather_flattened

/// Plain-loop reference: `out[p, j] = data[p, idx[p, j]]` over flattened free dims.
fn gather_ref(data: &[f32], f: usize, idx: &[u32], n: usize) -> Vec<f32> {
    let p = idx.len() / n;
    let mut out = Vec::with_capacity(idx.len());
    for row in 0..p {
        for j in 0..n {
            out.push(data[row * f + idx[row * n + j] as usize]);
        }
    }
    out
}

/// Runs one instance gathering `data` (shape `dshape`) with `idx` (shape `ishape`).
fn run_gather<T: Element>(
    dshape: &[usize],
    data: Vec<T>,
    ishape: &[usize],
    idx: Vec<u32>,
) -> Vec<f32> {
    let d = Hbm::<T>::from_vec(dshape, data).unwrap();
    let i = Hbm::<u32>::from_vec(ishape, idx).unwrap();
    let mut c = common::zeros::<T>(ishape);
    let out = c.as_output();
    Launch::new(1)
        .run(|| {
            let dt = nl::load(&d);
            let it = nl::load(&i);
            let g = nl::gather_flattened(&dt, &it);
            assert_eq!(g.shape(), ishape);
            assert_eq!(g.dtype(), T::DTYPE);
            nl::store(&out, &g);
        })
        .unwrap();
    c.to_f32_vec().unwrap()
}

#[test]
fn gather_flattened_reproduces_the_nki_doc_example() {
    let data = vec![1.0f32, 2., 3., 4., 5., 6., 7., 8.];
    let idx = vec![0u32, 1, 1, 3, 3, 3, 1, 0];
    let got = run_gather(&[2, 2, 2], data, &[2, 2, 2], idx);
    assert_eq!(got, vec![1., 2., 2., 4., 8., 8., 6., 5.]);
}

#[test]
fn gather_flattened_matches_loops_for_2d_3d_and_4d_tiles() {
    let mut rng = Rng(11);
    let cases: [(&[usize], &[usize]); 4] = [
        (&[128, 512], &[128, 300]),
        (&[128, 4, 8], &[128, 2, 5]),
        (&[7, 2, 3, 4], &[7, 3, 2, 2]),
        (&[1, 33], &[1, 1]),
    ];
    for (dshape, ishape) in cases {
        let f: usize = dshape[1..].iter().product();
        let n: usize = ishape[1..].iter().product();
        let data = rng.vec(dshape[0] * f, -50.0, 50.0);
        let idx: Vec<u32> = rng
            .ints(ishape[0] * n, 0, f as i64 - 1)
            .into_iter()
            .map(|v| v as u32)
            .collect();
        let want = gather_ref(&data, f, &idx, n);
        assert_eq!(
            run_gather(dshape, data, ishape, idx),
            want,
            "{dshape:?} {ishape:?}"
        );
    }
    // bf16 data: gathered values are the bf16 values, bit for bit.
    let data: Vec<bf16> = rng
        .vec(64 * 100, -3.0, 3.0)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    let as_f32: Vec<f32> = data.iter().map(|v| v.to_f32()).collect();
    let idx: Vec<u32> = rng
        .ints(64 * 40, 0, 99)
        .into_iter()
        .map(|v| v as u32)
        .collect();
    let want = gather_ref(&as_f32, 100, &idx, 40);
    assert_eq!(run_gather(&[64, 100], data, &[64, 40], idx), want);
}

#[test]
fn gather_flattened_out_of_range_index_is_an_error() {
    let _serial = line_guard();
    let d = Hbm::<f32>::zeros([4, 2, 8]);
    let mut idx = vec![0u32; 4 * 6];
    idx[2 * 6 + 5] = 16; // partition 2, position 5: one past the 16 flattened elements
    let i = Hbm::<u32>::from_vec(&[4, 6], idx).unwrap();
    let e = Launch::new(3)
        .run(|| {
            let dt = nl::load(&d);
            let it = nl::load(&i);
            if nl::program_id(0) == 1 {
                next_line(line!());
                nl::gather_flattened(&dt, &it);
            }
        })
        .unwrap_err();
    expect_err(
        &e,
        ErrorKind::OutOfBounds,
        "gather_flattened",
        &["index 16", "partition 2", "16 flattened free elements"],
        &[1],
    );
}

#[test]
fn gather_flattened_checks_its_operands() {
    let _serial = line_guard();
    type Case = (ErrorKind, &'static [&'static str], fn());
    let cases: [Case; 4] = [
        (ErrorKind::DType, &["'indices'", "uint32", "int32"], || {
            let d = nl::zeros(&[8, 16], DType::F32, nl::SBUF);
            let i = nl::zeros(&[8, 4], DType::I32, nl::SBUF);
            next_line(line!());
            nl::gather_flattened(&d, &i);
        }),
        (ErrorKind::WrongMemory, &["'data'", "psum"], || {
            let d = nl::zeros(&[8, 16], DType::F32, nl::PSUM);
            let i = nl::zeros(&[8, 4], DType::U32, nl::SBUF);
            next_line(line!());
            nl::gather_flattened(&d, &i);
        }),
        (
            ErrorKind::PartitionMismatch,
            &["data[8, 16]", "indices[4, 4]"],
            || {
                let d = nl::zeros(&[8, 16], DType::F32, nl::SBUF);
                let i = nl::zeros(&[4, 4], DType::U32, nl::SBUF);
                next_line(line!());
                nl::gather_flattened(&d, &i);
            },
        ),
        (
            ErrorKind::InvalidArgument,
            &["'data'", "5 dimensions"],
            || {
                let d = nl::zeros(&[8, 2, 2, 2, 2], DType::F32, nl::SBUF);
                let i = nl::zeros(&[8, 4], DType::U32, nl::SBUF);
                next_line(line!());
                nl::gather_flattened(&d, &i);
            },
        ),
    ];
    for (kind, frags, body) in cases {
        fails_once(body, kind, "gather_flattened", frags);
    }
}

#[test]
fn gather_flattened_is_one_gpsimd_instruction_costing_150_plus_n() {
    let report = Launch::new(1)
        .mode(Mode::Simulate)
        .target(Target::Trn2)
        .run(|| {
            let d = nl::zeros(&[128, 4, 128], DType::BF16, nl::SBUF);
            let i = nl::zeros(&[128, 300], DType::U32, nl::SBUF);
            nl::gather_flattened(&d, &i);
        })
        .unwrap();
    let p = report.profile.unwrap();
    let (k, op) = p
        .ops
        .iter()
        .enumerate()
        .find(|(_, o)| o.opcode == Opcode::Gather)
        .expect("a gather record");
    assert_eq!((op.engine, op.api), (Engine::GpSimd, "nl.gather_flattened"));
    assert_eq!((op.partitions, op.free), (128, 300));
    assert_eq!((op.in_dtype, op.out_dtype), (DType::BF16, DType::BF16));
    assert_eq!(Opcode::Gather.name(), "GATHER");
    let spec = Target::Trn2.spec();
    let span = p.spans.iter().find(|s| s.op == k as u32).unwrap();
    let want = (spec.gpsimd_start + 300) as f64 / spec.gpsimd_ghz;
    assert!(
        (span.dur_ns - want).abs() < 1e-6,
        "{} vs {want}",
        span.dur_ns
    );
}

// ---------------------------------------------------------------------------------------------
// rand / random_seed

/// Runs `kernel` on `grid`, which stores one `[rows, cols]` tile per program id (row block
/// `program_id(0)`) into the output; returns the output.
fn per_instance(
    grid: Grid,
    rows: usize,
    cols: usize,
    kernel: impl Fn(&HbmOut<'_, f32>) + Sync,
) -> Vec<f32> {
    let n: usize = grid.shape().iter().product();
    let mut c = Hbm::<f32>::zeros([n * rows, cols]);
    let out = c.as_output();
    Launch::new(grid).run(|| kernel(&out)).unwrap();
    c.to_f32_vec().unwrap()
}

/// Stores `t` into row block `program_id(0)` of `out`.
fn store_block(out: &HbmOut<'_, f32>, t: &Tile) {
    let r = t.shape()[0];
    let i = nl::program_id(0) * r;
    nl::store(out.slice((i..i + r, ..)), &t.astype(DType::F32));
}

#[test]
fn rand_is_uniform_on_zero_one() {
    let v = per_instance(Grid::new([1]), 128, 512, |out| {
        store_block(out, &nl::rand(&[128, 512], DType::F32));
    });
    let n = v.len() as f64;
    assert!(v.iter().all(|&x| (0.0..1.0).contains(&x)));
    // Every value is a multiple of 2^-24 (float32 rand keeps 24 bits).
    assert!(v.iter().all(|&x| (x * (1u32 << 24) as f32).fract() == 0.0));
    let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
    let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
    // Mean within 5 standard errors of 1/2; variance near 1/12.
    assert!(
        (mean - 0.5).abs() < 5.0 * (1.0 / 12.0 / n).sqrt(),
        "mean {mean}"
    );
    assert!((var - 1.0 / 12.0).abs() < 0.002, "variance {var}");
    // Chi-square over 32 equal bins (31 degrees of freedom; 70 is far beyond p = 1e-4).
    let mut bins = [0f64; 32];
    v.iter().for_each(|&x| bins[(x * 32.0) as usize] += 1.0);
    let e = n / 32.0;
    let chi2: f64 = bins.iter().map(|&o| (o - e).powi(2) / e).sum();
    assert!(chi2 < 70.0, "chi-square {chi2}");
    // Neighbours are uncorrelated.
    let cov = v
        .windows(2)
        .map(|w| (w[0] as f64 - mean) * (w[1] as f64 - mean))
        .sum::<f64>()
        / (n - 1.0);
    assert!((cov / var).abs() < 0.02, "lag-1 correlation {}", cov / var);
}

#[test]
fn rand_in_narrow_dtypes_stays_below_one_on_the_dtype_grid() {
    for (dtype, bits) in [(DType::BF16, 8), (DType::F16, 11), (DType::F8E4M3, 4)] {
        let v = per_instance(Grid::new([1]), 128, 512, |out| {
            let t = nl::rand(&[128, 512], dtype);
            assert_eq!(t.dtype(), dtype);
            store_block(out, &t);
        });
        let scale = (1u32 << bits) as f32;
        assert!(v.iter().all(|&x| (0.0..1.0).contains(&x)), "{dtype}");
        assert!(v.iter().all(|&x| (x * scale).fract() == 0.0), "{dtype}");
        // All 2^bits grid values show up (65536 draws: 2^11 values are each missed with
        // probability e^-32).
        let mut seen = vec![false; 1 << bits];
        v.iter().for_each(|&x| seen[(x * scale) as usize] = true);
        assert!(seen.iter().all(|&s| s), "{dtype}");
    }
}

#[test]
fn launches_are_reproducible_and_instances_draw_distinct_streams() {
    let kernel = |out: &HbmOut<'_, f32>| {
        let a = nl::rand(&[16, 64], DType::F32);
        let b = nl::rand(&[16, 64], DType::F32);
        store_block(out, &nl::subtract(&a, &b));
    };
    let kernel2 = |out: &HbmOut<'_, f32>| store_block(out, &nl::rand(&[16, 64], DType::F32));
    let first = per_instance(Grid::new([4]), 16, 64, kernel2);
    let again = per_instance(Grid::new([4]), 16, 64, kernel2);
    assert_eq!(first, again, "same launch, same numbers");
    // The same program ids on two NeuronCores (other threads, other run order) draw the same.
    let on_two = per_instance(Grid::new([spmd_dim(nc(2), 2)]), 16, 64, kernel2);
    assert_eq!(first, on_two);
    // Simulate mode draws the same numbers as execute mode.
    let mut c = Hbm::<f32>::zeros([64, 64]);
    let out = c.as_output();
    Launch::new(4)
        .mode(Mode::Simulate)
        .run(|| kernel2(&out))
        .unwrap();
    assert_eq!(c.to_f32_vec().unwrap(), first);
    // Each instance has its own stream: no two blocks agree.
    let blocks: Vec<&[f32]> = first.chunks(16 * 64).collect();
    for i in 0..4 {
        for j in i + 1..4 {
            let same = blocks[i]
                .iter()
                .zip(blocks[j])
                .filter(|(a, b)| a == b)
                .count();
            assert!(same < 5, "blocks {i} and {j} share {same} values");
        }
    }
    // Successive draws differ: a - b is never all zero.
    let diff = per_instance(Grid::new([2]), 16, 64, kernel);
    assert!(diff.iter().filter(|&&d| d == 0.0).count() < 5);
}

#[test]
fn random_seed_replays_a_stream() {
    let v = per_instance(Grid::new([2]), 8, 128, |out| {
        nl::random_seed(42);
        let a = nl::rand(&[8, 32], DType::F32);
        let _skip = nl::rand(&[3, 7], DType::F32);
        nl::random_seed(42);
        let b = nl::rand(&[8, 32], DType::F32);
        nl::random_seed(43);
        let c = nl::rand(&[8, 32], DType::F32);
        // Re-seeding restarts the stream even in the middle of a tile's worth of numbers.
        nl::random_seed(42);
        let d = nl::rand(&[8, 32], DType::BF16);
        let t = nl::ndarray(&[8, 128], DType::F32, nl::SBUF);
        nl::assign(t.slice((.., 0..32)), &a);
        nl::assign(t.slice((.., 32..64)), &b);
        nl::assign(t.slice((.., 64..96)), &c);
        nl::assign(t.slice((.., 96..128)), &d.astype(DType::F32));
        store_block(out, &t);
    });
    for blk in v.chunks(8 * 128) {
        let col = |k: usize| -> Vec<f32> {
            blk.chunks(128)
                .flat_map(|r| r[k * 32..k * 32 + 32].to_vec())
                .collect()
        };
        let (a, b, c, d) = (col(0), col(1), col(2), col(3));
        assert_eq!(a, b, "same seed, same numbers");
        assert!(
            a.iter().zip(&c).filter(|(x, y)| x == y).count() < 3,
            "seed 43 differs"
        );
        // A bf16 draw keeps the top 8 of the same random bits: floor(a * 256) / 256.
        let trunc: Vec<f32> = a.iter().map(|x| (x * 256.0).floor() / 256.0).collect();
        assert_eq!(d, trunc);
    }
    // Instances seeded alike still draw different numbers.
    let (b0, b1) = v.split_at(8 * 128);
    assert!(b0.iter().zip(b1).filter(|(x, y)| x == y).count() < 5);
}

#[test]
fn rand_and_random_seed_records() {
    let report = Launch::new(1)
        .mode(Mode::Simulate)
        .run(|| {
            nl::random_seed(1);
            nl::rand(&[128, 40], DType::F32);
            nl::rand(&[128, 1000], DType::BF16);
        })
        .unwrap();
    let p = report.profile.unwrap();
    let spec = Target::default().spec();
    let rec: Vec<_> = p
        .ops
        .iter()
        .map(|o| (o.engine, o.opcode, o.api, o.free))
        .collect();
    assert_eq!(
        rec,
        vec![
            (Engine::Vector, Opcode::SetRngSeed, "nl.random_seed", 1),
            (Engine::Vector, Opcode::Rng, "nl.rand", 40),
            (Engine::Vector, Opcode::Rng, "nl.rand", 1000),
        ]
    );
    // max(MIN_II, N) VectorE cycles.
    for (k, n) in [(1u32, 40u64), (2, 1000)] {
        let span = p.spans.iter().find(|s| s.op == k).unwrap();
        let want = n.max(spec.min_ii) as f64 / spec.vector_ghz;
        assert!(
            (span.dur_ns - want).abs() < 1e-6,
            "{} vs {want}",
            span.dur_ns
        );
    }
}

#[test]
fn rand_rejects_integer_dtypes() {
    let _serial = line_guard();
    fails_once(
        || {
            next_line(line!());
            nl::rand(&[4, 4], DType::I32);
        },
        ErrorKind::DType,
        "rand",
        &["int32"],
    );
}

// ---------------------------------------------------------------------------------------------
// dropout

/// `x` values 1, 2, 3, ... (never zero) as a `[p, f]` tensor.
fn nonzero_input(p: usize, f: usize) -> (Hbm<f32>, Vec<f32>) {
    let v: Vec<f32> = (0..p * f).map(|k| 1.0 + (k % 997) as f32).collect();
    (Hbm::from_vec(&[p, f], v.clone()).unwrap(), v)
}

#[test]
fn dropout_zeroes_with_the_rate_and_keeps_values_unscaled() {
    let (p, f) = (128, 512);
    let (x, xs) = nonzero_input(p, f);
    for rate in [0.1f32, 0.3, 0.75] {
        let v = per_instance(Grid::new([1]), p, f, |out| {
            store_block(out, &nl::dropout(&nl::load(&x), rate));
        });
        let mut dropped = 0usize;
        for (got, want) in v.iter().zip(&xs) {
            if *got == 0.0 {
                dropped += 1;
            } else {
                assert_eq!(got, want, "kept values are not rescaled");
            }
        }
        let n = (p * f) as f64;
        let sd = (n * rate as f64 * (1.0 - rate as f64)).sqrt();
        assert!(
            (dropped as f64 - n * rate as f64).abs() < 5.0 * sd,
            "rate {rate}: dropped {dropped} of {n}"
        );
    }
    // Rate 0 keeps everything; rate 1 drops everything.
    let keep = per_instance(Grid::new([1]), p, f, |out| {
        store_block(out, &nl::dropout(&nl::load(&x), 0.0));
    });
    assert_eq!(keep, xs);
    let drop = per_instance(Grid::new([1]), p, f, |out| {
        store_block(out, &nl::dropout(&nl::load(&x), 1.0));
    });
    assert!(drop.iter().all(|&v| v == 0.0));
}

#[test]
fn dropout_drops_where_rand_would_draw_below_the_rate() {
    let (p, f) = (32, 200);
    let (x, xs) = nonzero_input(p, f);
    let r: Vec<f32> = (0..p).map(|k| k as f32 / (p - 1) as f32).collect();
    let rates = Hbm::<f32>::from_vec(&[p, 1], r.clone()).unwrap();
    // Block 0: the numbers; block 1: dropout with a scalar rate; block 2: per-partition rates.
    let v = per_instance(Grid::new([1]), 3 * p, f, |out| {
        let xt = nl::load(&x);
        let rt = nl::load(&rates);
        nl::random_seed(7);
        let u = nl::rand(&[p, f], DType::F32);
        nl::random_seed(7);
        let d1 = nl::dropout(&xt, 0.4);
        nl::random_seed(7);
        let d2 = nl::dropout(&xt, &rt);
        nl::store(out.slice((0..p, ..)), &u);
        nl::store(out.slice((p..2 * p, ..)), &d1);
        nl::store(out.slice((2 * p..3 * p, ..)), &d2);
    });
    let (u, rest) = v.split_at(p * f);
    let (d1, d2) = rest.split_at(p * f);
    for k in 0..p * f {
        let want1 = if u[k] < 0.4 { 0.0 } else { xs[k] };
        let want2 = if u[k] < r[k / f] { 0.0 } else { xs[k] };
        assert_eq!(d1[k], want1, "scalar rate, element {k}");
        assert_eq!(d2[k], want2, "rate tile, element {k}");
    }
    // Partition 0 (rate 0) keeps all; the last partition (rate 1) drops all.
    assert!(d2[..f].iter().all(|&v| v != 0.0));
    assert!(d2[(p - 1) * f..].iter().all(|&v| v == 0.0));
}

#[test]
fn dropout_keeps_the_input_dtype_and_checks_its_rate() {
    let _serial = line_guard();
    let report = Launch::new(1)
        .mode(Mode::Simulate)
        .run(|| {
            let x = nl::ones(&[64, 300], DType::BF16, nl::SBUF);
            let d = nl::dropout(&x, 0.5);
            assert_eq!(d.dtype(), DType::BF16);
        })
        .unwrap();
    let p = report.profile.unwrap();
    let op = p.ops.iter().find(|o| o.opcode == Opcode::Dropout).unwrap();
    assert_eq!(
        (op.engine, op.api, op.partitions, op.free),
        (Engine::Vector, "nl.dropout", 64, 300)
    );

    fails_once(
        || {
            let x = nl::ones(&[4, 8], DType::F32, nl::SBUF);
            next_line(line!());
            nl::dropout(&x, 1.5);
        },
        ErrorKind::InvalidArgument,
        "dropout",
        &["[0, 1]", "1.5"],
    );
    fails_once(
        || {
            let x = nl::ones(&[4, 8], DType::F32, nl::SBUF);
            let r = nl::zeros(&[4, 2], DType::F32, nl::SBUF);
            next_line(line!());
            nl::dropout(&x, &r);
        },
        ErrorKind::ShapeMismatch,
        "dropout",
        &["'rate'", "[4, 1]"],
    );
}

// ---------------------------------------------------------------------------------------------
// atomic_rmw

#[test]
fn overlapping_atomic_adds_from_all_instances_sum_up() {
    let (p, f) = (128, 64);
    let mut rng = Rng(5);
    let init: Vec<f32> = rng.int_f32s(p * f, -8, 8);
    let x: Vec<f32> = rng.int_f32s(p * f, -20, 20);
    let xh = common::hbm(&[p, f], x.clone());
    for grid in [Grid::new([8]), Grid::new([spmd_dim(nc(2), 4)])] {
        let mut c = common::hbm(&[p, f], init.clone());
        let out = c.as_output();
        Launch::new(grid.clone())
            .run(|| {
                let k = nl::program_id(0) as f32 + 1.0;
                let t = nl::multiply(&nl::load(&xh), k);
                // Every instance updates the whole output, and half of it twice.
                nl::atomic_rmw(&out, &t, AluOp::Add);
                nl::atomic_rmw(
                    out.slice((0..p / 2, ..)),
                    t.slice((0..p / 2, ..)),
                    AluOp::Add,
                );
            })
            .unwrap();
        // Small integers: every order of the adds gives the exact sum.
        let want: Vec<f32> = (0..p * f)
            .map(|e| {
                let times = if e / f < p / 2 { 2.0 } else { 1.0 };
                init[e] + times * x[e] * (1..=8).sum::<i32>() as f32
            })
            .collect();
        assert_eq!(c.to_f32_vec().unwrap(), want, "{grid:?}");
    }
}

#[test]
fn atomic_rmw_rounds_each_add_to_the_output_dtype() {
    // bf16 output 1.0 plus 2^-9 (a quarter of bf16's ulp at 1) twenty times: each add rounds
    // back to 1.0, while one add of 20 * 2^-9 would not.
    let mut c = Hbm::<bf16>::full([1, 4], bf16::from_f32(1.0));
    let out = c.as_output();
    Launch::new(20)
        .run(|| {
            let t = nl::full(&[1, 4], 2f32.powi(-9), DType::F32, nl::SBUF);
            nl::atomic_rmw(&out, &t, AluOp::Add);
        })
        .unwrap();
    let mut want = 1.0f32;
    for _ in 0..20 {
        want = bf16::from_f32(want + 2f32.powi(-9)).to_f32();
    }
    assert_eq!(c.to_f32_vec().unwrap(), vec![want; 4]);
    assert_eq!(want, 1.0);
}

#[test]
fn atomic_rmw_is_one_dma_and_works_in_estimate_mode() {
    let mut c = Hbm::<f32>::shape_only([256, 512]);
    let out = c.as_output();
    let report = Launch::new(2)
        .mode(Mode::Estimate)
        .run(|| {
            let t = nl::ones(&[128, 512], DType::F32, nl::SBUF);
            nl::atomic_rmw(out.slice((0..128, ..)), &t, AluOp::Add);
        })
        .unwrap();
    let p = report.profile.unwrap();
    let ops: Vec<_> = p.ops.iter().filter(|o| o.api == "nl.atomic_rmw").collect();
    assert_eq!(ops.len(), 2);
    for op in ops {
        assert_eq!((op.engine, op.opcode), (Engine::Dma, Opcode::DmaCopy));
        assert_eq!(
            (op.partitions, op.free, op.bytes),
            (128, 512, 128 * 512 * 4)
        );
    }
}

#[test]
fn atomic_rmw_rejects_other_operators_and_shapes() {
    let _serial = line_guard();
    let mut c = Hbm::<f32>::zeros([4, 8]);
    let out = c.as_output();
    fails_once(
        || {
            let t = nl::ones(&[4, 8], DType::F32, nl::SBUF);
            next_line(line!());
            nl::atomic_rmw(&out, &t, AluOp::Maximum);
        },
        ErrorKind::InvalidArgument,
        "atomic_rmw",
        &["only the add", "maximum"],
    );
    fails_once(
        || {
            let t = nl::ones(&[4, 4], DType::F32, nl::SBUF);
            next_line(line!());
            nl::atomic_rmw(&out, &t, AluOp::Add);
        },
        ErrorKind::ShapeMismatch,
        "atomic_rmw",
        &["different shapes"],
    );
    // A plain store racing with another instance's store is still an error.
    let e = Launch::new(2)
        .run(|| nl::store(&out, &nl::ones(&[4, 8], DType::F32, nl::SBUF)))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutputDependency);
}

// ---------------------------------------------------------------------------------------------
// costs from the table

#[test]
fn cost_table_entries_of_the_new_opcodes() {
    for t in [Target::Trn1, Target::Trn2] {
        let s = t.spec();
        let mk = |engine, opcode, free| {
            nki_core::Instr::with_cost(
                nki_core::CostFacts {
                    partitions: 128,
                    free,
                    in_dtype: DType::BF16,
                    out_dtype: DType::BF16,
                    ..nki_core::CostFacts::new(engine, opcode)
                },
                "test",
                nki_core::SourceLoc::caller(),
            )
        };
        for n in [1u32, 100, 4096] {
            let g = mk(Engine::GpSimd, Opcode::Gather, n);
            assert_eq!(cost::compute_cycles(s, &g), s.gpsimd_start + n as u64);
            for op in [Opcode::Rng, Opcode::Dropout, Opcode::SetRngSeed] {
                let r = mk(Engine::Vector, op, n);
                assert_eq!(
                    cost::compute_cycles(s, &r),
                    (n as u64).max(s.min_ii),
                    "{op:?}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// atomic_rmw in the HBM write tracking (atomic writers)

/// The launch modes the write tracking runs in, each on a tensor with or without values.
fn atomic_tracking_targets(shape: [usize; 2]) -> Vec<(Mode, Hbm<f32>)> {
    vec![
        (Mode::Execute, Hbm::<f32>::zeros(shape)),
        (Mode::Simulate, Hbm::<f32>::zeros(shape)),
        (Mode::Estimate, Hbm::<f32>::shape_only(shape)),
    ]
}

#[test]
fn atomic_tracking_overlapping_atomic_adds_of_two_instances_are_no_race() {
    // Whole rows (block tags), a partial row (element tags) and a strided column view, all
    // updated by both instances; then each instance stores its own distinct rows.
    let (p, f) = (4usize, 37usize);
    for (mode, mut c) in atomic_tracking_targets([p, f]) {
        let out = c.as_output();
        Launch::new(2)
            .mode(mode)
            .run(|| {
                let k = nl::program_id(0) as f32 + 1.0;
                let t = nl::full(&[p, f], k, DType::F32, nl::SBUF);
                nl::atomic_rmw(out.slice((0..2, ..)), t.slice((0..2, ..)), AluOp::Add);
                nl::atomic_rmw(out.slice((2..3, 3..20)), t.slice((0..1, 0..17)), AluOp::Add);
                let cols = stepped(1..f, 3);
                nl::atomic_rmw(out.slice((3..4, cols)), t.slice((0..1, 0..12)), AluOp::Add);
            })
            .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        if mode != Mode::Estimate {
            // Plain-loop reference: each updated element got 1 + 2.
            let mut want = vec![0f32; p * f];
            for (e, w) in want.iter_mut().enumerate() {
                let (r, j) = (e / f, e % f);
                let hit = r < 2 || (r == 2 && (3..20).contains(&j)) || (r == 3 && j % 3 == 1);
                *w = if hit { 3.0 } else { 0.0 };
            }
            assert_eq!(c.to_f32_vec().unwrap(), want, "{mode:?}");
        }
    }
}

/// Asserts `e` is the output-dependency error of a store and an atomic update naming both
/// writers (`a` and `b`, fragments of their descriptions).
fn assert_store_atomic_race(e: &NkiError, a: &str, b: &str, what: &str) {
    assert_eq!(e.kind(), ErrorKind::OutputDependency, "{what}: {e}");
    let m = e.message();
    assert!(m.contains("unexpected output dependencies"), "{what}: {e}");
    assert!(m.contains(a) && m.contains(b), "{what}: {e}");
    assert!(m.contains("(atomic_rmw)"), "{what}: {e}");
}

#[test]
fn atomic_tracking_store_and_atomic_add_of_two_instances_race() {
    // Either instance may run first: the error names both writers either way. Views: a whole
    // row (block tags) and a column (element tags) overlapping it in one element.
    let (p, f) = (4usize, 32usize);
    for (mode, mut c) in atomic_tracking_targets([p, f]) {
        for (store_view, atomic_view) in [
            ((1..2, 0..32), (1..2, 0..32)),
            ((1..2, 0..32), (0..4, 5..6)),
        ] {
            let out = c.as_output();
            let e = Launch::new(2)
                .mode(mode)
                .run(|| {
                    if nl::program_id(0) == 0 {
                        let t = nl::ones(&[1, 32], DType::F32, nl::SBUF);
                        nl::store(out.slice(store_view.clone()), &t);
                    } else {
                        let (r, cs) = atomic_view.clone();
                        let t = nl::ones(&[r.len(), cs.len()], DType::F32, nl::SBUF);
                        nl::atomic_rmw(out.slice((r, cs)), &t, AluOp::Add);
                    }
                })
                .unwrap_err();
            let what = format!("{mode:?} {store_view:?} {atomic_view:?}");
            assert_store_atomic_race(&e, "program id [0]", "program id [1]", &what);
            assert!(e.message().contains("element [1, "), "{what}: {e}");
        }
    }
}

#[test]
fn atomic_tracking_store_then_atomic_and_atomic_then_store_race_in_either_order() {
    // affine_range iterations of one instance run in order, so both orders are exercised
    // deterministically; the failing operation is the second write.
    let f = 48usize;
    for (mode, mut c) in atomic_tracking_targets([2, f]) {
        for store_first in [true, false] {
            let out = c.as_output();
            let e = Launch::new(1)
                .mode(mode)
                .run(|| {
                    let t = nl::ones(&[1, f], DType::F32, nl::SBUF);
                    for i in nl::affine_range(2) {
                        if (i == 0) == store_first {
                            nl::store(out.slice((1..2, ..)), &t);
                        } else {
                            nl::atomic_rmw(out.slice((1..2, ..)), &t, AluOp::Add);
                        }
                    }
                })
                .unwrap_err();
            let what = format!("{mode:?} store_first {store_first}");
            assert_store_atomic_race(&e, "iteration (0)", "iteration (1)", &what);
            let op = if store_first { "atomic_rmw" } else { "store" };
            assert!(e.op().contains(op), "{what}: {e}");
            assert!(e.message().contains("element [1, 0]"), "{what}: {e}");
        }
    }
}

#[test]
fn atomic_tracking_store_after_atomic_adds_of_several_writers_still_races() {
    // Iterations 0 and 1 both add atomically (allowed); iteration 1 then stores: that store
    // races with iteration 0's add, though not with its own (the element's last writer).
    // Conversely, writes ordered by a sequential_range are no race.
    let f = 40usize;
    for (mode, mut c) in atomic_tracking_targets([1, f]) {
        let out = c.as_output();
        let e = Launch::new(1)
            .mode(mode)
            .run(|| {
                let t = nl::ones(&[1, f], DType::F32, nl::SBUF);
                for i in nl::affine_range(2) {
                    nl::atomic_rmw(&out, &t, AluOp::Add);
                    if i == 1 {
                        nl::store(out.slice((.., 8..24)), t.slice((.., 0..16)));
                    }
                }
            })
            .unwrap_err();
        assert_store_atomic_race(&e, "iteration (0)", "iteration (1)", &format!("{mode:?}"));
        assert!(e.op().contains("store"), "{mode:?}: {e}");
        let out = c.as_output();
        Launch::new(1)
            .mode(mode)
            .run(|| {
                let t = nl::ones(&[1, f], DType::F32, nl::SBUF);
                for i in nl::sequential_range(3) {
                    if i == 1 {
                        nl::store(&out, &t);
                    } else {
                        nl::atomic_rmw(&out, &t, AluOp::Add);
                    }
                }
            })
            .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        if mode != Mode::Estimate {
            assert_eq!(c.to_f32_vec().unwrap(), vec![2.0; f], "{mode:?}");
        }
    }
}
