//! Device loops (`nl::fori_loop`, `nl::while_loop`) and `NkiScalar`: data-dependent trip
//! counts in every mode (estimate needs trip counts or fails naming the loop), a while loop
//! whose condition the device changes, one buffer per body allocation, iterations ordered for
//! the race checks, scalar arithmetic and dynamic DMA offsets, and the profile's loop rows.

// The 0.7 entries NKI 0.8 deprecated (nisa LNC calls, virtual registers) stay provided and
// tested here unchanged.
#![allow(deprecated)]

use nki_core::nisa::NkiScalar;
use nki_core::nl::TripCounts;
use nki_core::prelude::*;

const FILE: &str = file!();

/// `out = sum over i < count of x[:, 8i .. 8i + 8]`, `count` read on the device: one
/// `fori_loop` whose trip count is data.
#[nki_kernel]
fn sum_blocks(count: &Hbm<i32>, x: &Hbm<f32>, out: &mut Hbm<f32>) {
    let c = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
    nisa::dma_copy(&c, count.view(), None);
    let n = nisa::scalar_load(&c);
    let acc = nl::zeros(&[128, 8], DType::F32, nl::sbuf);
    nl::fori_loop(0, n, |i| {
        let blk = nl::ndarray(&[128, 8], DType::F32, nl::sbuf);
        nisa::dma_copy(&blk, x.slice((.., 0..8)).scalar_offset(i * 8, 1), None);
        nisa::tensor_tensor(&acc, &acc, &blk, nl::AluOp::Add, None);
    });
    nl::store(out.slice((.., ..)), &acc);
}

/// The line of the `fori_loop` of `sum_blocks`.
fn sum_blocks_loop_line() -> u32 {
    let src = include_str!("device_loops.rs");
    let at = src
        .lines()
        .position(|l| l.contains("nl::fori_loop(0, n, |i|"))
        .unwrap();
    at as u32 + 1
}

fn blocks_input(count: i32) -> (Hbm<i32>, Hbm<f32>, Vec<f32>) {
    let x: Vec<f32> = (0..128 * 64).map(|k| ((k * 7) % 13) as f32).collect();
    let mut want = vec![0.0f32; 128 * 8];
    for p in 0..128 {
        for j in 0..8 {
            for i in 0..count as usize {
                want[p * 8 + j] += x[p * 64 + 8 * i + j];
            }
        }
    }
    let c = Hbm::from_vec(&[1, 1], vec![count]).unwrap();
    (c, Hbm::from_vec(&[128, 64], x).unwrap(), want)
}

#[test]
fn a_data_dependent_trip_count_runs_on_the_values_in_execute_and_simulate() {
    for count in [0, 1, 5, 8] {
        let (c, x, want) = blocks_input(count);
        let mut out = Hbm::<f32>::zeros([128, 8]);
        launch!(sum_blocks[1](&c, &x, &mut out)).unwrap();
        assert_eq!(out.to_f32_vec().unwrap(), want, "count {count}");
        let mut out2 = Hbm::<f32>::zeros([128, 8]);
        let p = sum_blocks::simulate(1, Target::Trn2, &c, &x, &mut out2).unwrap();
        assert_eq!(out2.to_f32_vec().unwrap(), want, "count {count}");
        let l = &p.device_loops;
        assert_eq!(l.len(), 1, "{p}");
        assert_eq!(l[0].iterations, count as u64);
        assert_eq!(l[0].api, "nl.fori_loop");
        assert_eq!(l[0].loc.line, sum_blocks_loop_line());
        if count > 0 {
            assert!(l[0].ns_per_iteration > 0.0, "{:?}", l[0]);
            // The iteration boundary's scheduling barrier: ~9 µs on trn2 (the iteration's
            // load is read in the iteration: not software-pipelined).
            let o = l[0].overhead_ns_per_iteration;
            assert!((o - 9000.0).abs() < 1.0, "overhead {o}");
            assert!(p.to_string().contains("device loop nl.fori_loop"), "{p}");
        }
    }
}

#[test]
fn more_iterations_take_longer_in_simulate_and_estimate_alike() {
    let mut sim = Vec::new();
    for count in [2, 6] {
        let (c, x, _) = blocks_input(count);
        let mut out = Hbm::<f32>::zeros([128, 8]);
        sim.push(sum_blocks::simulate(1, Target::Trn2, &c, &x, &mut out).unwrap());
    }
    assert!(sim[1].latency_ns > sim[0].latency_ns);
    // Estimate mode given the same trip counts models the same timeline.
    for (k, count) in [2u64, 6].into_iter().enumerate() {
        let c = Hbm::<i32>::shape_only([1, 1]);
        let x = Hbm::<f32>::shape_only([128, 64]);
        let mut out = Hbm::<f32>::shape_only([128, 8]);
        let l = Launch::new(1)
            .mode(Mode::Estimate)
            .trip_counts(TripCounts::new().line(sum_blocks_loop_line(), count));
        let r = sum_blocks::run(l, &c, &x, &mut out).unwrap();
        let est = r.profile.unwrap();
        assert_eq!(est.device_loops[0].iterations, count);
        assert_eq!(est.instructions, sim[k].instructions, "count {count}");
        let rel = (est.latency_ns - sim[k].latency_ns).abs() / sim[k].latency_ns;
        assert!(
            rel < 0.05,
            "estimate {} vs simulate {}",
            est.latency_ns,
            sim[k].latency_ns
        );
    }
}

#[test]
fn estimate_without_a_trip_count_is_a_clear_error_naming_the_loop() {
    let c = Hbm::<i32>::shape_only([1, 1]);
    let x = Hbm::<f32>::shape_only([128, 64]);
    let mut out = Hbm::<f32>::shape_only([128, 8]);
    let e = sum_blocks::estimate(1, Target::Trn2, &c, &x, &mut out).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoData, "{e}");
    assert_eq!(e.op(), "nl.fori_loop", "{e}");
    let loc = e.location().expect("the loop's line");
    assert_eq!(loc.line, sum_blocks_loop_line(), "{e}");
    assert!(e.message().contains("trip count"), "{e}");
    // A trip count for another line does not do.
    let l = Launch::new(1)
        .mode(Mode::Estimate)
        .trip_counts(TripCounts::new().line(1, 3));
    let e = sum_blocks::run(l, &c, &x, &mut out).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoData, "{e}");
}

/// Halves `v` (a `[1, 1]` int32 in HBM) on the device while it is positive, counting the
/// iterations into `steps`: a while loop whose condition the body changes.
#[nki_kernel]
fn halve(v: &Hbm<i32>, steps: &mut Hbm<i32>) {
    let cur = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
    nisa::dma_copy(&cur, v.view(), None);
    let count = nl::zeros(&[1, 1], DType::I32, nl::sbuf);
    let cond = nisa::scalar_load(&cur);
    nl::while_loop(cond, || {
        nisa::tensor_scalar(
            &cur,
            &cur,
            nl::AluOp::RightShift,
            1.0,
            None::<nisa::TensorScalarOpts>,
        );
        let k = nisa::scalar_load(&count);
        nisa::scalar_store(&count, k + 1);
        nisa::scalar_load(&cur)
    });
    nisa::dma_copy(steps.view(), &count, None);
}

#[test]
fn a_while_loop_runs_until_the_device_changes_its_condition() {
    for (v, want) in [(0, 0), (1, 1), (5, 3), (1000, 10)] {
        let input = Hbm::from_vec(&[1, 1], vec![v]).unwrap();
        let mut steps = Hbm::<i32>::zeros([1, 1]);
        launch!(halve[1](&input, &mut steps)).unwrap();
        assert_eq!(steps.to_vec().unwrap(), vec![want], "v = {v}");
        let mut steps = Hbm::<i32>::zeros([1, 1]);
        let p = halve::simulate(1, Target::Trn2, &input, &mut steps).unwrap();
        assert_eq!(p.device_loops[0].iterations, want as u64);
        assert_eq!(p.device_loops[0].api, "nl.while_loop");
    }
    let input = Hbm::<i32>::shape_only([1, 1]);
    let mut steps = Hbm::<i32>::shape_only([1, 1]);
    let e = halve::estimate(1, Target::Trn2, &input, &mut steps).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoData, "{e}");
    assert_eq!(e.op(), "nl.while_loop", "{e}");
    let l = Launch::new(1)
        .mode(Mode::Estimate)
        .trip_counts(TripCounts::new().all(4));
    let r = halve::run(l, &input, &mut steps).unwrap();
    assert_eq!(r.profile.unwrap().device_loops[0].iterations, 4);
}

/// A body tile of a device loop is one buffer; a host loop's is a new buffer each time.
#[nki_kernel]
fn body_tiles(x: &Hbm<f32>, out: &mut Hbm<f32>, device: bool) {
    let body = |i: usize| {
        let t = nl::ndarray(&[128, 64], DType::F32, nl::sbuf);
        nisa::dma_copy(&t, x.slice((.., 64 * i..64 * i + 64)), None);
        nisa::dma_copy(out.slice((.., 64 * i..64 * i + 64)), &t, None);
    };
    if device {
        nl::fori_loop(0, 4, |i| body(i.value().unwrap() as usize));
    } else {
        for i in 0..4 {
            body(i);
        }
    }
}

#[test]
fn a_tile_allocated_in_a_device_loop_exists_once() {
    // (The records' buffer ids are checked by the unit test in `lang::control`.)
    let x = Hbm::from_vec(&[128, 256], (0..128 * 256).map(|k| k as f32).collect()).unwrap();
    let mut lat = Vec::new();
    for device in [true, false] {
        let mut out = Hbm::<f32>::zeros([128, 256]);
        let p = body_tiles::simulate(1, Target::Trn2, &x, &mut out, device).unwrap();
        assert_eq!(out.to_f32_vec().unwrap(), x.to_f32_vec().unwrap());
        lat.push(p.latency_ns);
    }
    // One buffer: each iteration's load waits for the previous iteration's store to have
    // read it; four buffers let the loads run ahead.
    assert!(lat[0] > lat[1], "device {} vs unrolled {}", lat[0], lat[1]);
}

/// Every iteration stores to the same HBM rows.
#[nki_kernel]
fn same_rows(x: &Hbm<f32>, out: &mut Hbm<f32>, device: bool) {
    let body = || {
        let t = nl::load(x.slice((0..128, 0..8)));
        nl::store(out.slice((0..128, 0..8)), &t);
    };
    if device {
        nl::fori_loop(0, 3, |_| body());
    } else {
        for _ in nl::affine_range(3) {
            body();
        }
    }
}

#[test]
fn iterations_of_a_device_loop_are_ordered_for_the_race_checks() {
    let x = Hbm::<f32>::full([128, 8], 1.0);
    let mut out = Hbm::<f32>::zeros([128, 8]);
    launch!(same_rows[1](&x, &mut out, true)).unwrap();
    let e = launch!(same_rows[1](&x, &mut out, false)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutputDependency, "{e}");
}

#[nki_kernel]
fn arithmetic(v: &Hbm<i32>, out: &mut Hbm<i32>) {
    let t = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
    nisa::dma_copy(&t, v.view(), None);
    let i = nisa::scalar_load(&t);
    let r = -(i * 4 + 1) - i * i;
    nisa::scalar_store(&t, r);
    nisa::dma_copy(out.view(), &t, None);
}

#[test]
fn scalar_arithmetic_wraps_at_32_bits() {
    for v in [3i32, -7, 100000] {
        let input = Hbm::from_vec(&[1, 1], vec![v]).unwrap();
        let mut out = Hbm::<i32>::zeros([1, 1]);
        launch!(arithmetic[1](&input, &mut out)).unwrap();
        let want = (v.wrapping_mul(4).wrapping_add(1))
            .wrapping_neg()
            .wrapping_sub(v.wrapping_mul(v));
        assert_eq!(out.to_vec().unwrap(), vec![want], "v = {v}");
    }
    let s = NkiScalar::from(100000) * 100000;
    assert_eq!(s.value(), Some(1410065408));
}

#[nki_kernel]
fn bad_offset(count: &Hbm<i32>, x: &Hbm<f32>, out: &mut Hbm<f32>) {
    let c = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
    nisa::dma_copy(&c, count.view(), None);
    let n = nisa::scalar_load(&c);
    let t = nl::load(x.slice((.., 0..8)).scalar_offset(n, 1));
    nl::store(out.slice((.., ..)), &t);
}

#[test]
fn a_scalar_offset_outside_the_tensor_is_an_error_naming_it() {
    let c = Hbm::from_vec(&[1, 1], vec![60]).unwrap();
    let x = Hbm::<f32>::zeros([128, 64]);
    let mut out = Hbm::<f32>::zeros([128, 8]);
    let e = launch!(bad_offset[1](&c, &x, &mut out)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfBounds, "{e}");
    assert!(e.message().contains("scalar_offset 60"), "{e}");
    assert_eq!(e.location().unwrap().file, FILE);
    let c = Hbm::from_vec(&[1, 1], vec![56]).unwrap();
    launch!(bad_offset[1](&c, &x, &mut out)).unwrap();
}

#[test]
fn trip_counts_per_run_are_taken_in_order() {
    let t = TripCounts::new().runs(10, [3, 0, 7]);
    assert_eq!(t.count_for(10, 0), Some(3));
    assert_eq!(t.count_for(10, 2), Some(7));
    assert_eq!(t.count_for(10, 3), None);
    assert_eq!(t.count_for(11, 0), None);
}

/// A row of `x` picked by an index read on the device: the DMA of the row takes its offset
/// from a scalar register, and a device loop bounded by the same scalar.
#[nki_kernel]
fn row_at(idx: &Hbm<i32>, x: &Hbm<f32>, out: &mut Hbm<f32>) {
    let c = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
    nisa::dma_copy(&c, idx.view(), None);
    let s = nisa::scalar_load(&c);
    let row = nl::ndarray(&[1, 64], DType::F32, nl::sbuf);
    nisa::dma_copy(&row, x.slice((0..1, ..)).scalar_offset(s, 0), None); // the offset DMA
    nl::fori_loop(0, s, |_| {});
    nisa::dma_copy(out.slice((.., ..)), &row, None);
}

#[test]
fn what_uses_a_scalar_waits_for_its_scalar_load() {
    let line = include_str!("device_loops.rs")
        .lines()
        .position(|l| l.ends_with("// the offset DMA"))
        .unwrap() as u32
        + 1;
    let idx = Hbm::<i32>::from_vec(&[1, 1], vec![3]).unwrap();
    let x = Hbm::<f32>::from_vec(&[8, 64], (0..512).map(|k| k as f32).collect()).unwrap();
    for mode in [Mode::Simulate, Mode::Estimate] {
        let mut out = Hbm::<f32>::zeros([1, 64]);
        let l = Launch::new(1)
            .mode(mode)
            .trip_counts(TripCounts::new().all(3));
        let p = row_at::run(l, &idx, &x, &mut out).unwrap().profile.unwrap();
        if mode == Mode::Simulate {
            let want: Vec<f32> = (3 * 64..4 * 64).map(|k| k as f32).collect();
            assert_eq!(out.to_f32_vec().unwrap(), want);
        }
        let (mut load_end, mut dma_start, mut first_branch) = (0.0f64, f64::MAX, f64::MAX);
        for s in p.spans.iter().filter(|s| s.cause.is_none()) {
            let Some(op) = p.ops.get(s.op as usize) else {
                continue;
            };
            match op.api {
                "nisa.scalar_load" => load_end = load_end.max(s.start_ns + s.dur_ns),
                "nisa.dma_copy" if op.loc.line == line => dma_start = dma_start.min(s.start_ns),
                "nl.fori_loop" => first_branch = first_branch.min(s.start_ns),
                _ => {}
            }
        }
        // The index's own DMA (~2 us) comes first, then the load, then what uses the value.
        assert!(
            load_end > 1000.0,
            "{mode:?}: the load ends at {load_end} ns"
        );
        assert!(
            dma_start >= load_end,
            "{mode:?}: the offset DMA starts at {dma_start} ns, before its scalar is loaded at \
             {load_end} ns"
        );
        assert!(
            first_branch >= load_end,
            "{mode:?}: the loop branches at {first_branch} ns, before its bound is loaded at \
             {load_end} ns"
        );
    }
}

/// 0.7's virtual registers: a counter register bounded by a loaded register, moved between
/// registers, stored back; `out = [count, 2 + count, sum of 0..count]`.
#[nki_kernel]
fn registers(count: &Hbm<i32>, out: &mut Hbm<i32>) {
    let c = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
    nisa::dma_copy(&c, count.view(), None);
    let n = nisa::register_alloc(None);
    nisa::register_load(&n, &c);
    let acc = nisa::register_alloc(Some(0));
    nl::fori_loop(0, &n, |i| nisa::register_move(&acc, acc.get() + i));
    let two = nisa::register_alloc(Some(2));
    let m = nisa::register_alloc(None);
    nisa::register_move(&m, &two);
    nisa::register_move(&m, m.get() + &n);
    for (j, r) in [&n, &m, &acc].into_iter().enumerate() {
        let t = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
        nisa::register_store(&t, r);
        nisa::dma_copy(out.slice((0..1, j..j + 1)), &t, None);
    }
}

#[nki_kernel]
fn unwritten_register(out: &mut Hbm<i32>) {
    let r = nisa::register_alloc(None);
    let t = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
    nisa::register_store(&t, &r);
    nisa::dma_copy(out.slice((.., ..)), &t, None);
}

#[nki_kernel]
fn wide_register_load(x: &Hbm<i32>) {
    let t = nl::ndarray(&[1, 2], DType::I32, nl::sbuf);
    nisa::dma_copy(&t, x.view(), None);
    let r = nisa::register_alloc(None);
    nisa::register_load(&r, &t);
}

#[test]
fn virtual_registers_load_move_bound_a_loop_and_store() {
    for count in [0, 1, 6] {
        let c = Hbm::from_vec(&[1, 1], vec![count]).unwrap();
        let mut out = Hbm::<i32>::zeros([1, 3]);
        launch!(registers[1](&c, &mut out)).unwrap();
        let sum = (0..count).sum::<i32>();
        assert_eq!(out.to_vec().unwrap(), vec![count, 2 + count, sum]);
    }
    // Simulate mode runs them too, on the values.
    let c = Hbm::from_vec(&[1, 1], vec![3]).unwrap();
    let mut out = Hbm::<i32>::zeros([1, 3]);
    registers::simulate(1, Target::Trn2, &c, &mut out).unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![3, 5, 3]);
    let mut o = Hbm::<i32>::zeros([1, 1]);
    let e = launch!(unwritten_register[1](&mut o)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UninitializedRead, "{e}");
    assert!(
        e.message()
            .contains("read before register_move or register_load"),
        "{e}"
    );
    assert_eq!(e.location().unwrap().file, FILE);
    let x = Hbm::from_vec(&[1, 2], vec![1, 2]).unwrap();
    let e = launch!(wide_register_load[1](&x)).unwrap_err();
    assert_eq!(e.op(), "nisa.register_load", "{e}");
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch, "{e}");
}

/// How [`copy_blocks`] runs its blocks.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Blocks {
    /// A device loop, one block per iteration: load it, store it.
    Device,
    /// A device loop, two blocks per iteration in two tiles allocated before the loop
    /// (double buffering): each iteration loads the next iteration's first block while its
    /// second block is in flight.
    DoubleBuffered,
    /// An `affine_range` loop (unrolled by the compiler).
    Affine,
}

/// `out = x` (`[128, 64 n]`) through SBUF, one `[128, 64]` block at a time, run as `how` says.
#[nki_kernel]
fn copy_blocks(x: &Hbm<f32>, out: &mut Hbm<f32>, how: Blocks) {
    let n = x.shape()[1] / 64;
    let cols = |b: usize| 64 * b..64 * b + 64;
    match how {
        Blocks::Device => nl::fori_loop(0, n as i32, |i| {
            let b = i.value().unwrap() as usize;
            let t = nl::ndarray(&[128, 64], DType::F32, nl::sbuf);
            nisa::dma_copy(&t, x.slice((.., cols(b))), None);
            nisa::dma_copy(out.slice((.., cols(b))), &t, None);
        }),
        Blocks::DoubleBuffered => {
            let (a, b) = (
                nl::ndarray(&[128, 64], DType::F32, nl::sbuf),
                nl::ndarray(&[128, 64], DType::F32, nl::sbuf),
            );
            nisa::dma_copy(&a, x.slice((.., cols(0))), None);
            nl::fori_loop(0, (n / 2) as i32, |j| {
                let j = j.value().unwrap() as usize;
                nisa::dma_copy(&b, x.slice((.., cols(2 * j + 1))), None);
                nisa::dma_copy(out.slice((.., cols(2 * j))), &a, None);
                // The next iteration's first block (the last iteration reloads block 0,
                // which nothing stores).
                nisa::dma_copy(&a, x.slice((.., cols((2 * j + 2) % n))), None);
                nisa::dma_copy(out.slice((.., cols(2 * j + 1))), &b, None);
            });
        }
        Blocks::Affine => {
            for b in nl::affine_range(n) {
                let t = nl::ndarray(&[128, 64], DType::F32, nl::sbuf);
                nisa::dma_copy(&t, x.slice((.., cols(b))), None);
                nisa::dma_copy(out.slice((.., cols(b))), &t, None);
            }
        }
    }
}

/// Runs [`copy_blocks`] over `n` blocks in simulate mode on trn2 and checks the copy.
fn copy_run(n: usize, how: Blocks) -> Profile {
    let x = Hbm::from_vec(
        &[128, 64 * n],
        (0..128 * 64 * n).map(|k| k as f32).collect(),
    )
    .unwrap();
    let mut out = Hbm::<f32>::zeros([128, 64 * n]);
    let p = copy_blocks::simulate(1, Target::Trn2, &x, &mut out, how).unwrap();
    assert_eq!(
        out.to_f32_vec().unwrap(),
        x.to_f32_vec().unwrap(),
        "{how:?}"
    );
    p
}

#[test]
fn a_device_loop_iteration_boundary_is_a_barrier_of_about_9_us_on_trn2() {
    let n = 8;
    let device = copy_run(n, Blocks::Device);
    let unrolled = copy_run(n, Blocks::Affine);
    let l = &device.device_loops[0];
    assert!((l.overhead_ns_per_iteration - 9000.0).abs() < 1.0, "{l:?}");
    // Every iteration waits for the previous one to end (its store) and the barrier: no
    // iteration's load runs ahead.
    assert!(l.ns_per_iteration > 9000.0, "{l:?}");
    let extra = (device.latency_ns - unrolled.latency_ns) / n as f64;
    assert!(
        extra > 9000.0,
        "{extra} ns per iteration more than unrolled"
    );
    // An unrolled loop has no iteration boundaries.
    assert!(unrolled.device_loops.is_empty());
}

#[test]
fn a_double_buffered_device_loop_pays_the_pipelined_barrier() {
    let n = 8;
    let db = copy_run(n, Blocks::DoubleBuffered);
    let l = &db.device_loops[0];
    assert_eq!(l.iterations, n as u64 / 2);
    assert!((l.overhead_ns_per_iteration - 4000.0).abs() < 1.0, "{l:?}");
    let plain = copy_run(n, Blocks::Device);
    assert!(
        db.latency_ns < plain.latency_ns,
        "{} vs {}",
        db.latency_ns,
        plain.latency_ns
    );
}
