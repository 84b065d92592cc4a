//! Mesh mistakes are clear errors, never hangs: deadlocks (reported in well under a second,
//! naming every blocked device, semaphore, awaited value and line), semaphores left non-zero,
//! copies never waited on, unordered remote writes, bad device ids, mismatched shard shapes and
//! collectives called in different orders.

use nki_core::mesh::{self, Algorithm, Mesh, MeshLaunch, PartitionSpec, ReplicaGroups, ShardedHbm};
use nki_core::{ErrorKind, NkiError};
use std::time::{Duration, Instant};

fn mesh4() -> Mesh {
    Mesh::new([2, 2], ["x", "y"]).unwrap()
}

fn run(m: &Mesh, kernel: impl Fn() + Sync) -> NkiError {
    let t = Instant::now();
    let e = MeshLaunch::new(m)
        .run(kernel)
        .expect_err("the launch must fail");
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "took {:?}",
        t.elapsed()
    );
    e
}

#[test]
fn a_wait_nobody_signals_is_a_deadlock_naming_every_device() {
    let m = mesh4();
    let e = run(&m, || {
        let sem = mesh::semaphore("recv");
        if mesh::device_id() != 3 {
            sem.wait(2);
        }
    });
    assert_eq!(e.kind(), ErrorKind::Deadlock);
    let msg = e.message();
    for d in [
        "device 0 (x=0, y=0)",
        "device 1 (x=0, y=1)",
        "device 2 (x=1, y=0)",
    ] {
        assert!(msg.contains(d), "{msg}");
    }
    assert!(!msg.contains("device 3"), "{msg}");
    assert!(
        msg.contains("semaphore 'recv' to reach 2 (it holds 0)"),
        "{msg}"
    );
    assert!(msg.contains("mesh_errors.rs:"), "{msg}");
}

#[test]
fn a_ring_that_waits_before_it_sends_deadlocks() {
    let m = Mesh::new([4], ["x"]).unwrap();
    let buf = ShardedHbm::<f32>::zeros(&m, &[8, 4], PartitionSpec::new([Some("x"), None])).unwrap();
    let e = run(&m, || {
        let (send, recv) = (mesh::semaphore("send"), mesh::semaphore("recv"));
        let right = (mesh::device_id() + 1) % 4;
        recv.wait(1); // every device waits for its left neighbour first
        let v = buf.view();
        let c = mesh::remote_copy(&v, &v.on(right), &send, &recv);
        c.start();
        c.wait();
    });
    assert_eq!(e.kind(), ErrorKind::Deadlock);
    assert_eq!(e.message().matches("waits for semaphore 'recv'").count(), 4);
}

#[test]
fn a_semaphore_left_non_zero_is_an_error() {
    let m = mesh4();
    let e = run(&m, || {
        let sem = mesh::semaphore("done");
        if mesh::device_id() == 1 {
            sem.signal_device(2, 1);
        }
    });
    assert_eq!(e.kind(), ErrorKind::Synchronization);
    assert!(e.message().contains("semaphore 'done' on device 2"), "{e}");
}

#[test]
fn a_copy_never_waited_on_is_an_error() {
    let m = mesh4();
    let buf =
        ShardedHbm::<f32>::zeros(&m, &[4, 4], PartitionSpec::new([Some("x"), Some("y")])).unwrap();
    let e = run(&m, || {
        let (send, recv) = (mesh::semaphore("send"), mesh::semaphore("recv"));
        let v = buf.view();
        let c = mesh::remote_copy(&v, &v.on(mesh::device_id() ^ 1), &send, &recv);
        c.start();
        c.wait_recv();
    });
    assert_eq!(e.kind(), ErrorKind::Synchronization);
    assert!(e.message().contains("never waited on"), "{e}");
}

#[test]
fn two_devices_writing_one_remote_region_unordered_is_an_error() {
    let m = mesh4();
    let buf =
        ShardedHbm::<f32>::zeros(&m, &[8, 4], PartitionSpec::new([Some("x"), Some("y")])).unwrap();
    let e = run(&m, || {
        let (send, recv) = (mesh::semaphore("send"), mesh::semaphore("recv"));
        let me = mesh::device_id();
        let v = buf.view().slice((0..2, ..));
        if me == 1 || me == 2 {
            let c = mesh::remote_copy(&v, &v.on(0), &send, &recv);
            c.start();
            c.wait_send();
        }
        if me == 0 {
            recv.wait(2);
        }
    });
    assert_eq!(e.kind(), ErrorKind::OutputDependency);
    assert!(e.message().contains("without ordering"), "{e}");
    // A mesh error carries the program id like every other error.
    assert_eq!(e.program_id(), Some(&[0][..]), "{e}");
    assert!(e.to_string().contains("program id [0]"), "{e}");
}

#[test]
fn disjoint_column_blocks_of_one_buffer_are_not_a_race() {
    let m = Mesh::new([2], ["x"]).unwrap();
    let buf = ShardedHbm::<f32>::zeros(&m, &[8, 8], PartitionSpec::new([Some("x"), None])).unwrap();
    MeshLaunch::new(&m)
        .run(|| {
            let (send, recv) = (mesh::semaphore("send"), mesh::semaphore("recv"));
            let me = mesh::device_id();
            let cols = buf.view().slice((.., me * 4..me * 4 + 4));
            let c = mesh::remote_copy(&cols, &cols.on(0), &send, &recv);
            c.start();
            c.wait_send();
            if me == 0 {
                recv.wait(2);
            }
        })
        .unwrap();
}

#[test]
fn out_of_range_devices_are_errors() {
    let m = mesh4();
    let buf =
        ShardedHbm::<f32>::zeros(&m, &[4, 4], PartitionSpec::new([Some("x"), Some("y")])).unwrap();
    let e = run(&m, || {
        let _ = buf.at(7);
    });
    assert_eq!(e.kind(), ErrorKind::InvalidDevice);
    assert!(e.message().contains("device id 7 is out of range"), "{e}");
    let e = run(&m, || {
        let _ = buf.at([0, 2]);
    });
    assert_eq!(e.kind(), ErrorKind::InvalidDevice);
    let e = run(&m, || mesh::semaphore("s").signal_device(4, 1));
    assert_eq!(e.kind(), ErrorKind::InvalidDevice);
}

#[test]
fn shard_shape_mismatches_are_errors() {
    let m = mesh4();
    let e =
        ShardedHbm::<f32>::zeros(&m, &[3, 4], PartitionSpec::new([Some("x"), None])).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
    assert!(
        e.message().contains("does not split into 2 equal shards"),
        "{e}"
    );
    let a =
        ShardedHbm::<f32>::zeros(&m, &[4, 4], PartitionSpec::new([Some("x"), Some("y")])).unwrap();
    let b =
        ShardedHbm::<f32>::zeros(&m, &[4, 8], PartitionSpec::new([Some("x"), Some("y")])).unwrap();
    let e = run(&m, || {
        let (s, r) = (mesh::semaphore("send"), mesh::semaphore("recv"));
        let _ = mesh::remote_copy(a.view(), &b.at(0), &s, &r);
    });
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
    let g = ReplicaGroups::along(&m, &["y"]).unwrap();
    let e = run(&m, || {
        mesh::all_gather(a.view(), a.view(), 0, &g, Algorithm::Ring);
    });
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
    assert!(e.message().contains("factor of 2"), "{e}");
}

#[test]
fn collectives_in_different_orders_are_an_error() {
    let m = Mesh::new([2], ["x"]).unwrap();
    let g = ReplicaGroups::along(&m, &["x"]).unwrap();
    let a = ShardedHbm::<f32>::zeros(&m, &[4, 4], PartitionSpec::new([Some("x"), None])).unwrap();
    let b = ShardedHbm::<f32>::zeros(&m, &[4, 4], PartitionSpec::replicated(2)).unwrap();
    let e = run(&m, || {
        if mesh::device_id() == 0 {
            mesh::all_gather(a.view(), b.view(), 0, &g, Algorithm::Ring);
        } else {
            mesh::all_reduce(b.view(), b.view(), &g, Algorithm::Direct);
        }
    });
    assert_eq!(e.kind(), ErrorKind::Synchronization);
    assert!(
        e.message().contains("same collectives in the same order"),
        "{e}"
    );
    let e = run(&m, || {
        mesh::all_reduce(a.view(), a.view(), &g, Algorithm::RecursiveDoubling);
        let _ = mesh::axis_index("z");
    });
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn an_error_on_one_device_stops_the_devices_waiting_for_it() {
    let m = mesh4();
    let buf =
        ShardedHbm::<f32>::zeros(&m, &[4, 4], PartitionSpec::new([Some("x"), Some("y")])).unwrap();
    let e = run(&m, || {
        let sem = mesh::semaphore("never");
        if mesh::device_id() == 2 {
            let _ = buf.at(9);
        }
        sem.wait(1);
    });
    assert_eq!(e.kind(), ErrorKind::InvalidDevice);
    assert!(e.message().starts_with("on device 2 (x=1, y=0)"), "{e}");
}

/// A launch over two devices of `[2]` instances each where device 1 fails at once and device 0
/// only after a long loop: in its second instance (`sync` false), or in its first after waiting
/// for a signal device 1 sends just before it fails (`sync` true).
fn lowest_device_failing_late(sync: bool) -> NkiError {
    let m = Mesh::new([2], ["x"]).unwrap();
    let buf = ShardedHbm::<f32>::zeros(&m, &[4, 4], PartitionSpec::new([Some("x"), None])).unwrap();
    MeshLaunch::new(&m)
        .grid(2)
        .run(|| {
            let first = nki_core::nl::program_id(0) == 0;
            let sem = mesh::semaphore("ready");
            if mesh::device_id() == 1 {
                if sync {
                    sem.signal_device(0, 1);
                }
                let _ = buf.at(7);
            } else if first {
                loop_of(400);
                if sync {
                    sem.wait(1);
                    let _ = buf.at(9);
                }
            } else {
                let _ = buf.at(9);
            }
        })
        .expect_err("both devices fail")
}

#[test]
fn the_lowest_device_that_fails_is_named_whatever_order_the_host_ran_the_devices() {
    for sync in [false, true] {
        for _ in 0..3 {
            let e = lowest_device_failing_late(sync);
            assert_eq!(e.kind(), ErrorKind::InvalidDevice, "{e}");
            assert!(e.message().starts_with("on device 0"), "sync {sync}: {e}");
            assert!(e.message().contains('9'), "sync {sync}: {e}");
        }
    }
}

#[test]
fn an_output_shard_a_device_never_writes_is_an_error_naming_the_device() {
    use nki_core::prelude::{nl, Mode};
    let m = Mesh::new([2], ["x"]).unwrap();
    let spec = || PartitionSpec::new([Some("x"), None]);
    let x = ShardedHbm::<f32>::zeros(&m, &[4, 8], spec()).unwrap();
    for mode in [Mode::Execute, Mode::Estimate] {
        let y = ShardedHbm::<f32>::zeros(&m, &[4, 8], spec()).unwrap();
        let e = MeshLaunch::new(&m)
            .mode(mode)
            .run(|| {
                // Device 1 takes its output shard but never stores into it.
                let out = y.local_out();
                if mesh::device_id() == 0 {
                    nl::store(&out, &nl::load(x.local().view()));
                }
            })
            .expect_err("device 1 never writes its output");
        assert_eq!(e.kind(), ErrorKind::OutputNotWritten, "{mode:?}: {e}");
        assert!(e.message().contains("device 1"), "{e}");
        assert!(e.message().contains("never written"), "{e}");
    }
}

#[test]
fn an_output_shard_written_by_a_remote_copy_or_a_collective_counts_as_written() {
    use nki_core::prelude::Mode;
    let m = Mesh::new([2], ["x"]).unwrap();
    let spec = || PartitionSpec::new([Some("x"), None]);
    let x = ShardedHbm::<f32>::zeros(&m, &[4, 8], spec()).unwrap();
    for mode in [Mode::Execute, Mode::Estimate] {
        // Each device writes only the other's shard, remotely.
        let y = ShardedHbm::<f32>::zeros(&m, &[4, 8], spec()).unwrap();
        MeshLaunch::new(&m)
            .mode(mode)
            .run(|| {
                let _ = y.local_out();
                let (send, recv) = (mesh::semaphore("send"), mesh::semaphore("recv"));
                let other = 1 - mesh::device_id();
                let c = mesh::remote_copy(x.view(), &y.at(other), &send, &recv);
                c.start();
                c.wait();
            })
            .unwrap();
        // A collective's destination.
        let g = ReplicaGroups::along(&m, &["x"]).unwrap();
        let r = ShardedHbm::<f32>::zeros(&m, &[2, 8], PartitionSpec::replicated(2)).unwrap();
        MeshLaunch::new(&m)
            .mode(mode)
            .run(|| {
                let _ = r.local_out();
                mesh::all_reduce(x.view(), r.view(), &g, Algorithm::Direct);
            })
            .unwrap();
    }
}

// ---- collective arguments --------------------------------------------------------------------

/// Runs `k` on `m`: its error is `kind` from collective `op`, names every one of `words` (the
/// argument at fault) and the rank in `group` of the device it names (the groups here list
/// the devices in order: device `d` is rank `d`), and points at this file with a program id.
fn names_the_argument_and_rank(
    m: &Mesh,
    group: &str,
    k: impl Fn() + Sync,
    (kind, op): (ErrorKind, &str),
    words: &[&str],
) {
    let e = run(m, k);
    assert_eq!((e.kind(), e.op()), (kind, op), "{e}");
    for w in words {
        assert!(e.message().contains(w), "{w:?} not in: {e}");
    }
    let device = e
        .message()
        .split("on device ")
        .nth(1)
        .expect("the device named");
    let device = &device[..device.find(' ').expect("its number")];
    let rank = format!("rank {device} of the group of devices {group}");
    assert!(e.message().contains(&rank), "{rank:?} not in: {e}");
    assert!(e.program_id().is_some(), "{e}");
    let at = e.location().expect("the user's line");
    assert!(at.file.ends_with("mesh_errors.rs"), "{e}");
}

#[test]
fn each_collectives_bad_arguments_name_the_collective_the_argument_and_the_rank() {
    use ErrorKind::{InvalidArgument, InvalidDevice, ShapeMismatch};
    let m = Mesh::new([2], ["x"]).unwrap();
    let g = ReplicaGroups::along(&m, &["x"]).unwrap();
    let rows = PartitionSpec::new([Some("x"), None]);
    // [2, 4] per device; [4, 4] and [3, 4] on every device.
    let half = ShardedHbm::<f32>::zeros(&m, &[4, 4], rows).unwrap();
    let full = ShardedHbm::<f32>::zeros(&m, &[4, 4], PartitionSpec::replicated(2)).unwrap();
    let odd = ShardedHbm::<f32>::zeros(&m, &[3, 4], PartitionSpec::replicated(2)).unwrap();
    let check = |k: &(dyn Fn() + Sync), at: (ErrorKind, &str), words: &[&str]| {
        names_the_argument_and_rank(&m, "[0, 1]", k, at, words)
    };
    let (ring, direct) = (Algorithm::Ring, Algorithm::Direct);
    check(
        &|| mesh::all_gather(half.view(), half.view(), 0, &g, ring),
        (ShapeMismatch, "all_gather"),
        &["dst ", "must be src ", "factor of 2"],
    );
    check(
        &|| mesh::all_gather(half.view(), full.view(), 2, &g, ring),
        (InvalidArgument, "all_gather"),
        &["dim 2 is beyond the 2 dimensions of src "],
    );
    check(
        &|| mesh::reduce_scatter(half.view(), half.view(), 0, &g, ring),
        (ShapeMismatch, "reduce_scatter"),
        &["src ", "must be dst ", "factor of 2"],
    );
    check(
        &|| mesh::all_reduce(half.view(), full.view(), &g, direct),
        (ShapeMismatch, "all_reduce"),
        &["src ", "[2, 4]", "and dst ", "[4, 4]", "same shape"],
    );
    check(
        &|| mesh::all_reduce(odd.view(), odd.view(), &g, ring),
        (ShapeMismatch, "all_reduce"),
        &["dimension 0 of src ", "[3, 4]", "over 2 ranks"],
    );
    check(
        &|| mesh::all_to_all(odd.view(), odd.view(), 0, &g, direct),
        (ShapeMismatch, "all_to_all"),
        &["dimension 0 of src ", "2 blocks"],
    );
    check(
        &|| {
            mesh::all_to_all(
                full.view(),
                full.view(),
                0,
                &g,
                Algorithm::RecursiveDoubling,
            )
        },
        (InvalidArgument, "all_to_all"),
        &["alg:"],
    );
    check(
        &|| mesh::collective_permute(full.view(), full.view(), &[(0, 2)], &g),
        (InvalidDevice, "collective_permute"),
        &["pairs: (0, 2)", "outside the group of 2 ranks"],
    );
    check(
        &|| mesh::collective_permute(full.view(), full.view(), &[(0, 1), (1, 1)], &g),
        (InvalidArgument, "collective_permute"),
        &["pairs: (1, 1) repeats"],
    );
    // Another device's shard as an operand.
    check(
        &|| mesh::all_reduce(full.at(1), full.view(), &g, direct),
        (InvalidDevice, "all_reduce"),
        &[
            "src ",
            "on device 1: a collective's operands must be on the running device 0",
        ],
    );
    check(
        &|| mesh::all_reduce(full.view(), full.at(1), &g, direct),
        (InvalidDevice, "all_reduce"),
        &[
            "dst ",
            "on device 1: a collective's operands must be on the running device 0",
        ],
    );
    // Recursive doubling on a group of three.
    let m3 = Mesh::new([3], ["x"]).unwrap();
    let g3 = ReplicaGroups::along(&m3, &["x"]).unwrap();
    let one =
        ShardedHbm::<f32>::zeros(&m3, &[3, 4], PartitionSpec::new([Some("x"), None])).unwrap();
    let all = ShardedHbm::<f32>::zeros(&m3, &[3, 4], PartitionSpec::replicated(2)).unwrap();
    names_the_argument_and_rank(
        &m3,
        "[0, 1, 2]",
        || mesh::all_gather(one.view(), all.view(), 0, &g3, Algorithm::RecursiveDoubling),
        (InvalidArgument, "all_gather"),
        &["alg:", "power-of-two", "3 ranks"],
    );
}

// ---- budgets ---------------------------------------------------------------------------------

/// A device loop of `n` iterations, one memset each, on every device.
fn loop_of(n: usize) {
    let t = nki_core::nl::ndarray(&[128, 8], nki_core::DType::F32, nki_core::nl::sbuf);
    nki_core::nl::fori_loop(0, n, |_| nki_core::nisa::memset(&t, 1.0, None));
}

#[test]
fn a_mesh_launch_takes_the_budgets_of_records_and_loop_iterations() {
    use nki_core::Mode;
    let m = Mesh::new([2], ["x"]).unwrap();
    // Under both budgets the loop runs.
    MeshLaunch::new(&m)
        .mode(Mode::Simulate)
        .run(|| loop_of(50))
        .unwrap();
    let limited = MeshLaunch::new(&m).mode(Mode::Simulate);
    let e = limited
        .clone()
        .max_loop_iterations(20)
        .run(|| loop_of(50))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Budget, "{e}");
    assert!(e.message().contains("20 iterations"), "{e}");
    assert!(e.message().contains("on device "), "{e}");
    assert!(
        e.message().contains("MeshLaunch::max_loop_iterations"),
        "{e}"
    );
    let e = limited.max_records(30).run(|| loop_of(50)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Budget, "{e}");
    assert!(e.message().contains("30 instruction records"), "{e}");
    assert!(e.message().contains("MeshLaunch::max_records"), "{e}");
}
