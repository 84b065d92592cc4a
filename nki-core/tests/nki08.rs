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

use nki_core::nisa::{NkiScalar, ScalarType};
use nki_core::nl::AluOp;
use nki_core::nl::{ForiOpts, TripCounts};
use nki_core::{Engine, Opcode};

/// The line of the first line of this file containing `needle`.
fn line_of(needle: &str) -> u32 {
    let src = include_str!("nki08.rs");
    src.lines().position(|l| l.contains(needle)).unwrap() as u32 + 1
}

/// `x + 10` when `flag > 0`, else `x * 2`: a branch on a condition the device computes
/// (NKI 0.8's `nl.if_else` documentation example).
#[nki_kernel(nki = "0.8")]
fn add_or_double(flag: &Hbm<i32>, x: &Hbm<f32>) -> Hbm<f32> {
    let out = nl::ndarray(x.shape(), DType::F32, nl::shared_hbm);
    let f = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
    nisa::dma_copy(&f, flag.view(), None);
    let t = nl::ndarray(x.shape(), DType::F32, nl::sbuf);
    nisa::dma_copy(&t, x.view(), None);
    let cond = nisa::scalar_load(&f).greater(0);
    nl::if_else(
        cond, // the if_else of add_or_double
        || nisa::tensor_scalar(&t, &t, AluOp::Add, 10.0, None),
        || nisa::tensor_scalar(&t, &t, AluOp::Multiply, 2.0, None),
    );
    nisa::dma_copy(out.view(), &t, None);
    out
}

fn x_128x64() -> (Hbm<f32>, Vec<f32>) {
    let v: Vec<f32> = (0..128 * 64).map(|k| (k % 97) as f32 - 40.0).collect();
    (Hbm::from_vec(&[128, 64], v.clone()).unwrap(), v)
}

#[test]
fn if_else_runs_the_branch_the_device_condition_selects_in_execute_and_simulate() {
    let (x, v) = x_128x64();
    for (flag, then) in [(5, true), (1, true), (0, false), (-3, false)] {
        let want: Vec<f32> = v
            .iter()
            .map(|a| if then { a + 10.0 } else { a * 2.0 })
            .collect();
        let f = Hbm::from_vec(&[1, 1], vec![flag]).unwrap();
        let (out, _) = add_or_double::launch(1, &f, &x).unwrap();
        assert_eq!(out.to_f32_vec().unwrap(), want, "flag {flag}");
        let r = add_or_double::run(Launch::new(1).mode(Mode::Simulate), &f, &x).unwrap();
        assert_eq!(r.0.to_f32_vec().unwrap(), want, "flag {flag}");
        let p = r.1.profile.unwrap();
        // One compare-and-branch on each of the four sequencers, each after the load of the
        // condition it reads.
        let branches: Vec<_> = p
            .ops
            .iter()
            .filter(|o| o.opcode == Opcode::Branch)
            .collect();
        assert_eq!(branches.len(), 4, "{p}");
        assert!(branches.iter().all(|b| b.api == "nl.if_else"));
        assert_eq!(branches[0].loc.line, line_of("cond, // the if_else of") - 1);
        let load = p
            .ops
            .iter()
            .position(|o| o.opcode == Opcode::ScalarLoad)
            .unwrap();
        let end_of = |op: usize| {
            p.spans
                .iter()
                .filter(|s| s.op as usize == op && s.cause.is_none())
                .map(|s| s.start_ns + s.dur_ns)
                .fold(0.0, f64::max)
        };
        for (i, o) in p.ops.iter().enumerate() {
            if o.opcode == Opcode::Branch {
                let start = p
                    .spans
                    .iter()
                    .filter(|s| s.op as usize == i && s.cause.is_none())
                    .map(|s| s.start_ns)
                    .fold(f64::INFINITY, f64::min);
                assert!(
                    start >= end_of(load),
                    "{o:?} starts before the condition's load"
                );
            }
        }
    }
    // A negative flag is non-zero: taken by a plain scalar condition.
}

/// `if_else` on the loaded value itself: any non-zero value (a negative one too) selects
/// `then_fn`; `if_then` has no else branch; a Rust `bool` resolves while tracing.
#[nki_kernel(nki = "0.8")]
fn nonzero_adds(flag: &Hbm<i32>, x: &Hbm<f32>, traced: bool) -> Hbm<f32> {
    let out = nl::ndarray(x.shape(), DType::F32, nl::shared_hbm);
    let f = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
    nisa::dma_copy(&f, flag.view(), None);
    let t = nl::ndarray(x.shape(), DType::F32, nl::sbuf);
    nisa::dma_copy(&t, x.view(), None);
    if traced {
        nl::if_then(true, || nisa::tensor_scalar(&t, &t, AluOp::Add, 1.0, None));
        nl::if_else(
            0,
            || {},
            || nisa::tensor_scalar(&t, &t, AluOp::Add, 1.0, None),
        );
    } else {
        nl::if_then(nisa::scalar_load(&f), || {
            nisa::tensor_scalar(&t, &t, AluOp::Add, 1.0, None)
        });
    }
    nisa::dma_copy(out.view(), &t, None);
    out
}

#[test]
fn a_negative_condition_is_true_and_a_rust_bool_emits_no_branch() {
    let (x, v) = x_128x64();
    let f = Hbm::from_vec(&[1, 1], vec![-7]).unwrap();
    // (traced, additions, branch records)
    for (traced, adds, branches) in [(false, 1.0, 4), (true, 2.0, 0)] {
        let r = nonzero_adds::run(Launch::new(1).mode(Mode::Simulate), &f, &x, traced).unwrap();
        let want: Vec<f32> = v.iter().map(|a| a + adds).collect();
        assert_eq!(r.0.to_f32_vec().unwrap(), want, "traced {traced}");
        let p = r.1.profile.unwrap();
        let n = p.ops.iter().filter(|o| o.opcode == Opcode::Branch).count();
        assert_eq!(n, branches, "traced {traced}");
    }
}

#[test]
fn estimate_needs_the_branch_taken_and_models_the_branch_given() {
    let line = line_of("cond, // the if_else of") - 1;
    let f = Hbm::<i32>::shape_only([1, 1]);
    let x = Hbm::<f32>::shape_only([128, 64]);
    let e = add_or_double::run(Launch::new(1).mode(Mode::Estimate), &f, &x).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoData, "{e}");
    assert_eq!(e.op(), "nl.if_else", "{e}");
    assert_eq!(e.location().unwrap().line, line, "{e}");
    assert!(e.message().contains("branch"), "{e}");
    let (xv, _) = x_128x64();
    for (taken, flag) in [(true, 1), (false, 0)] {
        let l = Launch::new(1)
            .mode(Mode::Estimate)
            .trip_counts(TripCounts::new().branch(line, taken));
        let est = add_or_double::run(l, &f, &x).unwrap().1.profile.unwrap();
        let fv = Hbm::from_vec(&[1, 1], vec![flag]).unwrap();
        let sim = add_or_double::run(Launch::new(1).mode(Mode::Simulate), &fv, &xv)
            .unwrap()
            .1
            .profile
            .unwrap();
        let ops = |p: &Profile| -> Vec<(Opcode, u32)> {
            p.ops.iter().map(|o| (o.opcode, o.loc.line)).collect()
        };
        assert_eq!(ops(&est), ops(&sim), "taken {taken}");
        assert!((est.latency_ns - sim.latency_ns).abs() < 1e-6 * sim.latency_ns);
    }
}

/// A condition bound to one engine, or an int64 one, cannot decide a branch.
#[nki_kernel(nki = "0.8")]
fn bad_condition(flag: &Hbm<i32>, which: u32) {
    let f = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
    nisa::dma_copy(&f, flag.view(), None);
    match which {
        0 => nl::if_then(nisa::scalar_load_on(&f, Engine::Vector), || {}),
        _ => nl::if_then(NkiScalar::from(1i64), || {}),
    }
}

#[test]
fn a_bound_or_64_bit_condition_is_an_error() {
    let f = Hbm::from_vec(&[1, 1], vec![1]).unwrap();
    let e = bad_condition::launch(1, &f, 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.message().contains("VectorE"), "{e}");
    assert_eq!(e.op(), "nl.if_else");
    let e = bad_condition::launch(1, &f, 1).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DType, "{e}");
    assert!(e.message().contains("int64"), "{e}");
}

/// Eight blocks of `x` copied out with `fori_loop`, rolled or unrolled.
#[nki_kernel(nki = "0.8")]
fn copy_blocks(x: &Hbm<f32>, out: &mut Hbm<f32>, unroll: Option<bool>) {
    let opts = match unroll {
        Some(u) => ForiOpts::new().unroll(u),
        None => ForiOpts::new(),
    };
    nl::fori_loop_with(0, 8, opts, |i| {
        let t = nl::ndarray(&[128, 64], DType::F32, nl::sbuf);
        nisa::dma_copy(&t, x.slice((.., 0..64)).scalar_offset(i * 64, 1), None);
        nisa::tensor_scalar(&t, &t, AluOp::Add, 1.0, None);
        nisa::dma_copy(out.slice((.., 0..64)).scalar_offset(i * 64, 1), &t, None);
    });
}

#[test]
fn an_unrolled_fori_loop_has_no_branches_and_no_iteration_barrier() {
    let v: Vec<f32> = (0..128 * 512).map(|k| (k % 31) as f32).collect();
    let x = Hbm::from_vec(&[128, 512], v.clone()).unwrap();
    let want: Vec<f32> = v.iter().map(|a| a + 1.0).collect();
    let mut lat = Vec::new();
    for unroll in [None, Some(false), Some(true)] {
        let mut out = Hbm::<f32>::zeros([128, 512]);
        let r =
            copy_blocks::run(Launch::new(1).mode(Mode::Simulate), &x, &mut out, unroll).unwrap();
        assert_eq!(out.to_f32_vec().unwrap(), want, "{unroll:?}");
        let p = r.profile.unwrap();
        let branches = p
            .ops
            .iter()
            .filter(|o| o.opcode == Opcode::LoopBranch)
            .count();
        if unroll == Some(true) {
            assert_eq!(branches, 0);
            assert!(p.device_loops.is_empty());
        } else {
            assert!(branches >= 8);
            assert_eq!(p.device_loops[0].iterations, 8);
        }
        lat.push(p.latency_ns);
    }
    assert_eq!(lat[0], lat[1]);
    // Eight ~9 µs iteration barriers fewer.
    assert!(lat[2] < lat[0] - 8.0 * 8000.0, "{lat:?}");
}

/// `fori_loop(.., unroll=True)` with a bound read at run time.
#[nki_kernel(nki = "0.8")]
fn unroll_dynamic(n: &Hbm<i32>) {
    let c = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
    nisa::dma_copy(&c, n.view(), None);
    let n = nisa::scalar_load(&c);
    nl::fori_loop_with(0, n, ForiOpts::new().unroll(true), |_| {});
}

#[test]
fn unrolling_a_loop_with_a_run_time_bound_is_an_error() {
    let n = Hbm::from_vec(&[1, 1], vec![3]).unwrap();
    let e = unroll_dynamic::launch(1, &n).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.message().contains("unroll=True"), "{e}");
}

// ---- nisa::scalar_alu ----

#[test]
fn scalar_alu_follows_the_documented_arithmetic() {
    let a = NkiScalar::from(-17);
    let cases = [
        (AluOp::Add, -13),
        (AluOp::Subtract, -21),
        (AluOp::Multiply, -68),
        (AluOp::Divide, -4),
        (AluOp::Fmod, -1),
        (AluOp::Maximum, 4),
        (AluOp::Minimum, -17),
        (AluOp::Less, 1),
        (AluOp::LessEqual, 1),
        (AluOp::Greater, 0),
        (AluOp::GreaterEqual, 0),
        (AluOp::Equal, 0),
        (AluOp::NotEqual, 1),
    ];
    for (op, want) in cases {
        let r = nisa::scalar_alu(a, 4, op);
        assert_eq!(r.value(), Some(want), "{op:?}");
        assert_eq!(r.dtype(), ScalarType::Int32, "{op:?}");
    }
    // Operators are the same call; int32 wraps.
    assert_eq!((a / 4).value(), Some(-4));
    assert_eq!((a % 4).value(), Some(-1));
    assert_eq!(
        (NkiScalar::from(i32::MAX) + 1).value(),
        Some(i64::from(i32::MIN))
    );
    // uint32: unsigned comparisons and wrapping; a comparison gives int32.
    let u = NkiScalar::from(3u32);
    assert_eq!((u - 4).value(), Some(i64::from(u32::MAX)));
    let c = (u - 4).greater(5);
    assert_eq!((c.value(), c.dtype()), (Some(1), ScalarType::Int32));
    // int64: + - * only, no wrapping at 32 bits.
    let w = NkiScalar::from(3_000_000_000i64);
    assert_eq!((w * 2).value(), Some(6_000_000_000));
    assert_eq!((w * 2).dtype(), ScalarType::Int64);
}

#[test]
fn scalar_alu_rejects_what_0_8_rejects() {
    let w = NkiScalar::from(5i64);
    for op in [AluOp::Divide, AluOp::Fmod, AluOp::Maximum, AluOp::Less] {
        let e = std::panic::catch_unwind(|| nisa::scalar_alu(w, 2, op)).unwrap_err();
        let msg = text(&e);
        assert!(msg.contains("int64"), "{op:?}: {msg}");
    }
    let e = std::panic::catch_unwind(|| NkiScalar::from(1) + NkiScalar::from(1u32)).unwrap_err();
    assert!(text(&e).contains("same width and signedness"));
    let e = std::panic::catch_unwind(|| NkiScalar::from(1u32) + (-1)).unwrap_err();
    assert!(text(&e).contains("does not fit"));
    let e = std::panic::catch_unwind(|| nisa::scalar_alu(1, 2, AluOp::BitwiseAnd)).unwrap_err();
    assert!(text(&e).contains("not a scalar operation"));
    let e = std::panic::catch_unwind(|| NkiScalar::from(1) / 0).unwrap_err();
    assert!(text(&e).contains("by zero"));
}

/// The message of a panic outside a kernel (an NKI error raised on the host).
fn text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// A comparison's 0/1 as a loop bound, a DMA offset and a stored value; a uint32 scalar
/// loaded and compared unsigned.
#[nki_kernel(nki = "0.8")]
fn compare_uses(a: &Hbm<i32>, u: &Hbm<u32>, x: &Hbm<f32>, out: &mut Hbm<f32>, res: &mut Hbm<i32>) {
    let at = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
    nisa::dma_copy(&at, a.view(), None);
    let ut = nl::ndarray(&[1, 1], DType::U32, nl::sbuf);
    nisa::dma_copy(&ut, u.view(), None);
    let av = nisa::scalar_load(&at);
    let uv = nisa::scalar_load(&ut);
    assert_eq!(uv.dtype(), ScalarType::Uint32);
    // 1 when a < 10: the loop runs once or never, and the row offset is 0 or 1.
    let small = av.less(10);
    let z = nl::zeros(&[1, 4], DType::F32, nl::sbuf);
    nisa::dma_copy(out.slice((0..1, ..)), &z, None);
    nl::fori_loop(0, small, |_| {
        let t = nl::ndarray(&[1, 4], DType::F32, nl::sbuf);
        nisa::dma_copy(&t, x.slice((0..1, ..)).scalar_offset(small, 0), None);
        nisa::dma_copy(out.slice((0..1, ..)), &t, None);
    });
    let r = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
    // uint32: 0xFFFF_FFF0 > 5 unsigned; divide toward zero; fmod; max; min.
    nisa::scalar_store(
        &r,
        uv.greater(5) * 10000 + (av / 3) * 100 + (av % 3) * 10 + av.maximum(0).minimum(1),
    );
    nisa::dma_copy(res.view(), &r, None);
}

#[test]
fn a_comparison_bounds_a_loop_offsets_a_dma_and_is_stored() {
    let x = Hbm::from_vec(&[2, 4], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]).unwrap();
    let u = Hbm::from_vec(&[1, 1], vec![0xFFFF_FFF0u32]).unwrap();
    for (a, row) in [
        (7, Some(vec![5.0f32, 6.0, 7.0, 8.0])),
        (-7, Some(vec![5.0, 6.0, 7.0, 8.0])),
        (20, None),
    ] {
        let av = Hbm::from_vec(&[1, 1], vec![a]).unwrap();
        for mode in [Mode::Execute, Mode::Simulate] {
            let mut out = Hbm::<f32>::zeros([1, 4]);
            let mut res = Hbm::<i32>::zeros([1, 1]);
            compare_uses::run(Launch::new(1).mode(mode), &av, &u, &x, &mut out, &mut res).unwrap();
            let want_row = row.clone().unwrap_or(vec![0.0; 4]);
            assert_eq!(out.to_f32_vec().unwrap(), want_row, "a {a} {mode:?}");
            let want = 10000 + (a / 3) * 100 + (a % 3) * 10 + a.clamp(0, 1);
            assert_eq!(res.to_vec().unwrap(), vec![want], "a {a} {mode:?}");
        }
    }
}

/// A scalar bound to VectorE, stored by it; a replicated store read by a DMA.
#[nki_kernel(nki = "0.8")]
fn bound_and_replicated(a: &Hbm<i32>, res: &mut Hbm<i32>, which: u32) {
    let at = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
    nisa::dma_copy(&at, a.view(), None);
    let r = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
    match which {
        0 => {
            let v = nisa::scalar_load_on(&at, Engine::Vector);
            assert_eq!(v.engine(), Some(Engine::Vector));
            nisa::scalar_store_on(&r, v + 1, Engine::Vector);
        }
        1 => nisa::scalar_store(&r, nisa::scalar_load(&at) + 1),
        2 => nisa::scalar_store(&r, nisa::scalar_load_on(&at, Engine::Vector)),
        3 => nisa::scalar_store_on(
            &r,
            nisa::scalar_load_on(&at, Engine::Vector),
            Engine::GpSimd,
        ),
        _ => {
            let v = nisa::scalar_load_on(&at, Engine::Vector);
            let w = nisa::scalar_load_on(&at, Engine::Scalar);
            nisa::scalar_store_on(&r, v + w, Engine::Vector);
        }
    }
    nisa::dma_copy(res.view(), &r, None);
}

#[test]
fn scalar_engines_bind_loads_and_replicate_stores() {
    let a = Hbm::from_vec(&[1, 1], vec![41]).unwrap();
    for which in [0, 1] {
        let mut res = Hbm::<i32>::zeros([1, 1]);
        let r = bound_and_replicated::run(Launch::new(1).mode(Mode::Simulate), &a, &mut res, which)
            .unwrap();
        assert_eq!(res.to_vec().unwrap(), vec![42]);
        let p = r.profile.unwrap();
        let engines = |op: Opcode| -> Vec<Engine> {
            p.ops
                .iter()
                .filter(|o| o.opcode == op)
                .map(|o| o.engine)
                .collect()
        };
        if which == 0 {
            assert_eq!(engines(Opcode::ScalarLoad), [Engine::Vector]);
            assert_eq!(engines(Opcode::ScalarStore), [Engine::Vector]);
        } else {
            assert_eq!(engines(Opcode::ScalarLoad), [Engine::Sync]);
            let mut e = engines(Opcode::ScalarStore);
            e.sort();
            assert_eq!(
                e,
                [Engine::Vector, Engine::Scalar, Engine::GpSimd, Engine::Sync]
            );
            // The DMA reading the tile starts after every one of the four stores ended.
            let span = |i: usize| {
                p.spans
                    .iter()
                    .find(|s| s.op as usize == i && s.cause.is_none())
                    .copied()
                    .unwrap()
            };
            let last_store = p
                .ops
                .iter()
                .enumerate()
                .filter(|(_, o)| o.opcode == Opcode::ScalarStore)
                .map(|(i, _)| span(i).start_ns + span(i).dur_ns)
                .fold(0.0, f64::max);
            let out_dma = p
                .ops
                .iter()
                .rposition(|o| o.opcode == Opcode::DmaCopy)
                .unwrap();
            assert!(span(out_dma).start_ns >= last_store);
        }
    }
    for (which, says) in [
        (2, "store it with engine"),
        (3, "cannot be stored by GpSimdE"),
        (4, "different engines"),
    ] {
        let mut res = Hbm::<i32>::zeros([1, 1]);
        let e = bound_and_replicated::launch(1, &a, &mut res, which).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.message().contains(says), "{which}: {e}");
    }
}

// ---- nki::lnc ----

/// Each core sends its `[128, 8]` block to the other through `nki::lnc` and keeps
/// `which`'s result: 0 the received block (`sendrecv`), 1 `src + peer`, 2 `max(src, peer)`
/// (`sendrecv_compute`), then a `core_barrier` before storing.
#[nki_kernel(nki = "0.8")]
fn lnc_exchange(x: &Hbm<f32>, which: u32, priority: Option<u8>) -> Hbm<f32> {
    let out = nl::ndarray(x.shape(), DType::F32, nl::shared_hbm);
    let me = nl::program_id(0);
    let mine = nl::ndarray(&[128, 8], DType::F32, nl::sbuf);
    nisa::dma_copy(&mine, x.slice((.., me * 8..me * 8 + 8)), None);
    let got = nl::ndarray(&[128, 8], DType::F32, nl::sbuf);
    let o = 1 - me;
    match which {
        0 => {
            let opts = priority.map(|p| nki_core::lnc::SendRecvOpts::new().priority(p));
            nki_core::lnc::sendrecv(&mine, &got, o, o, opts)
        }
        1 => nki_core::lnc::sendrecv_compute(&mine, &got, o, o, AluOp::Add, priority),
        2 => nki_core::lnc::sendrecv_compute(&mine, &got, o, o, AluOp::Maximum, priority),
        _ => nki_core::lnc::sendrecv_compute(&mine, &got, o, o, AluOp::Multiply, priority),
    }
    nisa::dma_copy(out.slice((.., me * 8..me * 8 + 8)), &got, None);
    nki_core::lnc::core_barrier(&out, None);
    out
}

#[test]
fn nki_lnc_exchanges_reduces_and_synchronises_the_two_cores() {
    let v: Vec<f32> = (0..128 * 16)
        .map(|k| ((k * 7) % 23) as f32 - 11.0)
        .collect();
    let x = Hbm::from_vec(&[128, 16], v.clone()).unwrap();
    let other = |p: usize, j: usize| v[p * 16 + (j + 8) % 16];
    for (which, f) in [
        (0u32, (|_: f32, b: f32| b) as fn(f32, f32) -> f32),
        (1, |a, b| a + b),
        (2, f32::max),
    ] {
        let want: Vec<f32> = (0..128 * 16)
            .map(|k| f(v[k], other(k / 16, k % 16)))
            .collect();
        for target in [Target::Trn2, Target::Trn3] {
            let (out, _) = lnc_exchange::run(
                Launch::new(2).target(target).mode(Mode::Simulate),
                &x,
                which,
                None,
            )
            .unwrap();
            assert_eq!(out.to_f32_vec().unwrap(), want, "{which} {target:?}");
        }
        // A priority: trn3 only.
        let l = Launch::new(2).target(Target::Trn3);
        lnc_exchange::run(l, &x, which, Some(3)).unwrap();
        let e =
            lnc_exchange::run(Launch::new(2).target(Target::Trn2), &x, which, Some(1)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.message().contains("trn3"), "{e}");
    }
    let e = lnc_exchange::run(Launch::new(2).target(Target::Trn3), &x, 0, Some(4)).unwrap_err();
    assert!(e.message().contains("0..=3"), "{e}");
    let e = lnc_exchange::launch(2, &x, 3, None).unwrap_err();
    assert_eq!(e.op(), "nki.lnc.sendrecv_compute", "{e}");
    assert!(e.message().contains("reduce_op"), "{e}");
}

/// `nki::lnc::core_barrier` alone.
#[nki_kernel(nki = "0.8")]
fn lnc_barrier(x: &Hbm<f32>) -> Hbm<f32> {
    let out = nl::ndarray(x.shape(), DType::F32, nl::shared_hbm);
    let t = nl::load(x.view());
    nl::store(out.view(), &t);
    nki_core::lnc::core_barrier(&out, None);
    out
}

#[test]
fn an_lnc_1_core_barrier_names_what_nki_rs_cannot_pair() {
    let x = Hbm::from_vec(&[4, 4], vec![1.0f32; 16]).unwrap();
    let e = lnc_barrier::launch(1, &x).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidGrid, "{e}");
    assert_eq!(e.op(), "nki.lnc.core_barrier", "{e}");
    assert!(e.message().contains("LNC=1"), "{e}");
}

/// Both devices of a mesh launch fill a tile; device 0 then works on it 20 times; with
/// `barrier`, both meet at `nki::lnc::core_barrier` (`which_calls`: 2 both, 0 only device 0)
/// before a last instruction.
fn stack_kernel(barrier: bool, both: bool) {
    let t = nl::ndarray(&[128, 512], DType::F32, nl::sbuf);
    nisa::memset(&t, 1.0, None);
    let me = nki_core::mesh::device_id();
    if me == 0 {
        for _ in 0..20 {
            nisa::tensor_scalar(&t, &t, AluOp::Add, 1.0, None);
        }
    }
    if barrier && (both || me == 0) {
        nki_core::lnc::core_barrier(&t, None); // the LNC=1 barrier
    }
    nisa::tensor_scalar(&t, &t, AluOp::Multiply, 2.0, None);
}

#[test]
fn an_lnc_1_core_barrier_meets_the_other_core_of_the_hbm_stack() {
    use nki_core::mesh::{Mesh, MeshLaunch};
    let two = Mesh::new([2], ["x"]).unwrap();
    let on = |m: &Mesh, target: Target, lnc: Option<u8>, barrier: bool, both: bool| {
        let mut l = MeshLaunch::new(m).target(target).mode(Mode::Simulate);
        if let Some(n) = lnc {
            l = l.lnc(n);
        }
        l.run(|| stack_kernel(barrier, both))
    };
    for target in [Target::Trn2, Target::Trn3] {
        // Device 1 waits at the barrier for device 0's work: it ends after device 0 (the
        // signal's latency later); without the barrier it ends long before.
        let with = on(&two, target, Some(1), true, true).unwrap();
        let without = on(&two, target, Some(1), false, true).unwrap();
        let (w0, w1) = (without.devices[0].end_ns, without.devices[1].end_ns);
        assert!(w1 < w0, "{target:?}: {w0} {w1}");
        let (b0, b1) = (with.devices[0].end_ns, with.devices[1].end_ns);
        assert!(b1 > b0 && b1 > w0, "{target:?}: {b0} {b1} (without: {w0})");
        assert!(with.devices[1].wait_ns > 0.5 * (w0 - w1), "{target:?}");
        // A barrier the other core never reaches is a deadlock.
        let e = on(&two, target, Some(1), true, false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Deadlock, "{e}");
        // At the default LNC=2 a device is a logical NeuronCore of both cores: nothing to
        // meet at LNC=1 (the error says how to launch it).
        let e = on(&two, target, None, true, true).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidGrid, "{e}");
        assert!(e.message().contains("MeshLaunch::lnc(1)"), "{e}");
        // One device alone has no partner on its stack.
        let one = Mesh::new([1], ["x"]).unwrap();
        let e = on(&one, target, Some(1), true, true).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidGrid, "{e}");
        assert!(e.message().contains("HBM stack"), "{e}");
        assert_eq!(e.location().unwrap().line, line_of("// the LNC=1 barrier"));
    }
    // trn1's cores each have their own stack: LNC=1 only, and no barrier partner.
    let e = on(&two, Target::Trn1, Some(2), false, true).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidGrid, "{e}");
    let e = on(&two, Target::Trn1, Some(1), true, true).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidGrid, "{e}");
    let e = on(&two, Target::Trn2, Some(3), false, true).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidGrid, "{e}");
}

// ---- nki.collectives ----

#[test]
fn self_index_in_replica_group_is_the_device_position_in_its_group() {
    use nki_core::mesh::names::{self as cc, ReplicaGroup};
    use nki_core::mesh::{Mesh, MeshLaunch};
    let m = Mesh::new([4], ["x"]).unwrap();
    // Groups {3, 1} and {0, 2}: device 3 is index 0, device 1 index 1, ...
    let g = ReplicaGroup::new(&m, vec![vec![3, 1], vec![0, 2]]).unwrap();
    let seen = std::sync::Mutex::new(Vec::new());
    MeshLaunch::new(&m)
        .run(|| {
            let i = cc::self_index_in_replica_group(&g);
            seen.lock().unwrap().push((cc::rank_id(), i));
        })
        .unwrap();
    let mut seen = seen.into_inner().unwrap();
    seen.sort_unstable();
    assert_eq!(seen, vec![(0, 0), (1, 1), (2, 1), (3, 0)]);
    let partial = ReplicaGroup::new(&m, vec![vec![0, 1]]).unwrap();
    let e = MeshLaunch::new(&m)
        .run(|| {
            cc::self_index_in_replica_group(&partial);
        })
        .unwrap_err();
    assert_eq!(e.op(), "nki.collectives.self_index_in_replica_group", "{e}");
    assert!(e.message().contains("in no group"), "{e}");
}

// ---- activation / activate2 on GpSimdE ----

/// `exp(x)` by `activation` (and `activate2` on trn3) on `engine`; `psum` puts the source in
/// PSUM.
#[nki_kernel(nki = "0.8")]
fn act_on(x: &Hbm<f32>, engine: Engine, two: bool, psum: bool) -> Hbm<f32> {
    let out = nl::ndarray(x.shape(), DType::F32, nl::shared_hbm);
    let t = nl::ndarray(x.shape(), DType::F32, nl::sbuf);
    nisa::dma_copy(&t, x.view(), None);
    let src = nl::ndarray(
        x.shape(),
        DType::F32,
        if psum { nl::psum } else { nl::sbuf },
    );
    nisa::tensor_copy(&src, &t, None);
    let y = nl::ndarray(x.shape(), DType::F32, nl::sbuf);
    if two {
        let args = nisa::Activate2Opts::new().engine(engine);
        nisa::activate2(
            &y,
            nl::ActFn::Exp,
            &src,
            1.0,
            0.0,
            AluOp::Multiply,
            AluOp::Add,
            args,
        );
    } else {
        let args = nisa::ActivationOpts::new().engine(engine);
        nisa::activation(&y, nl::ActFn::Exp, &src, args);
    }
    nisa::dma_copy(out.view(), &y, None);
    out
}

#[test]
fn activation_runs_on_gpsimd_from_trn2_and_activate2_on_trn3() {
    let v: Vec<f32> = (0..128 * 8).map(|k| (k % 13) as f32 * 0.1 - 0.6).collect();
    let x = Hbm::from_vec(&[128, 8], v).unwrap();
    for (two, target) in [
        (false, Target::Trn2),
        (false, Target::Trn3),
        (true, Target::Trn3),
    ] {
        let run = |e: Engine| {
            let l = Launch::new(1).target(target).mode(Mode::Simulate);
            act_on::run(l, &x, e, two, false).unwrap()
        };
        let (scalar, rs) = run(Engine::Scalar);
        let (gpsimd, rg) = run(Engine::GpSimd);
        assert_eq!(gpsimd.to_f32_vec().unwrap(), scalar.to_f32_vec().unwrap());
        let engine_of = |p: &Profile| {
            p.ops
                .iter()
                .find(|o| o.opcode == Opcode::Activation)
                .unwrap()
                .engine
        };
        assert_eq!(engine_of(rs.profile.as_ref().unwrap()), Engine::Scalar);
        assert_eq!(engine_of(rg.profile.as_ref().unwrap()), Engine::GpSimd);
    }
    let l = |t: Target| Launch::new(1).target(t);
    let e = act_on::run(l(Target::Trn1), &x, Engine::GpSimd, false, false).unwrap_err();
    assert!(e.message().contains("GpSimdE from Trn2"), "{e}");
    let e = act_on::run(l(Target::Trn2), &x, Engine::GpSimd, false, true).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WrongMemory, "{e}");
    let e = act_on::run(l(Target::Trn2), &x, Engine::Vector, false, false).unwrap_err();
    assert!(e.message().contains("ScalarE or GpSimdE"), "{e}");
}

/// Row blocks of `x` copied into the kernel's own output at offsets a device loop computes:
/// `scalar_offset` on an HBM tensor the kernel allocated.
#[nki_kernel(nki = "0.8")]
fn offset_own_output(x: &Hbm<f32>, on_chip: bool) -> Hbm<f32> {
    let out = nl::ndarray(x.shape(), DType::F32, nl::shared_hbm);
    nl::fori_loop(0, 4, |i| {
        let t = nl::ndarray(&[32, 8], DType::F32, nl::sbuf);
        nisa::dma_copy(&t, x.slice((0..32, ..)).scalar_offset(i * 32, 0), None);
        if on_chip {
            let _ = t.slice((.., ..)).scalar_offset(i, 1);
        }
        nisa::dma_copy(out.slice((0..32, ..)).scalar_offset(i * 32, 0), &t, None);
    });
    out
}

#[test]
fn a_kernel_allocated_hbm_tensor_takes_a_scalar_offset() {
    let v: Vec<f32> = (0..128 * 8).map(|k| k as f32).collect();
    let x = Hbm::from_vec(&[128, 8], v.clone()).unwrap();
    let (out, _) = offset_own_output::launch(1, &x, false).unwrap();
    assert_eq!(out.to_f32_vec().unwrap(), v);
    let e = offset_own_output::launch(1, &x, true).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WrongMemory, "{e}");
}

use nki_core::nisa::{ApTerm, DmaOpts, OobMode};

/// Dynamic access patterns (NKI 0.8): rows `first..first + n` of `x` (`n` read at run time, a
/// partial last tile of at most 128 rows) copied to the same rows of the output through a
/// `[128, 64]` tile (`which` 0), or every `s`-th row (`s` read at run time: rows `0, s, 2s,
/// 3s`) into rows 0..4 (`which` 1). `skip`: `oob_mode=skip` on the load.
#[nki_kernel(nki = "0.8")]
fn dynamic_rows(n: &Hbm<i32>, x: &Hbm<f32>, first: usize, which: u32, skip: bool) -> Hbm<f32> {
    let out = nl::ndarray(x.shape(), DType::F32, nl::shared_hbm);
    let (h, w) = (x.shape()[0], x.shape()[1]);
    let t = nl::zeros(&[128, w], DType::F32, nl::sbuf);
    for r in (0..h).step_by(128) {
        let k = (h - r).min(128);
        nisa::dma_copy(out.slice((r..r + k, ..)), t.slice((0..k, ..)), None);
    }
    let n_t = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
    nisa::dma_copy(&n_t, n.view(), None);
    let v = nisa::scalar_load(&n_t);
    let opts = skip.then(|| DmaOpts::new().oob_mode(OobMode::Skip));
    if which == 0 {
        let rows = [[w.into(), ApTerm::count(v, 128)], [1.into(), w.into()]];
        let src = x.view().ap_dynamic(&rows, first * w); // the count's pattern
        nisa::dma_copy(&t, src, opts); // the dynamic load
        let dst = out.view().ap_dynamic(&rows, first * w);
        nisa::dma_copy(dst, &t, None); // the dynamic store
    } else {
        let every = [[(v * w as i32).into(), 4.into()], [1.into(), w.into()]];
        let src = x.view().ap_dynamic(&every, 0); // the stride's pattern
        let t4 = t.slice((0..4, ..));
        nisa::dma_copy(&t4, src, opts); // the strided load
        nisa::dma_copy(out.slice((0..4, ..)), &t4, None);
    }
    out
}

fn x_300x16() -> (Hbm<f32>, Vec<f32>) {
    let v: Vec<f32> = (0..300 * 16).map(|k| k as f32).collect();
    (Hbm::from_vec(&[300, 16], v.clone()).unwrap(), v)
}

fn one(v: i32) -> Hbm<i32> {
    Hbm::from_vec(&[1, 1], vec![v]).unwrap()
}

#[test]
fn a_dynamic_count_moves_the_rows_read_at_run_time() {
    let (x, v) = x_300x16();
    for (first, n) in [(256, 44), (128, 128), (0, 1), (200, 0)] {
        let mut want = vec![0.0f32; 300 * 16];
        want[first * 16..(first + n) * 16].copy_from_slice(&v[first * 16..(first + n) * 16]);
        let (out, _) = dynamic_rows::launch(1, &one(n as i32), &x, first, 0, false).unwrap();
        assert_eq!(out.to_f32_vec().unwrap(), want, "first {first}, n {n}");
        let r = dynamic_rows::run(
            Launch::new(1).mode(Mode::Simulate),
            &one(n as i32),
            &x,
            first,
            0,
            false,
        )
        .unwrap();
        assert_eq!(r.0.to_f32_vec().unwrap(), want, "first {first}, n {n}");
        // The dynamic load moves n rows (none for n = 0), and waits for the count's load.
        let p = r.1.profile.unwrap();
        let load_line = line_of("// the dynamic load");
        let (i, dma) = p
            .ops
            .iter()
            .enumerate()
            .find(|(_, o)| o.loc.line == load_line)
            .unwrap();
        assert_eq!(dma.bytes, (n * 16 * 4) as u64, "first {first}, n {n}");
        let scalar = p
            .ops
            .iter()
            .position(|o| o.opcode == Opcode::ScalarLoad)
            .unwrap();
        let span = |op: usize| {
            p.spans
                .iter()
                .filter(|s| s.op as usize == op && s.cause.is_none())
                .map(|s| (s.start_ns, s.start_ns + s.dur_ns))
                .fold((f64::INFINITY, 0.0f64), |a, b| (a.0.min(b.0), a.1.max(b.1)))
        };
        assert!(span(i).0 >= span(scalar).1, "the DMA waits for its count");
    }
}

#[test]
fn a_dynamic_stride_reads_rows_apart() {
    let (x, v) = x_300x16();
    for s in [0, 1, 7, 99] {
        let mut want = vec![0.0f32; 300 * 16];
        for r in 0..4 {
            want[r * 16..(r + 1) * 16].copy_from_slice(&v[r * s * 16..(r * s + 1) * 16]);
        }
        let (out, _) = dynamic_rows::launch(1, &one(s as i32), &x, 0, 1, false).unwrap();
        assert_eq!(out.to_f32_vec().unwrap(), want, "stride {s}");
    }
}

#[test]
fn a_dynamic_pattern_out_of_bounds_is_an_error_naming_the_value_and_lines() {
    let (x, _) = x_300x16();
    let cases = [
        (0, 200, "// the dynamic load", "200"), // count above its maximum
        (256, 45, "// the dynamic load", "45"), // past the tensor's last row
        (0, -1, "// the dynamic load", "-1"),   // negative count
        (0, 100, "// the strided load", "1600"), // row 300 of 300 (stride 100 * 16)
    ];
    for (first, n, line, value) in cases {
        let which = u32::from(line.contains("strided"));
        let e = dynamic_rows::launch(1, &one(n), &x, first, which, false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::OutOfBounds, "{e}");
        assert_eq!(e.op(), "nisa.dma_copy", "{e}");
        assert_eq!(e.location().unwrap().line, line_of(line), "{e}");
        let pattern_line = match which {
            0 => line_of("// the count's pattern"),
            _ => line_of("// the stride's pattern"),
        };
        assert!(e.message().contains(&format!("line {pattern_line}")), "{e}");
        assert!(e.message().contains(value), "{e}");
        assert!(e.message().contains("tensor x"), "{e}");
        if first == 0 && n == 200 {
            // oob_mode=skip skips the transfer: the store moves the zeros of the tile (its
            // count is out of bounds too, so it fails: a skip applies to the DMA it is given).
            let e = dynamic_rows::launch(1, &one(n), &x, first, which, true).unwrap_err();
            assert_eq!(e.location().unwrap().line, line_of("// the dynamic store"));
        }
    }
    // Skipped with oob_mode=skip: the strided load of a stride past the tensor leaves the
    // tile's zeros.
    let (out, _) = dynamic_rows::launch(1, &one(100), &x, 0, 1, true).unwrap();
    assert!(out.to_f32_vec().unwrap().iter().all(|&v| v == 0.0));
}

#[test]
fn estimate_needs_the_dynamic_values_and_models_those_given() {
    let line = line_of("// the count's pattern");
    let n = Hbm::<i32>::shape_only([1, 1]);
    let xs = Hbm::<f32>::shape_only([300, 512]);
    let e =
        dynamic_rows::run(Launch::new(1).mode(Mode::Estimate), &n, &xs, 256, 0, false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoData, "{e}");
    assert_eq!(e.location().unwrap().line, line, "{e}");
    assert!(e.message().contains(&format!("values({line}")), "{e}");
    let x = Hbm::from_vec(&[300, 512], (0..300 * 512).map(|k| k as f32).collect()).unwrap();
    let mut latencies = Vec::new();
    for count in [44, 128] {
        let first = 300 - count as usize;
        let l = Launch::new(1).mode(Mode::Estimate).trip_counts(
            TripCounts::new()
                .values(line, [count])
                .values(line_of("// the dynamic store") - 1, [count]),
        );
        let est = dynamic_rows::run(l, &n, &xs, first, 0, false)
            .unwrap()
            .1
            .profile
            .unwrap();
        let sim = dynamic_rows::run(
            Launch::new(1).mode(Mode::Simulate),
            &one(count as i32),
            &x,
            first,
            0,
            false,
        )
        .unwrap()
        .1
        .profile
        .unwrap();
        let ops = |p: &Profile| -> Vec<(Opcode, u32, u64)> {
            p.ops
                .iter()
                .map(|o| (o.opcode, o.loc.line, o.bytes))
                .collect()
        };
        assert_eq!(ops(&est), ops(&sim), "count {count}");
        assert!((est.latency_ns - sim.latency_ns).abs() < 1e-6 * sim.latency_ns);
        // The dynamic load's own time on its DMA queues.
        let load = est
            .ops
            .iter()
            .position(|o| o.loc.line == line_of("// the dynamic load"))
            .unwrap();
        let busy: f64 = est
            .spans
            .iter()
            .filter(|s| s.op as usize == load && s.cause.is_none())
            .map(|s| s.dur_ns)
            .sum();
        latencies.push(busy);
        // A value given out of bounds is the same error as in execute mode.
        let l = Launch::new(1)
            .mode(Mode::Estimate)
            .trip_counts(TripCounts::new().values(line, [count + 1]));
        let e = dynamic_rows::run(l, &n, &xs, first, 0, false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::OutOfBounds, "{e}");
    }
    assert!(
        latencies[0] < latencies[1],
        "{latencies:?}: fewer rows, less DMA time"
    );
    assert!(latencies[0] > 0.0);
}

#[test]
fn a_dynamic_pattern_is_checked_when_traced() {
    let x = Hbm::from_vec(&[4, 4], vec![0.0f32; 16]).unwrap();
    let n = one(2);
    // A count read at run time without its maximum, a count in a stride's place, a view
    // with run-time counts read by something other than a DMA.
    for which in 0..3 {
        let r = Launch::new(1).run(|| {
            let t = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
            nisa::dma_copy(&t, n.view(), None);
            let s = nisa::scalar_load(&t);
            let pattern = match which {
                0 => [[4.into(), s.into()], [1.into(), 4.into()]],
                1 => [[ApTerm::count(s, 4), 4.into()], [1.into(), 4.into()]],
                _ => [[4.into(), ApTerm::count(s, 4)], [1.into(), 4.into()]],
            };
            let v = x.view().ap_dynamic(&pattern, 0);
            let _ = nl::load(v);
        });
        let e = r.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{which}: {e}");
    }
}

/// A tile grid copied tile by tile through SBUF (NKI 0.8's `NkiTileGrid` example), partial
/// tiles on both edges included.
#[nki_kernel(nki = "0.8")]
fn copy_tile_grid(src: &Hbm<f32>) -> Hbm<f32> {
    let tile_shape = [128, 48];
    let src_tiles = nl::tiles(src.view(), &tile_shape);
    let dst = nl::ndarray(src.shape(), DType::F32, nl::shared_hbm);
    let dst_tiles = nl::tiles(&dst, &tile_shape);
    for i in 0..src_tiles.shape()[0] {
        for j in 0..src_tiles.shape()[1] {
            let src_tile = src_tiles.get((i, j));
            let tile = nl::ndarray(&src_tile.element_shape(), DType::F32, nl::sbuf);
            nisa::dma_copy(&tile, src_tile.data(), None);
            nisa::dma_copy(dst_tiles.get((i, j)).data(), &tile, None);
        }
    }
    dst
}

#[test]
fn a_tile_grid_walks_a_tensor_in_tiles_with_clamped_edges() {
    let v: Vec<f32> = (0..300 * 100).map(|k| k as f32).collect();
    let x = Hbm::from_vec(&[300, 100], v.clone()).unwrap();
    let (out, report) = copy_tile_grid::launch(1, &x).unwrap();
    assert_eq!(out.to_f32_vec().unwrap(), v);
    // 3 x 3 tiles, two loads or stores each.
    let _ = report;
    Launch::new(1)
        .run(|| {
            let g = nl::tiles(x.view(), &[128, 48]);
            assert_eq!(g.shape(), [3, 3]);
            assert_eq!(g.tile_shape(), [128, 48]);
            assert_eq!(g.get((2, 2)).element_shape(), [44, 4]);
            assert!(g.get((2, 2)).is_remainder());
            assert!(!g.get((1, 1)).is_remainder());
            assert_eq!(g.at(1).shape(), [3]);
            assert_eq!(g.get((0..2, 1)).element_shape(), [256, 48]);
            assert_eq!(g.get((1..3, ..)).data().shape(), [172, 100]);
            // An untiled leading dimension is indexed one slab at a time.
            let h = nl::tiles(x.view().reshape(&[3, 100, 100]), &[64, 100]);
            assert_eq!(h.shape(), [3, 2, 1]);
            assert_eq!(h.get((1, 1, 0)).data().shape(), [36, 100]);
        })
        .unwrap();
    for bad in [0, 1] {
        let e = Launch::new(1)
            .run(|| {
                let g = nl::tiles(x.view(), &[128, 48]);
                match bad {
                    0 => drop(g.get((3, 0))),
                    _ => drop(nl::tiles(x.view(), &[0, 4])),
                }
            })
            .unwrap_err();
        let kind = [ErrorKind::OutOfBounds, ErrorKind::InvalidArgument][bad];
        assert_eq!(e.kind(), kind, "{e}");
    }
}

/// Rows of `x` doubled, streamed through `slots` SBUF slots of 128 rows (NKI 0.8's software
/// pipelining with stream buffers).
#[nki_kernel(nki = "0.8")]
fn stream_double(x: &Hbm<f32>, slots: usize) -> Hbm<f32> {
    let out = nl::ndarray(x.shape(), DType::F32, nl::shared_hbm);
    let w = x.shape()[1];
    let rows = nl::tiles(x.view(), &[128, w]);
    let outs = nl::tiles(&out, &[128, w]);
    let bufs = nl::alloc_stream_buffers(rows.clone(), nl::sbuf, 0, slots, None);
    for k in 0..bufs.num_steps() {
        let slot = bufs.get(k);
        nisa::dma_copy(&slot, rows.at(k).data(), None);
        nisa::tensor_scalar(&slot, &slot, AluOp::Multiply, 2.0, None);
        nisa::dma_copy(outs.at(k).data(), &slot, None);
    }
    out
}

#[test]
fn stream_buffers_rotate_slots_clamp_the_last_step_and_overlap_with_more_slots() {
    let v: Vec<f32> = (0..1000 * 512).map(|k| (k % 251) as f32).collect();
    let x = Hbm::from_vec(&[1000, 512], v.clone()).unwrap();
    let want: Vec<f32> = v.iter().map(|a| a * 2.0).collect();
    let mut latency = Vec::new();
    for slots in [1, 2, 3] {
        let (out, _) = stream_double::launch(1, &x, slots).unwrap();
        assert_eq!(out.to_f32_vec().unwrap(), want, "{slots} slots");
        let xs = Hbm::<f32>::shape_only([1000, 512]);
        let p = stream_double::run(Launch::new(1).mode(Mode::Estimate), &xs, slots)
            .unwrap()
            .1
            .profile
            .unwrap();
        latency.push(p.latency_ns);
    }
    // One slot serialises load, compute and store; two let the next load run beside them.
    assert!(latency[1] < 0.9 * latency[0], "{latency:?}");
    assert!(latency[2] <= latency[1] * 1.001, "{latency:?}");
    // Slot k % num_slots, clamped at the end; the checks.
    Launch::new(1)
        .run(|| {
            let g = nl::tiles(x.view(), &[128, 512]);
            let b = nl::alloc_stream_buffers(g, nl::sbuf, 0, 2, None);
            assert_eq!((b.num_slots(), b.num_steps()), (2, 8));
            assert_eq!(b.get(7).shape(), [104, 512]);
            assert_eq!(b.get(6).shape(), [128, 512]);
            let t = nl::ndarray(&[4, 3], DType::F32, nl::sbuf);
            let steps = nl::alloc_stream_buffers(&t, nl::sbuf, 1, 2, Some(DType::BF16));
            assert_eq!((steps.num_steps(), steps.get(2).shape()), (3, &[4, 1][..]));
            assert_eq!(steps.get(2).dtype(), DType::BF16);
        })
        .unwrap();
    for bad in 0..4 {
        let e = Launch::new(1)
            .run(|| {
                let g = nl::tiles(x.view(), &[128, 512]);
                match bad {
                    0 => drop(nl::alloc_stream_buffers(g, nl::sbuf, 0, 2, None).get(8)),
                    1 => drop(nl::alloc_stream_buffers(g, nl::sbuf, 0, 0, None)),
                    2 => drop(nl::alloc_stream_buffers(g, nl::sbuf, 2, 2, None)),
                    _ => drop(nl::alloc_stream_buffers(g, nl::shared_hbm, 0, 2, None)),
                }
            })
            .unwrap_err();
        let kind = [ErrorKind::OutOfBounds, ErrorKind::InvalidArgument][usize::from(bad > 0)];
        assert_eq!(e.kind(), kind, "{bad}: {e}");
    }
}

/// An int64 scalar loaded from the two words of a `[1, 2]` int32 tile, `v * 3 + 5` in 64 bits,
/// stored back the same way (`which` 1: loaded from a 1x1 tile, 2: stored into one).
#[nki_kernel(nki = "0.8")]
fn int64_words(x: &Hbm<i32>, which: u32) -> Hbm<i32> {
    let out = nl::ndarray(&[1, 2], DType::I32, nl::shared_hbm);
    let t = nl::ndarray(&[1, 2], DType::I32, nl::sbuf);
    nisa::dma_copy(&t, x.view(), None);
    let v = match which {
        1 => nisa::scalar_load_i64(t.slice((.., 0..1))),
        _ => nisa::scalar_load_i64(&t),
    };
    assert_eq!(v.dtype(), ScalarType::Int64);
    let r = v * 3 + 5;
    let o = nl::ndarray(&[1, 2], DType::I32, nl::sbuf);
    match which {
        2 => nisa::scalar_store(o.slice((.., 0..1)), r),
        _ => nisa::scalar_store(&o, r),
    }
    nisa::dma_copy(out.view(), &o, None);
    out
}

#[test]
fn an_int64_scalar_loads_from_and_stores_to_two_words() {
    let words = |v: i64| vec![v as u32 as i32, (v >> 32) as i32];
    for v in [7i64, -2, 1 << 40, -(3 << 33) + 11, i64::MAX / 3] {
        let x = Hbm::from_vec(&[1, 2], words(v)).unwrap();
        let (out, _) = int64_words::launch(1, &x, 0).unwrap();
        let want = v.wrapping_mul(3).wrapping_add(5);
        assert_eq!(out.to_vec().unwrap(), words(want), "{v}");
    }
    let x = Hbm::from_vec(&[1, 2], words(1)).unwrap();
    for which in [1, 2] {
        let e = int64_words::launch(1, &x, which).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch, "{e}");
        assert!(e.message().contains("[1, 2]"), "{e}");
    }
    // In estimate mode the load is one register load, as an int32 one.
    let p = int64_words::estimate(1, Target::Trn2, &Hbm::<i32>::shape_only([1, 2]), 0).unwrap();
    assert_eq!(
        p.1.ops
            .iter()
            .filter(|o| o.opcode == Opcode::ScalarLoad)
            .count(),
        1
    );
}

/// Two returned outputs, `a + b` and `a * s` (the execute-shaped entry's arrays).
#[nki_kernel(nki = "0.8")]
fn sum_and_scale(a: &Hbm<f32>, b: &Hbm<f32>, s: f32) -> (Hbm<f32>, Hbm<f32>) {
    let sum = nl::ndarray(a.shape(), DType::F32, nl::shared_hbm);
    let scaled = nl::ndarray(a.shape(), DType::F32, nl::shared_hbm);
    let (ta, tb) = (nl::load(a.view()), nl::load(b.view()));
    nl::store(sum.view(), &nl::add(&ta, &tb));
    nl::store(scaled.view(), &nl::multiply(&ta, s));
    (sum, scaled)
}

#[test]
fn execute_takes_arrays_and_gives_arrays() {
    use nki_core::ndarray::{Array2, ArrayD, IxDyn};
    let a = Array2::from_shape_fn((64, 32), |(i, j)| (i * 32 + j) as f32);
    let b = Array2::from_shape_fn((64, 32), |(i, j)| i as f32 - j as f32);
    let (sum, scaled) = sum_and_scale::execute(&a, &b.view(), 0.5).unwrap();
    assert_eq!(sum, (&a + &b).into_dyn());
    assert_eq!(scaled, a.mapv(|v| v * 0.5).into_dyn());
    // One returned output: an ArrayD; a kernel's own error comes back as the Err.
    let x = ArrayD::from_shape_vec(IxDyn(&[1, 2]), vec![5, 0]).unwrap();
    let y: ArrayD<i32> = int64_words::execute(&x, 0).unwrap();
    assert_eq!(y.as_slice().unwrap(), [20, 0]);
    let e = int64_words::execute(&x, 1).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch, "{e}");
}

#[test]
fn multi_rank_simulate_runs_each_rank_on_its_own_inputs() {
    use nki_core::mesh::names::{self as cc, ReduceOp, ReplicaGroup};
    use nki_core::mesh::{self, multi_rank_simulate, Mesh};
    use nki_core::ndarray::ArrayD;
    let m = Mesh::new([2, 2], ["x", "y"]).unwrap();
    let inputs: Vec<Vec<ArrayD<f32>>> = (0..4)
        .map(|r| {
            vec![ArrayD::from_shape_fn(vec![8, 4], |ix| {
                (r * 100 + ix[0] * 4 + ix[1]) as f32
            })]
        })
        .collect();
    let group = ReplicaGroup::all(&m);
    // Each rank: its input plus its device id, and the sum over the ranks.
    let (outs, report) = multi_rank_simulate(&m, Target::Trn2, &inputs, &[16, 4], |x, out| {
        let t = nl::load(x[0].view());
        let s = nl::ndarray(&[8, 4], DType::F32, MemKind::Sbuf);
        cc::all_reduce(&t, &s, ReduceOp::Add, &group);
        let own = nl::add(&t, mesh::device_id() as f32);
        nl::store(out.slice((0..8, ..)), &own);
        nl::store(out.slice((8..16, ..)), &s);
    })
    .unwrap();
    assert_eq!(outs.len(), 4);
    for (r, o) in outs.iter().enumerate() {
        for i in 0..8 {
            for j in 0..4 {
                let v = (i * 4 + j) as f32;
                assert_eq!(o[[i, j]], r as f32 * 100.0 + v + r as f32, "rank {r}");
                assert_eq!(o[[8 + i, j]], 4.0 * v + 600.0, "rank {r}");
            }
        }
    }
    assert!(report.latency_ns > 0.0);
    let e = multi_rank_simulate(&m, Target::Trn2, &inputs[..3], &[8, 4], |_, _| {}).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

#[test]
fn multi_rank_execute_gives_each_rank_its_output_arrays() {
    use nki_core::mesh::names::{self as cc, ReduceOp, ReplicaGroup};
    use nki_core::mesh::{self, multi_rank_execute, Mesh};
    use nki_core::ndarray::ArrayD;
    let m = Mesh::new([4], ["x"]).unwrap();
    let inputs: Vec<Vec<ArrayD<f32>>> = (0..4)
        .map(|r| {
            vec![
                ArrayD::from_shape_fn(vec![8, 4], |ix| (r * 10 + ix[0] + ix[1]) as f32),
                ArrayD::from_elem(vec![8, 4], r as f32),
            ]
        })
        .collect();
    let group = ReplicaGroup::all(&m);
    // Each rank: x * y + its device id, and the maximum of x over the ranks.
    let outs = multi_rank_execute(&m, Target::Trn2, &inputs, &[16, 4], |x, out| {
        let a = nl::load(x[0].view());
        let b = nl::load(x[1].view());
        let own = nl::add(&nl::multiply(&a, &b), mesh::device_id() as f32);
        let s = nl::ndarray(&[8, 4], DType::F32, MemKind::Sbuf);
        cc::all_reduce(&a, &s, ReduceOp::Max, &group);
        nl::store(out.slice((0..8, ..)), &own);
        nl::store(out.slice((8..16, ..)), &s);
    })
    .unwrap();
    assert_eq!(outs.len(), 4);
    for (r, o) in outs.iter().enumerate() {
        assert_eq!(o.shape(), &[16, 4]);
        for i in 0..8 {
            for j in 0..4 {
                let x = (r * 10 + i + j) as f32;
                assert_eq!(o[[i, j]], x * r as f32 + r as f32, "rank {r}");
                assert_eq!(o[[8 + i, j]], (30 + i + j) as f32, "rank {r}");
            }
        }
    }
    // Its errors name it: input sets that do not match the mesh, a kernel's error.
    let e = multi_rank_execute(&m, Target::Trn2, &inputs[..2], &[8, 4], |_, _| {}).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert_eq!(e.op(), "multi_rank_execute", "{e}");
    let e = multi_rank_execute(&m, Target::Trn2, &inputs, &[8, 4], |x, out| {
        let a = nl::load(x[0].view());
        nl::store(out.slice((0..4, ..)), &a); // rows 0..8 into 4 rows
    })
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch, "{e}");
}

/// Both sides of a device branch are compiled, so both are traced: `which` picks what the
/// side the launch does not take (`else_fn` when `flag > 0`) holds.
#[nki_kernel(nki = "0.8")]
fn two_sided(flag: &Hbm<i32>, x: &Hbm<f32>, which: u32) -> Hbm<f32> {
    let out = nl::ndarray(x.shape(), DType::F32, nl::shared_hbm);
    let f = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
    nisa::dma_copy(&f, flag.view(), None);
    let t = nl::ndarray(x.shape(), DType::F32, nl::sbuf);
    nisa::dma_copy(&t, x.view(), None);
    let u = nl::ndarray(x.shape(), DType::F32, nl::sbuf);
    let cond = nisa::scalar_load(&f).greater(0);
    nl::if_else(
        cond, // the if_else of two_sided
        || nisa::tensor_scalar(&t, &t, AluOp::Add, 10.0, None),
        || match which {
            // A shape the compiler rejects.
            0 => {
                let narrow = nl::ndarray(&[128, 32], DType::F32, nl::sbuf);
                nisa::tensor_tensor(&narrow, &t, &t, AluOp::Add, None); // the bad else
            }
            // The only write of `u`, which the kernel reads after the branch.
            1 => nisa::tensor_scalar(&u, &t, AluOp::Multiply, 2.0, None),
            // Work that must leave no trace in the branch taken: a large tile, a device
            // loop whose bound is read at run time (no trip count given), a write of `u`.
            2 => {
                let big = nl::ndarray(&[128, 16384], DType::F32, nl::sbuf);
                nisa::memset(&big, 0.0, None);
                nl::fori_loop(0, nisa::scalar_load(&f), |_| {
                    nisa::tensor_tensor(&t, &t, big.slice((.., 0..64)), AluOp::Add, None)
                });
                nisa::tensor_copy(&u, &t, None);
            }
            _ => {}
        },
    );
    if which == 1 {
        nisa::tensor_tensor(&t, &t, &u, AluOp::Add, None); // reads u
    }
    nisa::dma_copy(out.view(), &t, None);
    out
}

#[test]
fn both_sides_of_a_device_branch_are_checked_and_only_the_taken_one_runs() {
    let line = line_of("cond, // the if_else of two_sided") - 1;
    let (x, v) = x_128x64();
    let xs = Hbm::<f32>::shape_only([128, 64]);
    let fs = Hbm::<i32>::shape_only([1, 1]);
    let taken = |l: Launch| l.trip_counts(TripCounts::new().branch(line, true));
    // An error in the side not taken fails the launch in every mode, naming its line.
    let bad = line_of("// the bad else");
    let f1 = Hbm::from_vec(&[1, 1], vec![1]).unwrap();
    for mode in [Mode::Execute, Mode::Simulate, Mode::Estimate] {
        let e = match mode {
            Mode::Estimate => two_sided::run(taken(Launch::new(1).mode(mode)), &fs, &xs, 0),
            _ => two_sided::run(Launch::new(1).mode(mode), &f1, &x, 0),
        }
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch, "{mode:?}: {e}");
        assert_eq!(e.location().unwrap().line, bad, "{mode:?}: {e}");
    }
    // The untaken side's write of `u` is rolled back: reading `u` after the branch is an
    // uninitialised read whichever mode finds it.
    for mode in [Mode::Simulate, Mode::Estimate] {
        let e = match mode {
            Mode::Estimate => two_sided::run(taken(Launch::new(1).mode(mode)), &fs, &xs, 1),
            _ => two_sided::run(Launch::new(1).mode(mode), &f1, &x, 1),
        }
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UninitializedRead, "{mode:?}: {e}");
        assert_eq!(e.location().unwrap().line, line_of("// reads u"), "{e}");
    }
    // The side not taken leaves nothing in what runs: the values, the records, the modelled
    // time, the device loops and the memory peak are those of a kernel without it.
    let want: Vec<f32> = v.iter().map(|a| a + 10.0).collect();
    let sim = two_sided::run(Launch::new(1).mode(Mode::Simulate), &f1, &x, 2).unwrap();
    assert_eq!(sim.0.to_f32_vec().unwrap(), want);
    let plain = two_sided::run(Launch::new(1).mode(Mode::Simulate), &f1, &x, 3).unwrap();
    let ops = |p: &Profile| -> Vec<(Opcode, u32)> {
        p.ops.iter().map(|o| (o.opcode, o.loc.line)).collect()
    };
    for (with, without) in [
        (sim.1, plain.1),
        (
            two_sided::run(taken(Launch::new(1).mode(Mode::Estimate)), &fs, &xs, 2)
                .unwrap()
                .1,
            two_sided::run(taken(Launch::new(1).mode(Mode::Estimate)), &fs, &xs, 3)
                .unwrap()
                .1,
        ),
    ] {
        assert_eq!(with.memory, without.memory);
        let (a, b) = (with.profile.unwrap(), without.profile.unwrap());
        assert_eq!(ops(&a), ops(&b));
        assert!(a.device_loops.is_empty() && b.device_loops.is_empty());
        assert_eq!(a.latency_ns, b.latency_ns);
    }
}

/// The two cores exchange their halves when `flag` is non-zero, else meet at a barrier and
/// add them: the side not taken is traced on each core without meeting the other.
#[nki_kernel(nki = "0.8")]
fn lnc_branch(flag: &Hbm<i32>, x: &Hbm<f32>) -> Hbm<f32> {
    let out = nl::ndarray(x.shape(), DType::F32, nl::shared_hbm);
    let me = nl::program_id(0);
    let f = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
    nisa::dma_copy(&f, flag.view(), None);
    let mine = nl::ndarray(&[128, 8], DType::F32, nl::sbuf);
    nisa::dma_copy(&mine, x.slice((.., me * 8..me * 8 + 8)), None);
    let got = nl::ndarray(&[128, 8], DType::F32, nl::sbuf);
    let o = 1 - me;
    nl::if_else(
        nisa::scalar_load(&f), // the if_else of lnc_branch
        || nki_core::lnc::sendrecv(&mine, &got, o, o, None),
        || {
            nki_core::lnc::core_barrier(&mine, None);
            nki_core::lnc::sendrecv_compute(&mine, &got, o, o, AluOp::Add, None)
        },
    );
    nisa::dma_copy(out.slice((.., me * 8..me * 8 + 8)), &got, None);
    out
}

#[test]
fn the_side_not_taken_meets_no_other_core() {
    let v: Vec<f32> = (0..128 * 16).map(|k| (k % 13) as f32).collect();
    let x = Hbm::from_vec(&[128, 16], v.clone()).unwrap();
    let other = |k: usize| v[(k / 16) * 16 + (k % 16 + 8) % 16];
    for (flag, sum) in [(1, false), (0, true)] {
        let want: Vec<f32> = (0..v.len())
            .map(|k| if sum { v[k] + other(k) } else { other(k) })
            .collect();
        let f = Hbm::from_vec(&[1, 1], vec![flag]).unwrap();
        let l = Launch::new(2).target(Target::Trn2).mode(Mode::Simulate);
        let (out, r) = lnc_branch::run(l, &f, &x).unwrap();
        assert_eq!(out.to_f32_vec().unwrap(), want, "flag {flag}");
        // Only the taken side's synchronising calls are in the cores' streams: one wait per
        // exchange (and one more for the barrier).
        let waits = r
            .profile
            .unwrap()
            .ops
            .iter()
            .filter(|o| o.opcode == Opcode::CoreWait)
            .count();
        let line = line_of("// the if_else of lnc_branch") - 1;
        let l = Launch::new(2)
            .target(Target::Trn2)
            .mode(Mode::Estimate)
            .trip_counts(TripCounts::new().branch(line, flag != 0));
        let fs = Hbm::<i32>::shape_only([1, 1]);
        let xs = Hbm::<f32>::shape_only([128, 16]);
        let est = lnc_branch::run(l, &fs, &xs).unwrap().1.profile.unwrap();
        let est_waits = est
            .ops
            .iter()
            .filter(|o| o.opcode == Opcode::CoreWait)
            .count();
        assert_eq!(waits, est_waits, "flag {flag}");
        assert!(waits > 0);
    }
}

// ---- block grids, grid allocation, stream steps as grids ----

/// NKI's `copy_block_grid` example, blocks of 2 x 2 tiles over a source whose last blocks
/// and tiles are partial: each block's tiles moved through an SBUF grid `alloc_blocks`
/// allocated (one row of tiles per DMA), then stored block by block.
#[nki_kernel(nki = "0.8")]
fn copy_block_grid(src: &Hbm<f32>) -> Hbm<f32> {
    let (tile_shape, block_shape) = ([128, 96], [2, 2]);
    let src_blocks = nl::blocks(src.view(), &tile_shape, &block_shape);
    let dst = nl::ndarray(src.shape(), DType::F32, nl::shared_hbm);
    let dst_blocks = nl::blocks(&dst, &tile_shape, &block_shape);
    for i in 0..src_blocks.shape()[0] {
        for j in 0..src_blocks.shape()[1] {
            let src_block = src_blocks.get((i, j));
            let buf = nl::alloc_blocks(
                &tile_shape,
                &block_shape,
                &src_block.element_shape(),
                nl::sbuf,
                DType::F32,
            );
            let (from, to) = (src_block.tiles(), dst_blocks.get((i, j)).tiles());
            for r in 0..from.shape()[0] {
                let row = buf.tiles().at(r).data();
                nisa::dma_copy(&row, from.at(r).data(), None);
                nisa::dma_copy(to.at(r).data(), &row, None);
            }
        }
    }
    dst
}

#[test]
fn block_grids_group_tiles_and_alloc_tiles_lays_them_out() {
    let v: Vec<f32> = (0..300 * 400).map(|k| (k % 1009) as f32).collect();
    let x = Hbm::from_vec(&[300, 400], v.clone()).unwrap();
    let (out, _) = copy_block_grid::launch(1, &x).unwrap();
    assert_eq!(out.to_f32_vec().unwrap(), v);
    Launch::new(1)
        .run(|| {
            // 3 x 5 tiles of [128, 96] in blocks of 2 x 2: a 2 x 3 block grid.
            let b = nl::blocks(x.view(), &[128, 96], &[2, 2]);
            assert_eq!(
                (b.shape(), b.block_shape(), b.tile_shape()),
                (vec![2, 3], &[2, 2][..], &[128, 96][..])
            );
            assert_eq!(b.index_step_elements(), [256, 192]);
            let last = b.get((1, 2));
            assert_eq!(last.element_shape(), [44, 16]);
            assert!(last.is_remainder() && !b.get((0, 0)).is_remainder());
            assert_eq!(last.tiles().shape(), [1, 1]);
            assert_eq!(b.get((0, 1)).tiles().shape(), [2, 2]);
            assert_eq!(b.at(1).shape(), [3]);
            assert_eq!(b.get((0..2, 1)).data().shape(), [300, 192]);
            // Regrouping: a tile grid's selection in blocks, and a block grid's in others.
            let t = nl::tiles(x.view(), &[128, 96]);
            assert_eq!(t.get((.., 1..5)).blocks(&[3, 3]).shape(), [1, 2]);
            assert_eq!(b.blocks(&[1, 5]).shape(), [3, 1]);
            // An on-chip grid's row of tiles is one view; rows of tiles are not.
            let g = nl::alloc_tiles(&[128, 96], &[300, 400], nl::sbuf, DType::F32);
            assert_eq!(g.tensor().shape(), [128, 15 * 96]);
            assert_eq!(g.tiles().get((2, 4)).data().shape(), [44, 16]);
            assert_eq!(g.tiles().at(1).data().shape(), [128, 400]);
            assert_eq!(g.blocks().shape(), [3, 5]);
        })
        .unwrap();
    let e = Launch::new(1)
        .run(|| {
            let g = nl::alloc_tiles(&[128, 96], &[300, 400], nl::sbuf, DType::F32);
            let _ = g.tiles().get((0..2, 0)).data(); // two rows of tiles
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.message().contains("is_data_representable"), "{e}");
    for (k, kind) in [
        (0, ErrorKind::InvalidArgument),
        (1, ErrorKind::InvalidArgument),
        (2, ErrorKind::OutOfBounds),
        (3, ErrorKind::InvalidArgument),
    ] {
        let e = Launch::new(1)
            .run(|| match k {
                0 => drop(nl::blocks(x.view(), &[128, 96], &[2])),
                1 => drop(nl::blocks(x.view(), &[128, 96], &[2, 0])),
                2 => drop(nl::blocks(x.view(), &[128, 96], &[2, 2]).get((2, 0))),
                _ => drop(nl::alloc_tiles(&[128], &[300, 400], nl::sbuf, DType::F32)),
            })
            .unwrap_err();
        assert_eq!(e.kind(), kind, "{k}: {e}");
    }
}

#[test]
fn a_stream_step_of_several_tiles_is_a_tile_grid() {
    let v: Vec<f32> = (0..300 * 200).map(|k| k as f32).collect();
    let x = Hbm::from_vec(&[300, 200], v.clone()).unwrap();
    let mut y = Hbm::<f32>::zeros([300, 200]);
    let out = y.as_output();
    Launch::new(1)
        .mode(Mode::Simulate)
        .run(|| {
            // Rows of tiles: each step is a row of 3 tiles of [128, 80] (the step's row
            // coordinate consumed), the last ones clamped.
            let src = nl::tiles(x.view(), &[128, 80]);
            let dst = nl::tiles(out.view(), &[128, 80]);
            let bufs = nl::alloc_stream_buffers(src.clone(), nl::sbuf, 0, 2, None);
            for k in 0..bufs.num_steps() {
                let step = bufs.grid(k);
                assert_eq!(step.shape(), [3]);
                assert_eq!(step.element_shape(), src.at(k).element_shape());
                for j in 0..3 {
                    let t = step.at(j).data();
                    nisa::dma_copy(&t, src.get((k, j)).data(), None);
                    nisa::dma_copy(dst.get((k, j)).data(), &t, None);
                }
            }
            assert_eq!(bufs.grid(2).at(2).element_shape(), [44, 40]);
        })
        .unwrap();
    assert_eq!(y.to_vec().unwrap(), v);
    // A stream over a plain view has no tiles.
    let e = Launch::new(1)
        .run(|| {
            let plain =
                nl::alloc_stream_buffers(x.view().reshape(&[3, 100, 200]), nl::sbuf, 0, 2, None);
            let _ = plain.grid(0);
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.message().contains("not a tile grid"), "{e}");
}
