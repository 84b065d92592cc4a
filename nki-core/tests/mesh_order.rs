//! Mesh checks by happens-before (issue 20 item 1): every racy program fails with the same
//! error and every correctly synchronised program gives the same values, run after run,
//! whatever order the host runs the device threads in. Each program runs 50 times with
//! different host interleavings: a different number of competing host threads each run, and
//! per-device delays before the communication steps chosen from the run number.

use nki_core::mesh::{self, Algorithm, Mesh, MeshLaunch, PartitionSpec, ReplicaGroups, ShardedHbm};
use nki_core::prelude::*;
use nki_core::DType;
use nki_core::{ErrorKind, NkiError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const RUNS: usize = 50;

/// A pseudo-random delay of 0 to 2 ms for `device` at step `step` of run `run`.
fn jitter(run: usize, step: usize) {
    let d = mesh::device_id();
    let mut h = (run as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ (d as u64 + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9)
        ^ (step as u64 + 1).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 29;
    let us = h % 2000;
    if us > 600 {
        std::thread::sleep(Duration::from_micros(us));
    }
}

/// Runs `program(run)` [`RUNS`] times, with `run % 4` host threads spinning beside it, and
/// returns the outcomes.
fn outcomes<T>(program: impl Fn(usize) -> T) -> Vec<T> {
    (0..RUNS)
        .map(|run| {
            let stop = AtomicBool::new(false);
            std::thread::scope(|s| {
                for _ in 0..run % 4 {
                    s.spawn(|| {
                        while !stop.load(Ordering::Relaxed) {
                            std::hint::spin_loop();
                        }
                    });
                }
                let r = program(run);
                stop.store(true, Ordering::Relaxed);
                r
            })
        })
        .collect()
}

/// `e` as text, with tensor names (`hbm123`, numbered anew each run) made `hbm#`.
fn text(e: &NkiError) -> String {
    let s = e.to_string();
    let mut out = String::with_capacity(s.len());
    let mut rest = s.as_str();
    while let Some(i) = rest.find("hbm") {
        out.push_str(&rest[..i + 3]);
        rest = rest[i + 3..].trim_start_matches(|c: char| c.is_ascii_digit());
        out.push('#');
    }
    out.push_str(rest);
    out
}

/// Asserts every run failed with one and the same error; returns it.
fn same_error(runs: Vec<Result<Vec<f32>, NkiError>>) -> NkiError {
    let first = runs[0].clone().expect_err("the racy program must fail");
    for (i, r) in runs.iter().enumerate() {
        let e = r
            .as_ref()
            .map(|v| panic!("run {i} did not fail: {v:?}"))
            .unwrap_err();
        assert_eq!(text(e), text(&first), "run {i} differs");
    }
    first
}

/// Asserts every run succeeded with identical values; returns them.
fn same_values(runs: Vec<Result<Vec<f32>, NkiError>>) -> Vec<f32> {
    let first = runs[0].clone().unwrap();
    for (i, r) in runs.iter().enumerate() {
        let v = r.as_ref().unwrap_or_else(|e| panic!("run {i}: {e}"));
        assert!(
            v.iter()
                .zip(&first)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "run {i} differs"
        );
    }
    first
}

fn ring(n: usize) -> Mesh {
    Mesh::new([n], ["x"]).unwrap()
}

fn p<const N: usize>(d: [Option<&str>; N]) -> PartitionSpec {
    PartitionSpec::new(d)
}

fn iota(rows: usize, cols: usize) -> ndarray::Array2<f32> {
    ndarray::Array2::from_shape_fn((rows, cols), |(i, j)| (i * cols + j) as f32)
}

// ---- A read of a copy's destination before the wait ------------------------------------------

/// Device 0 copies its shard into device 1's buffer; device 1 reads the buffer (into its
/// output) before (`racy`) or after waiting on the copy.
fn read_before_wait(run: usize, racy: bool) -> Result<Vec<f32>, NkiError> {
    let m = ring(2);
    let x = ShardedHbm::from_array(&m, &iota(8, 4), p([Some("x"), None]))?;
    let buf = ShardedHbm::<f32>::zeros(&m, &[8, 4], p([Some("x"), None]))?;
    let out = ShardedHbm::<f32>::zeros(&m, &[8, 4], p([Some("x"), None]))?;
    MeshLaunch::new(&m).run(|| {
        let (send, recv) = (mesh::semaphore("send"), mesh::semaphore("recv"));
        let me = mesh::device_id();
        jitter(run, 0);
        if me == 0 {
            let c = mesh::remote_copy(x.view(), &buf.view().on(1), &send, &recv);
            c.start();
            c.wait_send();
            let t = nl::load(&x.local());
            nl::store(&out.local_out(), &t);
        } else {
            if !racy {
                recv.wait(1);
            }
            jitter(run, 1);
            let t = nl::load(&buf.local());
            nl::store(&out.local_out(), &t);
            if racy {
                recv.wait(1);
            }
        }
    })?;
    Ok(out.to_array()?.iter().copied().collect())
}

#[test]
fn a_read_before_the_wait_is_an_error_in_every_run() {
    let e = same_error(outcomes(|run| read_before_wait(run, true)));
    assert_eq!(e.kind(), ErrorKind::OutputDependency, "{e}");
    let msg = e.message();
    assert!(msg.contains("device 1 (x=1) reads it (load at"), "{e}");
    assert!(msg.contains("the copy device 0 (x=0) started at"), "{e}");
    assert!(msg.contains("without waiting for the copy"), "{e}");
    assert!(msg.contains("mesh_order.rs:"), "{e}");
    assert!(e.location().unwrap().file.ends_with("mesh_order.rs"), "{e}");
}

#[test]
fn a_read_after_the_wait_gives_the_copied_values_in_every_run() {
    let v = same_values(outcomes(|run| read_before_wait(run, false)));
    // Device 1's output holds device 0's shard (rows 0..4).
    let want: Vec<f32> = (0..16).chain(0..16).map(|i| i as f32).collect();
    assert_eq!(v, want);
}

// ---- Overwriting a buffer a peer has not consumed -------------------------------------------

/// A ring of 3: each device sends its shard to its right neighbour's buffer twice (two rounds,
/// the second adding one); each device reads what it received after each round. With
/// `handshake`, a device starts round 2 only after its right neighbour said it consumed
/// round 1.
fn two_rounds(run: usize, handshake: bool) -> Result<Vec<f32>, NkiError> {
    let m = ring(3);
    let x = ShardedHbm::from_array(&m, &iota(6, 4), p([Some("x"), None]))?;
    let buf = ShardedHbm::<f32>::zeros(&m, &[6, 4], p([Some("x"), None]))?;
    let out = ShardedHbm::<f32>::zeros(&m, &[12, 4], p([Some("x"), None]))?;
    MeshLaunch::new(&m).run(|| {
        let me = mesh::device_id();
        let (right, left) = ((me + 1) % 3, (me + 2) % 3);
        let (send, recv, ready) = (
            mesh::semaphore("send"),
            mesh::semaphore("recv"),
            mesh::semaphore("ready"),
        );
        let o = out.local_out();
        for round in 0..2 {
            jitter(run, round);
            let src = nl::add(&nl::load(&x.local()), round as f32);
            if round == 1 && handshake {
                ready.wait(1);
            }
            let c = mesh::remote_copy(&src, &buf.view().on(right), &send, &recv);
            c.start();
            c.wait();
            jitter(run, round + 2);
            let got = nl::load(&buf.local());
            nl::store(o.slice((round * 2..round * 2 + 2, ..)), &got);
            if round == 0 && handshake {
                ready.signal_device(left, 1);
            }
        }
    })?;
    Ok(out.to_array()?.iter().copied().collect())
}

#[test]
fn overwriting_a_buffer_the_peer_has_not_consumed_is_an_error_in_every_run() {
    let e = same_error(outcomes(|run| two_rounds(run, false)));
    assert_eq!(e.kind(), ErrorKind::OutputDependency, "{e}");
    // Device 0's copies are the lowest: their pair is the one reported.
    assert!(
        e.message().contains("the copy device 0 (x=0) started at"),
        "{e}"
    );
}

#[test]
fn a_handshake_before_the_second_round_gives_the_same_values_in_every_run() {
    let v = same_values(outcomes(|run| two_rounds(run, true)));
    // Device d received device d-1's rows, then those plus one.
    for d in 0..3 {
        let l = (d + 2) % 3;
        for round in 0..2 {
            for i in 0..8 {
                let got = v[d * 16 + round * 8 + i];
                assert_eq!(got, (l * 8 + i) as f32 + round as f32);
            }
        }
    }
}

// ---- Two unordered copies into one region ----------------------------------------------------

#[test]
fn two_unordered_copies_into_one_region_are_one_error_in_every_run() {
    let e = same_error(outcomes(|run| {
        let m = ring(4);
        let buf = ShardedHbm::<f32>::from_array(&m, &iota(8, 4), p([Some("x"), None]))?;
        MeshLaunch::new(&m).run(|| {
            let (send, recv) = (mesh::semaphore("send"), mesh::semaphore("recv"));
            let me = mesh::device_id();
            jitter(run, 0);
            let v = buf.view().slice((0..1, ..));
            if me >= 1 {
                let c = mesh::remote_copy(&v, &v.on(0), &send, &recv);
                c.start();
                c.wait_send();
            } else {
                recv.wait(3);
            }
        })?;
        Ok(Vec::new())
    }));
    assert_eq!(e.kind(), ErrorKind::OutputDependency, "{e}");
    let msg = e.message();
    // Devices 1 and 2 (the two lowest copies) are named, whatever the order they ran.
    assert!(msg.contains("the copy device 1 (x=1) started at"), "{e}");
    assert!(msg.contains("the copy device 2 (x=2) started at"), "{e}");
    assert!(msg.contains("without ordering"), "{e}");
}

// ---- The seed's all-gather on a ring of 4: half the output never written --------------------

/// The seed notebook's `all_gather_kernel_1D`: every device copies its shard into its own
/// block of the output and into the same block of its right neighbour's output. On a ring of
/// more than two devices, half of every output stays unwritten.
fn seed_all_gather(run: usize, n: usize) -> Result<Vec<f32>, NkiError> {
    let m = ring(n);
    let x = ShardedHbm::from_array(&m, &iota(4 * n, 8), p([Some("x"), None]))?;
    let out = ShardedHbm::<f32>::zeros(&m, &[4 * n, 8], PartitionSpec::replicated(2))?;
    MeshLaunch::new(&m).run(|| {
        let me = mesh::axis_index("x");
        let right = (me + 1) % mesh::axis_size("x");
        let (local, send, recv) = (
            mesh::semaphore("local"),
            mesh::semaphore("send"),
            mesh::semaphore("recv"),
        );
        let mine = out.view().slice((me * 4..me * 4 + 4, ..));
        let local_copy = mesh::async_copy(x.view(), &mine, &local);
        local_copy.start();
        jitter(run, 0);
        let right_dma = mesh::remote_copy(x.view(), &mine.on(right), &send, &recv);
        right_dma.start();
        right_dma.wait();
        local_copy.wait();
    })?;
    Ok(out.to_array()?.iter().copied().collect())
}

#[test]
fn the_seed_all_gather_is_an_error_on_a_ring_of_four_and_correct_on_two() {
    let e = same_error(outcomes(|run| seed_all_gather(run, 4)));
    assert_eq!(e.kind(), ErrorKind::OutputNotWritten, "{e}");
    assert!(
        e.message()
            .contains("device 0 (x=0) is written only in part"),
        "{e}"
    );
    assert!(
        e.message().contains("element [4, 0] was never written"),
        "{e}"
    );
    let v = same_values(outcomes(|run| seed_all_gather(run, 2)));
    assert_eq!(v, iota(8, 8).iter().copied().collect::<Vec<_>>());
}

// ---- Library collectives and a barrier stay clean and identical -----------------------------

#[test]
fn collectives_give_the_same_values_in_every_run() {
    let m = ring(4);
    let g = ReplicaGroups::along(&m, &["x"]).unwrap();
    for alg in [
        Algorithm::Ring,
        Algorithm::RecursiveDoubling,
        Algorithm::Direct,
    ] {
        let v = same_values(outcomes(|run| {
            let x = ShardedHbm::from_array(&m, &iota(16, 4), p([Some("x"), None]))?;
            let ar = ShardedHbm::<f32>::zeros(&m, &[4, 4], PartitionSpec::replicated(2))?;
            let ag = ShardedHbm::<f32>::zeros(&m, &[16, 4], PartitionSpec::replicated(2))?;
            MeshLaunch::new(&m).run(|| {
                jitter(run, 0);
                mesh::all_reduce(x.view(), ar.view(), &g, alg);
                jitter(run, 1);
                mesh::all_gather(x.view(), ag.view(), 0, &g, alg);
                mesh::barrier(&g);
            })?;
            let mut v: Vec<f32> = ar.to_array()?.iter().copied().collect();
            v.extend(ag.to_array()?.iter().copied());
            Ok(v)
        }));
        let sum: Vec<f32> = (0..16)
            .map(|i| (0..4).map(|d| (d * 16 + i) as f32).sum())
            .collect();
        assert_eq!(&v[..16], &sum[..], "{alg}");
    }
}

// ---- A collective or barrier some device never joins ---------------------------------------

#[test]
fn a_barrier_a_device_never_joins_names_that_device() {
    let m = ring(4);
    let g = ReplicaGroups::along(&m, &["x"]).unwrap();
    let e = MeshLaunch::new(&m)
        .run(|| {
            if mesh::device_id() != 2 {
                mesh::barrier(&g);
            }
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Deadlock, "{e}");
    let msg = e.message();
    assert!(
        msg.contains("device 0 (x=0) waits in barrier #0 at"),
        "{msg}"
    );
    assert!(
        msg.contains("for device 2 (x=2) (finished its kernel), which never called it"),
        "{msg}"
    );
    assert!(!msg.contains("slot"), "{msg}");
}

// ---- A semaphore never waited on is reported at the signal ----------------------------------

#[test]
fn a_semaphore_never_waited_on_is_reported_at_the_signal() {
    let m = ring(2);
    let line = line!() + 5;
    let e = MeshLaunch::new(&m)
        .run(|| {
            let done = mesh::semaphore("done");
            if mesh::device_id() == 1 {
                done.signal_device(0, 1);
            }
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Synchronization, "{e}");
    assert_eq!(e.location().unwrap().line, line, "{e}");
    assert!(
        e.message().contains("the signal device 1 (x=1) sent at"),
        "{e}"
    );
    let _ = DType::F32;
}

// ---- Several senders to one semaphore: the checks credit what the timed replay credits ------
//
// A semaphore is a counter: a wait for `v` completes once `v` increments landed, so with
// several senders it is the `v` earliest landings that satisfy it. The replay times the wait
// at those landings; the checks must order exactly those copies before what follows the wait,
// whatever order the host threads ran the copies in.

/// Rows and columns of a device's shard in [`two_senders`].
const R: usize = 128;
const C: usize = 512;

/// Devices 1 and 2 each copy into their own rows of device 0's buffer, signalling one receive
/// semaphore there: device 1 its whole shard (rows `0..R`, 256 KiB; one row, 2 KiB, when not
/// `big`), device 2 one row (row `R`). On the host, device `late` starts its copy 20 ms after
/// the other, so the host order of the two increments is the test's choice. Device 0 waits for
/// one increment, copies the rows of device `first` to its output, waits for the other and
/// copies the rest.
fn two_senders(
    late: usize,
    first: usize,
    big: bool,
    mode: Mode,
) -> Result<(Vec<f32>, mesh::MeshReport), NkiError> {
    let m = ring(3);
    let x = ShardedHbm::from_array(&m, &iota(3 * R, C), p([Some("x"), None]))?;
    let zeros = ndarray::Array2::<f32>::zeros((3 * (R + 1), C));
    let buf = ShardedHbm::from_array(&m, &zeros, p([Some("x"), None]))?;
    let out = ShardedHbm::<f32>::zeros(&m, &[3 * (R + 1), C], p([Some("x"), None]))?;
    let rows = |d: usize| match d {
        1 if big => 0..R,
        1 => 0..1,
        _ => R..R + 1,
    };
    let report = MeshLaunch::new(&m).mode(mode).run(|| {
        let (send, recv) = (mesh::semaphore("send"), mesh::semaphore("recv"));
        let me = mesh::device_id();
        if me == 0 {
            let o = out.local_out();
            for d in [first, 3 - first] {
                recv.wait(1);
                let t = nl::load(buf.local().slice((rows(d), ..)));
                nl::store(o.slice((rows(d), ..)), &t);
            }
            if !big {
                // The rows neither copy writes.
                let z = nl::full(&[R - 1, C], 0.0, DType::F32, MemKind::Sbuf);
                nl::store(o.slice((1..R, ..)), &z);
            }
        } else {
            if me == late {
                std::thread::sleep(Duration::from_millis(20));
            }
            let n = rows(me).len();
            let c = mesh::remote_copy(
                x.view().slice((0..n, ..)),
                &buf.view().slice((rows(me), ..)).on(0),
                &send,
                &recv,
            );
            c.start();
            c.wait_send();
        }
    })?;
    Ok((out.to_array()?.iter().copied().collect(), report))
}

/// [`two_senders`] with each host order of the two copies (`late` 1 and 2), three runs each.
fn both_host_orders(first: usize, big: bool) -> Vec<Result<Vec<f32>, NkiError>> {
    let mut runs = Vec::new();
    for late in [1, 2] {
        for _ in 0..3 {
            runs.push(two_senders(late, first, big, Mode::Execute).map(|r| r.0));
        }
    }
    runs
}

/// Modelled landing time of the copy device `from` sent to device 0.
fn landing(r: &mesh::MeshReport, from: usize) -> f64 {
    let s = r.devices[from]
        .spans
        .iter()
        .find(|s| s.name == "send -> device 0")
        .expect("a transfer span");
    s.start_ns + s.dur_ns
}

/// The end of device 0's first wait.
fn first_wait_end(r: &mesh::MeshReport) -> f64 {
    let w = r.devices[0]
        .spans
        .iter()
        .find(|s| s.name == "wait recv")
        .expect("device 0 waits for the first landing");
    w.start_ns + w.dur_ns
}

#[test]
fn reading_the_earliest_landing_after_a_wait_is_clean_whatever_the_host_order() {
    // Device 2's one row lands before device 1's shard: the first wait is satisfied by it.
    let v = same_values(both_host_orders(2, true));
    let cols = |r: usize| (r * C..(r + 1) * C).map(|i| i as f32);
    // Device 0's output: device 1's rows (global rows R..2R), then device 2's row 2R.
    let want: Vec<f32> = (R..2 * R).flat_map(cols).chain(cols(2 * R)).collect();
    assert_eq!(&v[..(R + 1) * C], &want[..]);
    // The replay times the waits at the landings the checks credited, in both host orders.
    for late in [1, 2] {
        let (_, r) = two_senders(late, 2, true, Mode::Simulate).unwrap();
        let (one, two) = (landing(&r, 1), landing(&r, 2));
        assert!(two < one, "{two} {one}");
        assert!(
            (first_wait_end(&r) - two).abs() < 1e-6,
            "{}",
            first_wait_end(&r)
        );
        // The second wait (and so device 0's end) comes after device 1's landing.
        assert!(r.devices[0].end_ns >= one, "{} {one}", r.devices[0].end_ns);
    }
}

#[test]
fn reading_the_later_landing_after_one_wait_is_the_same_error_whatever_the_host_order() {
    // The first wait completes when device 2's row lands; device 1's copy is still in flight.
    let e = same_error(both_host_orders(1, true));
    assert_eq!(e.kind(), ErrorKind::OutputDependency, "{e}");
    let msg = e.message();
    assert!(msg.contains("the copy device 1 (x=1) started at"), "{e}");
    assert!(msg.contains("device 0 (x=0) reads it (load at"), "{e}");
    assert!(msg.contains("without waiting for the copy"), "{e}");
}

#[test]
fn equal_landings_are_credited_to_the_lower_device_whatever_the_host_order() {
    // Two rows of equal size land at the same modelled time: the lower device's comes first.
    let v = same_values(both_host_orders(1, false));
    assert_eq!(
        &v[..C],
        &(R * C..(R + 1) * C).map(|i| i as f32).collect::<Vec<_>>()[..]
    );
    // Reading device 2's row after the first wait: its copy is the one not credited.
    let e = same_error(both_host_orders(2, false));
    assert_eq!(e.kind(), ErrorKind::OutputDependency, "{e}");
    assert!(
        e.message().contains("the copy device 2 (x=2) started at"),
        "{e}"
    );
}

// ---- Semaphore::value is read by the timed replay ------------------------------------------
//
// `value()` returns the increments landed by the reading device's modelled clock (not the
// host's count), and each read is a timed step: a loop polling it advances modelled time, so a
// peer that first waits on the polling device gets past its wait and the loop ends.

/// Device `late` starts 20 ms after the other on the host. Device 0 signals `go` on device 1,
/// then polls `done` until device 1's signal landed, then waits for it; device 1 waits for
/// `go`, then signals `done` on device 0. Returns device 0's number of reads that found 0, and
/// the report.
fn poll_for_a_waiting_peer(late: usize, mode: Mode) -> Result<(u32, mesh::MeshReport), NkiError> {
    let m = ring(2);
    let polls = std::sync::Mutex::new(0);
    let report = MeshLaunch::new(&m).mode(mode).run(|| {
        let (go, done) = (mesh::semaphore("go"), mesh::semaphore("done"));
        let me = mesh::device_id();
        if me == late {
            std::thread::sleep(Duration::from_millis(20));
        }
        if me == 0 {
            go.signal_device(1, 1);
            let mut n = 0;
            while done.value() == 0 {
                n += 1;
            }
            done.wait(1);
            *polls.lock().unwrap() = n;
        } else {
            go.wait(1);
            done.signal_device(0, 1);
        }
    })?;
    let n = *polls.lock().unwrap();
    Ok((n, report))
}

/// The modelled end of every device, and the launch's latency.
fn ends(r: &mesh::MeshReport) -> Vec<f64> {
    let mut v: Vec<f64> = r.devices.iter().map(|d| d.end_ns).collect();
    v.push(r.latency_ns);
    v
}

#[test]
fn polling_value_for_a_peer_that_waits_on_the_poller_ends_whatever_the_host_order() {
    let mut polls = Vec::new();
    for late in [0, 1] {
        for _ in 0..2 {
            polls.push(poll_for_a_waiting_peer(late, Mode::Execute).unwrap().0);
        }
    }
    let mut timed = Vec::new();
    for late in [0, 1] {
        timed.push(poll_for_a_waiting_peer(late, Mode::Simulate).unwrap());
    }
    let (n, r) = &timed[0];
    // The signal needs two trips over the link: the loop read 0 for a while, each read a
    // timed step on device 0's timeline (the last one found the increment).
    assert!(*n > 0, "{n}");
    let reads = r.devices[0]
        .spans
        .iter()
        .filter(|s| s.name == "read done")
        .count();
    assert_eq!(reads, *n as usize + 1);
    assert!(polls.iter().all(|p| p == n), "{polls:?} vs {n}");
    for (m, other) in &timed[1..] {
        assert_eq!(m, n);
        let bits = |v: Vec<f64>| v.into_iter().map(f64::to_bits).collect::<Vec<_>>();
        assert_eq!(bits(ends(other)), bits(ends(r)));
    }
}

/// Devices 1 and 2 signal one semaphore of device 0: device 1 at once, device 2 after a
/// 256 KiB local copy (its increment lands much later). Device `late` starts 20 ms after the
/// others on the host. Device 0 reads the semaphore at once, polls it until it is non-zero,
/// waits for both increments and reads it again; returns the three values it read.
fn read_two_signals(late: usize, mode: Mode) -> Result<Vec<u32>, NkiError> {
    let m = ring(3);
    let x = ShardedHbm::from_array(&m, &iota(3 * R, C), p([Some("x"), None]))?;
    let buf = ShardedHbm::<f32>::zeros(&m, &[3 * R, C], p([Some("x"), None]))?;
    let seen = std::sync::Mutex::new(Vec::new());
    MeshLaunch::new(&m).mode(mode).run(|| {
        let sem = mesh::semaphore("sem");
        let me = mesh::device_id();
        if me == late {
            std::thread::sleep(Duration::from_millis(20));
        }
        match me {
            0 => {
                let mut v = vec![sem.value()];
                let first = loop {
                    let n = sem.value();
                    if n > 0 {
                        break n;
                    }
                };
                v.push(first);
                sem.wait(2);
                v.push(sem.value());
                *seen.lock().unwrap() = v;
            }
            1 => sem.signal_device(0, 1),
            _ => {
                let local = mesh::semaphore("local");
                let c = mesh::async_copy(x.view(), &buf.view(), &local);
                c.start();
                c.wait();
                sem.signal_device(0, 1);
            }
        }
    })?;
    let v = seen.lock().unwrap().clone();
    Ok(v)
}

#[test]
fn the_value_read_is_the_same_whatever_the_host_order() {
    for mode in [Mode::Execute, Mode::Simulate] {
        for late in [0, 1, 2] {
            // At modelled time 0 nothing has landed; device 1's increment lands first, alone;
            // the wait consumed both.
            assert_eq!(
                read_two_signals(late, mode).unwrap(),
                [0, 1, 0],
                "late {late}"
            );
        }
    }
}
