//! Logical NeuronCores of two physical cores (`Grid::lnc(2)`, or `k[2]` for an NKI 0.7 kernel,
//! `#[nki_kernel(nki = "0.7")]`, while `k[2]` stays a grid of two instances on one core for a
//! Beta 1 kernel): `program_id(0)` is the core index, `nisa::sendrecv` moves tiles between the cores, `nisa::core_barrier` orders them
//! (both cores' timelines wait for each other), and a barrier one core never reaches is a
//! deadlock error naming its line, in every mode, never a hang.

// The 0.7 entries NKI 0.8 deprecated (nisa LNC calls, virtual registers) stay provided and
// tested here unchanged.
#![allow(deprecated)]

use nki_core::prelude::*;
use std::time::{Duration, Instant};

const FILE: &str = file!();

/// `out[0..64] = x[0..64] + x[64..128]` (rows), each core loading its half and the two
/// exchanging their halves with `sendrecv`; core 0 stores.
#[nki_kernel]
fn half_sum(x: &Hbm<f32>, out: &mut Hbm<f32>) {
    half_sum_body(x, out);
}

/// `half_sum` written as an NKI 0.7 kernel: `half_sum07[2]` is its LNC=2 launch.
#[nki_kernel(nki = "0.7")]
fn half_sum07(x: &Hbm<f32>, out: &mut Hbm<f32>) {
    half_sum_body(x, out);
}

fn half_sum_body(x: &Hbm<f32>, out: &HbmOut<'_, f32>) {
    let me = nl::program_id(0);
    let mine = nl::ndarray(&[64, 32], DType::F32, nl::sbuf);
    nisa::dma_copy(&mine, x.slice((64 * me..64 * me + 64, ..)), None);
    let theirs = nl::ndarray(&[64, 32], DType::F32, nl::sbuf);
    nisa::sendrecv(&mine, &theirs, 1 - me, 1 - me);
    let sum = nl::ndarray(&[64, 32], DType::F32, nl::sbuf);
    nisa::tensor_tensor(&sum, &mine, &theirs, nl::AluOp::Add, None);
    if me == 0 {
        nisa::dma_copy(out.slice((.., ..)), &sum, None);
    }
}

fn half_sum_input() -> (Hbm<f32>, Vec<f32>) {
    let v: Vec<f32> = (0..128 * 32).map(|k| (k % 97) as f32).collect();
    let want = (0..64 * 32).map(|k| v[k] + v[64 * 32 + k]).collect();
    (Hbm::from_vec(&[128, 32], v).unwrap(), want)
}

#[test]
fn sendrecv_exchanges_tiles_between_the_two_cores_in_every_mode() {
    let (x, want) = half_sum_input();
    let mut out = Hbm::<f32>::zeros([64, 32]);
    let r = launch!(half_sum[nc(2)](&x, &mut out)).unwrap();
    assert_eq!(r.instances.len(), 2);
    assert_eq!(out.to_f32_vec().unwrap(), want);

    let mut out = Hbm::<f32>::zeros([64, 32]);
    let p = half_sum::simulate(Grid::lnc(2), Target::Trn2, &x, &mut out).unwrap();
    assert_eq!(out.to_f32_vec().unwrap(), want);
    assert_eq!(p.cores.len(), 2, "{p}");
    // Each core: one load, one sendrecv DMA.
    let dmas = |nc: u16| {
        p.ops
            .iter()
            .filter(|o| o.nc == nc && o.api == "nisa.sendrecv" && o.engine == Engine::Dma)
            .map(|o| o.bytes)
            .collect::<Vec<_>>()
    };
    assert_eq!(dmas(0), vec![64 * 32 * 4]);
    assert_eq!(dmas(1), vec![64 * 32 * 4]);

    let xs = Hbm::<f32>::shape_only([128, 32]);
    let mut outs = Hbm::<f32>::shape_only([64, 32]);
    let e = half_sum::estimate(Grid::lnc(2), Target::Trn2, &xs, &mut outs).unwrap();
    assert_eq!(e.instructions, p.instructions);
    assert!((e.latency_ns - p.latency_ns).abs() < 1e-6 * p.latency_ns);
}

use nki_core::nisa::Engine;

/// Core 0 runs a chain of `work` activations into `t`, then both cores meet at a barrier on
/// `t`; core 1 then copies its `t` (when `barrier` is false, nothing orders the cores).
#[nki_kernel]
fn ordered(out: &mut Hbm<f32>, work: usize, barrier: bool) {
    let me = nl::program_id(0);
    let t = nl::zeros(&[128, 512], DType::F32, nl::sbuf);
    if me == 0 {
        for _ in 0..work {
            nisa::activation(&t, nl::ActFn::Exp, &t, None);
        }
    }
    if barrier {
        nisa::core_barrier(&t, None);
    }
    if me == 1 {
        let u = nl::ndarray(&[128, 512], DType::F32, nl::sbuf);
        nisa::tensor_copy(&u, &t, None); // the op after the barrier
        nisa::dma_copy(out.slice((.., ..)), &u, None);
    }
}

/// The end of core 0's last activation and the start of core 1's copy, in ns.
fn work_end_and_copy_start(p: &Profile) -> (f64, f64) {
    let mut end = 0.0f64;
    let mut start = f64::INFINITY;
    for s in p.spans.iter().filter(|s| s.cause.is_none()) {
        let Some(op) = p.ops.get(s.op as usize) else {
            continue;
        };
        if op.nc == 0 && op.api == "nisa.activation" {
            end = end.max(s.start_ns + s.dur_ns);
        }
        if op.nc == 1 && op.api == "nisa.tensor_copy" {
            start = start.min(s.start_ns);
        }
    }
    (end, start)
}

#[test]
fn a_core_barrier_makes_each_core_wait_for_the_other() {
    for mode in [Mode::Simulate, Mode::Estimate] {
        let mut out = if mode == Mode::Estimate {
            Hbm::<f32>::shape_only([128, 512])
        } else {
            Hbm::<f32>::zeros([128, 512])
        };
        let run = |out: &mut Hbm<f32>, barrier| {
            let l = Launch::new(Grid::lnc(2)).mode(mode);
            let r = ordered::run(l, out, 20, barrier).unwrap();
            r.profile.unwrap()
        };
        let with = run(&mut out, true);
        let (end, start) = work_end_and_copy_start(&with);
        assert!(
            start >= end,
            "{mode:?}: core 1's copy starts at {start} ns, before core 0's work ends at {end} ns"
        );
        // The barrier's own cost, a semaphore write (~1.3 us), is on the way.
        assert!(start >= end + 1000.0, "{mode:?}: {start} vs {end}");
        let without = run(&mut out, false);
        let (end, start) = work_end_and_copy_start(&without);
        assert!(
            start < end,
            "{mode:?}: without a barrier the cores are independent"
        );
        assert!(with.latency_ns > without.latency_ns);
        assert_eq!(with.cores.len(), 2);
    }
}

/// Only core `who` reaches the barrier.
#[nki_kernel]
fn lonely(x: &Hbm<f32>, who: usize) {
    let t = nl::load(x.slice((0..128, 0..8)));
    if nl::program_id(0) == who {
        nisa::core_barrier(&t, None);
    }
}

#[test]
fn a_barrier_one_core_never_reaches_is_a_deadlock_error_not_a_hang() {
    let x = Hbm::<f32>::zeros([128, 8]);
    let xs = Hbm::<f32>::shape_only([128, 8]);
    let lines: Vec<u32> = include_str!("lnc.rs")
        .lines()
        .enumerate()
        .filter(|(_, l)| l.trim() == "nisa::core_barrier(&t, None);")
        .map(|(k, _)| k as u32 + 1)
        .collect();
    let line = lines[1]; // `lonely`'s
    let t0 = Instant::now();
    for who in [0, 1] {
        for mode in [Mode::Execute, Mode::Simulate, Mode::Estimate] {
            let input = if mode == Mode::Estimate { &xs } else { &x };
            let e = lonely::run(Launch::new(Grid::lnc(2)).mode(mode), input, who).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Deadlock, "{mode:?}: {e}");
            assert_eq!(e.op(), "nisa.core_barrier");
            let loc = e.location().unwrap();
            assert_eq!((loc.file, loc.line), (FILE, line), "{e}");
            assert_eq!(e.program_id(), Some(&[who][..]), "{e}");
            assert!(e.message().contains(&format!("core {}", 1 - who)), "{e}");
        }
    }
    assert!(t0.elapsed() < Duration::from_secs(10));
}

/// Core 0 meets the other at a barrier, core 1 at a sendrecv.
#[nki_kernel]
fn mismatched(x: &Hbm<f32>) {
    let t = nl::load(x.slice((0..128, 0..8)));
    let u = nl::ndarray(&[128, 8], DType::F32, nl::sbuf);
    if nl::program_id(0) == 0 {
        nisa::core_barrier(&t, None);
    } else {
        nisa::sendrecv(&t, &u, 0, 0);
    }
}

#[test]
fn cores_meeting_at_different_calls_is_a_synchronization_error() {
    let x = Hbm::<f32>::zeros([128, 8]);
    let e = launch!(mismatched[nc(2)](&x)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Synchronization, "{e}");
    assert!(e.message().contains("same control flow"), "{e}");
}

#[test]
fn sendrecv_and_core_barrier_need_an_lnc2_launch() {
    let x = Hbm::<f32>::zeros([128, 8]);
    for grid in [
        Grid::new([2]),
        Grid::from_dims(vec![4.into(), nc(2).into()]),
    ] {
        let e = lonely::launch(grid.clone(), &x, 0).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidGrid, "{grid}: {e}");
        // A Beta-1 kernel on [2] is a 0.7 kernel missing its dialect: the message says so.
        let fix = if grid == Grid::new([2]) {
            "nki = \"0.7\""
        } else {
            "Grid::lnc(2)"
        };
        assert!(e.message().contains(fix), "{e}");
    }
}

#[test]
fn sendrecv_checks_the_ranks() {
    let (x, _) = half_sum_input();
    let e = launch!(bad_ranks[nc(2)](&x)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.message().contains("send_to_rank=0"), "{e}");
}

#[nki_kernel]
fn bad_ranks(x: &Hbm<f32>) {
    let t = nl::load(x.slice((0..64, ..)));
    let u = nl::ndarray(&[64, 32], DType::F32, nl::sbuf);
    let me = nl::program_id(0);
    nisa::sendrecv(&t, &u, me, 1 - me);
}

#[test]
fn an_nki07_kernel_launched_as_k2_runs_once_on_each_core_of_an_lnc2_neuroncore() {
    assert_eq!(half_sum07::DIALECT, Dialect::Nki07);
    assert_eq!(half_sum::DIALECT, Dialect::Beta1);
    let (x, want) = half_sum_input();
    let mut out = Hbm::<f32>::zeros([64, 32]);
    let r = launch!(half_sum07[2](&x, &mut out)).unwrap();
    assert_eq!(out.to_f32_vec().unwrap(), want);
    assert_eq!(r.dialect, Dialect::Nki07);
    assert_eq!(r.grid, Grid::lnc(2));
    let placed: Vec<(Vec<usize>, usize)> = r
        .instances
        .iter()
        .map(|i| (i.program_id.clone(), i.nc))
        .collect();
    assert_eq!(placed, [(vec![0], 0), (vec![1], 1)]);
    // The same kernel, modelled: both cores' timelines, as `Grid::lnc(2)` of the Beta 1 kernel.
    let mut out = Hbm::<f32>::zeros([64, 32]);
    let p07 = half_sum07::simulate(2, Target::Trn2, &x, &mut out).unwrap();
    let p = half_sum::simulate(Grid::lnc(2), Target::Trn2, &x, &mut out).unwrap();
    assert_eq!(p07.cores.len(), 2, "{p07}");
    assert_eq!(p07.instructions, p.instructions);
    assert_eq!(p07.latency_ns, p.latency_ns);
}

/// Each instance adds 1 to its own row of `out`.
#[nki_kernel]
fn row_per_instance(out: &mut Hbm<f32>) {
    row_per_instance_body(out);
}

/// `row_per_instance` as an NKI 0.7 kernel.
#[nki_kernel(nki = "0.7")]
fn row_per_instance07(out: &mut Hbm<f32>) {
    row_per_instance_body(out);
}

fn row_per_instance_body(out: &HbmOut<'_, f32>) {
    let me = nl::program_id(0);
    let t = nl::full(&[1, 8], 1.0, DType::F32, nl::sbuf);
    nisa::dma_copy(out.slice((me..me + 1, ..)), &t, None);
}

#[test]
fn a_beta1_kernel_launched_as_k2_keeps_its_one_core_grid_and_an_nki07_one_takes_one_or_two_cores() {
    let mut out = Hbm::<f32>::zeros([2, 8]);
    let r = launch!(row_per_instance[2](&mut out)).unwrap();
    assert_eq!(r.dialect, Dialect::Beta1);
    assert_eq!(r.grid, Grid::new([2]));
    assert!(r.instances.iter().all(|i| i.nc == 0), "{:?}", r.instances);
    assert_eq!(out.to_f32_vec().unwrap(), vec![1.0; 16]);
    let mut out = Hbm::<f32>::zeros([2, 8]);
    let r = launch!(row_per_instance07[1](&mut out)).unwrap();
    assert_eq!((r.grid.num_instances(), r.grid.num_cores()), (1, 1));
    let o = out.to_f32_vec().unwrap();
    assert_eq!((&o[..8], &o[8..]), (&[1.0; 8][..], &[0.0; 8][..]));
    let r = launch!(row_per_instance07[nc(2)](&mut out)).unwrap();
    assert_eq!(r.grid, Grid::lnc(2));
}

#[test]
fn an_nki07_kernel_on_an_spmd_grid_is_an_error_naming_the_rule_and_the_launch() {
    let mut out = Hbm::<f32>::zeros([8, 8]);
    let grids = [
        Grid::new([4]),
        Grid::new([2, 2]),
        Grid::new([spmd_dim(2, nc(2))]),
        Grid::new([nc(2), 1.into()]),
    ];
    for grid in grids {
        let line = line!() + 1;
        let e = row_per_instance07::launch(grid.clone(), &mut out).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidGrid, "{grid}: {e}");
        assert!(e.message().contains("kernel[1] or kernel[2]"), "{e}");
        assert!(e.message().contains(&grid.to_string()), "{e}");
        let loc = e.location().unwrap();
        assert_eq!((loc.file, loc.line), (FILE, line), "{e}");
    }
}

/// Reads grid axis 1.
#[nki_kernel(nki = "0.7")]
fn second_axis(out: &mut Hbm<f32>) {
    let _ = (out, nl::program_id(1));
}

#[test]
fn an_nki07_program_axis_other_than_zero_is_an_error() {
    let mut out = Hbm::<f32>::zeros([8, 8]);
    let e = launch!(second_axis[2](&mut out)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.message().contains("program axis must be zero"), "{e}");
}

/// Both cores exchange `mine` into `theirs` twice; between the two exchanges core 1 reads its
/// `theirs` `reads` times (a chain of activations), which core 0's second send overwrites.
#[nki_kernel]
fn reread(out: &mut Hbm<f32>, reads: usize) {
    let me = nl::program_id(0);
    let mine = nl::zeros(&[128, 512], DType::F32, nl::sbuf);
    let theirs = nl::ndarray(&[128, 512], DType::F32, nl::sbuf);
    nisa::sendrecv(&mine, &theirs, 1 - me, 1 - me);
    if me == 1 {
        let acc = nl::ndarray(&[128, 512], DType::F32, nl::sbuf);
        for _ in 0..reads {
            nisa::activation(&acc, nl::ActFn::Exp, &theirs, None);
        }
        nisa::dma_copy(out.slice((.., ..)), &acc, None);
    }
    nisa::sendrecv(&mine, &theirs, 1 - me, 1 - me);
}

#[test]
fn a_sendrecv_waits_for_the_other_cores_earlier_reads_of_its_dst() {
    for mode in [Mode::Simulate, Mode::Estimate] {
        let mut out = if mode == Mode::Estimate {
            Hbm::<f32>::shape_only([128, 512])
        } else {
            Hbm::<f32>::zeros([128, 512])
        };
        let p = reread::run(Launch::new(Grid::lnc(2)).mode(mode), &mut out, 20)
            .unwrap()
            .profile
            .unwrap();
        // The end of core 1's last read of `theirs`, and the start of core 0's second send
        // (which writes core 1's `theirs`).
        let (mut reads_end, mut send2_start) = (0.0f64, 0.0f64);
        for s in p.spans.iter().filter(|s| s.cause.is_none()) {
            let Some(op) = p.ops.get(s.op as usize) else {
                continue;
            };
            if op.nc == 1 && op.api == "nisa.activation" {
                reads_end = reads_end.max(s.start_ns + s.dur_ns);
            }
            if op.nc == 0 && op.api == "nisa.sendrecv" && op.engine == Engine::Dma {
                send2_start = send2_start.max(s.start_ns);
            }
        }
        assert!(
            reads_end > 5000.0,
            "{mode:?}: 20 activations end at {reads_end} ns"
        );
        assert!(
            send2_start >= reads_end,
            "{mode:?}: core 0's second send starts at {send2_start} ns, before core 1's reads \
             of the dst it overwrites end at {reads_end} ns"
        );
    }
}

/// `half_sum` with the engine of its `sendrecv` chosen (0.7 `dma_engine=`).
#[nki_kernel]
fn half_sum_on(x: &Hbm<f32>, out: &mut Hbm<f32>, gpsimd: bool) {
    let me = nl::program_id(0);
    let mine = nl::ndarray(&[64, 32], DType::F32, nl::sbuf);
    nisa::dma_copy(&mine, x.slice((64 * me..64 * me + 64, ..)), None);
    let theirs = nl::ndarray(&[64, 32], DType::F32, nl::sbuf);
    let engine = if gpsimd {
        nisa::DmaEngine::GpsimdDma
    } else {
        nisa::DmaEngine::Dma
    };
    nisa::sendrecv_on(&mine, &theirs, 1 - me, 1 - me, engine);
    let sum = nl::ndarray(&[64, 32], DType::F32, nl::sbuf);
    nisa::tensor_tensor(&sum, &mine, &theirs, nl::AluOp::Add, None);
    if me == 0 {
        nisa::dma_copy(out.slice((.., ..)), &sum, None);
    }
}

#[test]
fn a_sendrecv_through_gpsimds_dma_runs_on_gpsimd_at_its_bandwidth() {
    let (x, want) = half_sum_input();
    let run = |gpsimd: bool| {
        let mut out = Hbm::<f32>::zeros([64, 32]);
        let p = half_sum_on::simulate(Grid::lnc(2), Target::Trn2, &x, &mut out, gpsimd).unwrap();
        assert_eq!(out.to_f32_vec().unwrap(), want, "gpsimd_dma={gpsimd}");
        p
    };
    let (dma, gp) = (run(false), run(true));
    let engines = |p: &Profile| {
        let mut e: Vec<(u16, Engine)> = p
            .ops
            .iter()
            .filter(|o| o.api == "nisa.sendrecv" && o.engine != Engine::Sync)
            .map(|o| (o.nc, o.engine))
            .collect();
        e.sort_by_key(|x| x.0);
        e
    };
    assert_eq!(engines(&dma), [(0, Engine::Dma), (1, Engine::Dma)]);
    assert_eq!(engines(&gp), [(0, Engine::GpSimd), (1, Engine::GpSimd)]);
    // 8 KiB: GpSimd's start-up (150 cycles) + 8192 B at 307 B/ns (33 cycles at 1.2 GHz).
    let s = Target::Trn2.spec();
    let want_ns = (150.0 + (8192.0 / 307.0 * s.gpsimd_ghz).ceil()) / s.gpsimd_ghz;
    let (i, _) = gp
        .ops
        .iter()
        .enumerate()
        .find(|(_, o)| o.api == "nisa.sendrecv" && o.engine == Engine::GpSimd)
        .unwrap();
    let span = gp
        .spans
        .get()
        .iter()
        .find(|sp| sp.op as usize == i && sp.cause.is_none())
        .unwrap();
    assert!(
        (span.dur_ns - want_ns).abs() < 1e-6,
        "{} vs {want_ns}",
        span.dur_ns
    );
    // No DMA fixed latency: the small swap is faster than through the shared DMA.
    assert!(
        gp.latency_ns < dma.latency_ns,
        "{} vs {}",
        gp.latency_ns,
        dma.latency_ns
    );
    // Estimate mode models the same.
    let xs = Hbm::<f32>::shape_only([128, 32]);
    let mut outs = Hbm::<f32>::shape_only([64, 32]);
    let e = half_sum_on::estimate(Grid::lnc(2), Target::Trn2, &xs, &mut outs, true).unwrap();
    assert!((e.latency_ns - gp.latency_ns).abs() < 1e-6 * gp.latency_ns);
}

#[test]
fn gpsimd_dma_on_a_target_without_it_is_an_error_naming_it() {
    let (x, _) = half_sum_input();
    let mut out = Hbm::<f32>::zeros([64, 32]);
    let e = half_sum_on::simulate(Grid::lnc(2), Target::Trn1, &x, &mut out, true).unwrap_err();
    assert_eq!(e.op(), "nisa.sendrecv");
    assert!(e.message().contains("gpsimd_dma"), "{e}");
    assert_eq!(e.location().map(|l| l.file), Some(FILE));
}

/// Core 1 stores rows 64..128 of `out`; the cores meet at a barrier (when `barrier`); core 0
/// then reads those rows back and stores them into rows 0..64.
#[nki_kernel]
fn across_cores(x: &Hbm<f32>, out: &mut Hbm<f32>, barrier: bool) {
    let me = nl::program_id(0);
    let t = nl::zeros(&[64, 32], DType::F32, nl::sbuf);
    if me == 1 {
        nisa::dma_copy(&t, x.slice((64..128, ..)), None);
        nisa::dma_copy(out.slice((64..128, ..)), &t, None);
    }
    if barrier {
        nisa::core_barrier(&t, None);
    }
    if me == 0 {
        let u = nl::ndarray(&[64, 32], DType::F32, nl::sbuf);
        nisa::dma_copy(&u, out.slice((64..128, ..)), None);
        nisa::dma_copy(out.slice((0..64, ..)), &u, None);
    }
}

#[test]
fn a_core_reads_what_the_other_core_stored_before_their_barrier() {
    let v: Vec<f32> = (0..128 * 32).map(|k| k as f32).collect();
    let x = Hbm::from_vec(&[128, 32], v.clone()).unwrap();
    let mut out = Hbm::<f32>::zeros([128, 32]);
    across_cores::simulate(Grid::lnc(2), Target::Trn2, &x, &mut out, true).unwrap();
    let half = &v[64 * 32..];
    let got = out.to_f32_vec().unwrap();
    assert_eq!(&got[..64 * 32], half);
    assert_eq!(&got[64 * 32..], half);
    let xs = Hbm::<f32>::shape_only([128, 32]);
    let mut outs = Hbm::<f32>::shape_only([128, 32]);
    across_cores::estimate(Grid::lnc(2), Target::Trn2, &xs, &mut outs, true).unwrap();

    // Without the barrier nothing orders core 1's store before core 0's load: an error in
    // every mode.
    for mode in [Mode::Simulate, Mode::Estimate] {
        let mut out = if mode == Mode::Estimate {
            Hbm::<f32>::shape_only([128, 32])
        } else {
            Hbm::<f32>::zeros([128, 32])
        };
        let l = Launch::new(Grid::lnc(2)).target(Target::Trn2).mode(mode);
        let e = across_cores::run(l, &x, &mut out, false).unwrap_err();
        assert!(
            matches!(
                e.kind(),
                ErrorKind::UninitializedRead | ErrorKind::OutputDependency
            ),
            "{mode:?}: {e}"
        );
    }
}
