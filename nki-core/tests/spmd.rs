//! SPMD grids: NKI's exact mapping of program ids onto logical NeuronCores (`spmd_dim`, `nc`),
//! `program_id` / `num_programs` / `program_ndim` inside kernels, each core's instances in
//! program-id order in the report and the model, and instances running side by side on the
//! host's threads (with or without `nc`).

use nki_core::prelude::*;
use nki_core::{host_threads, GridDim, InstanceInfo};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What one program instance saw of the grid.
#[derive(Clone, Debug)]
struct Seen {
    pid: Vec<usize>,
    core: usize,
    num_programs: Vec<usize>,
    ndim: usize,
    total: usize,
}

#[nki_kernel]
fn who(log: &Mutex<Vec<Seen>>) {
    let ndim = nl::program_ndim();
    let seen = Seen {
        pid: (0..ndim).map(nl::program_id).collect(),
        core: nl::core_id(),
        num_programs: (0..ndim).map(nl::num_programs).collect(),
        ndim,
        total: nl::num_programs_total(),
    };
    log.lock().unwrap().push(seen);
}

/// Launches `who` on `grid`, and checks that a simulate launch of the same grid models each
/// core's instances in the order the report gives them.
fn run(grid: Grid) -> (LaunchReport, Vec<Seen>) {
    let log = Mutex::new(Vec::new());
    let report = who::launch(grid.clone(), &log).unwrap();
    let cores = grid.num_cores();
    let simulated = who::run(Launch::new(grid).mode(Mode::Simulate), &Mutex::default()).unwrap();
    let profile = simulated.profile.unwrap();
    assert_eq!(profile.program_ids, per_core(&report, cores));
    (report, log.into_inner().unwrap())
}

/// All program ids of a grid shape in row-major order (independent of the launcher).
fn row_major(shape: &[usize]) -> Vec<Vec<usize>> {
    let mut out = vec![vec![]];
    for &n in shape {
        out = out
            .into_iter()
            .flat_map(|p| {
                (0..n).map(move |i| {
                    let mut q = p.clone();
                    q.push(i);
                    q
                })
            })
            .collect();
    }
    out
}

/// The program ids of each core in the order the report gives (its `order` field): the order
/// in which they follow one another on that core in modelled time.
fn per_core(report: &LaunchReport, cores: usize) -> Vec<Vec<Vec<usize>>> {
    (0..cores)
        .map(|c| {
            let mut mine: Vec<&InstanceInfo> =
                report.instances.iter().filter(|i| i.nc == c).collect();
            mine.sort_by_key(|i| i.order);
            let orders: Vec<usize> = mine.iter().map(|i| i.order).collect();
            assert_eq!(orders, (0..mine.len()).collect::<Vec<_>>(), "core {c}");
            mine.iter().map(|i| i.program_id.clone()).collect()
        })
        .collect()
}

/// Checks what every instance saw against the grid shape, and the report against the log.
fn check_common(report: &LaunchReport, seen: &[Seen], shape: &[usize], cores: usize) {
    let all = row_major(shape);
    assert_eq!(seen.len(), all.len());
    let visited: BTreeSet<Vec<usize>> = seen.iter().map(|s| s.pid.clone()).collect();
    assert_eq!(
        visited,
        all.iter().cloned().collect(),
        "each id exactly once"
    );
    for s in seen {
        assert_eq!(s.ndim, shape.len());
        assert_eq!(s.num_programs, shape);
        assert_eq!(s.total, shape.iter().product::<usize>());
        let info = report
            .instances
            .iter()
            .find(|i| i.program_id == s.pid)
            .unwrap();
        assert_eq!(info.nc, s.core, "{s:?}");
    }
    let listed: Vec<Vec<usize>> = report
        .instances
        .iter()
        .map(|i| i.program_id.clone())
        .collect();
    assert_eq!(listed, all, "the report lists instances in grid order");
    assert_eq!(report.grid.shape(), shape);
    assert_eq!(report.grid.num_cores(), cores);
    // Each core's instances follow one another in row-major order of their ids.
    for (c, ids) in per_core(report, cores).iter().enumerate() {
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, &sorted, "core {c} has its instances out of order");
    }
}

#[test]
fn one_two_and_three_dimensional_grids() {
    for shape in [vec![5], vec![3, 4], vec![2, 3, 2]] {
        let grid = Grid::from_dims(shape.iter().map(|&n| GridDim::from(n)).collect());
        let (report, seen) = run(grid);
        check_common(&report, &seen, &shape, 1);
        // A single core runs the whole grid in row-major order.
        assert_eq!(per_core(&report, 1), vec![row_major(&shape)]);
    }
}

/// The program ids `[r, 0], [r, 1]` of each row `r` of a grid with two columns, in order.
fn row_pairs(rows: [usize; 2]) -> Vec<Vec<usize>> {
    rows.iter()
        .flat_map(|&r| [vec![r, 0], vec![r, 1]])
        .collect()
}

#[test]
fn spmd_dim_grid_nc2_puts_even_ids_on_core_0() {
    // NKI tutorial: kernel[nl.spmd_dim(grid_x, nl.nc(2)), grid_y]: program_id(0) = j*2 + nc.
    let (report, seen) = run(Grid::new([spmd_dim(4, nc(2))]));
    check_common(&report, &seen, &[8], 2);
    let cores = per_core(&report, 2);
    assert_eq!(cores[0], vec![vec![0], vec![2], vec![4], vec![6]]);
    assert_eq!(cores[1], vec![vec![1], vec![3], vec![5], vec![7]]);

    // The documented two-dimensional example: NC0 runs [0,*],[2,*]; NC1 runs [1,*],[3,*].
    let (report, seen) = run(Grid::from_dims(vec![spmd_dim(2, nc(2)), 2.into()]));
    check_common(&report, &seen, &[4, 2], 2);
    let cores = per_core(&report, 2);
    assert_eq!(cores[0], row_pairs([0, 2]));
    assert_eq!(cores[1], row_pairs([1, 3]));
}

#[test]
fn spmd_dim_nc2_k_puts_first_k_on_core_0() {
    // kernel[nl.spmd_dim(nl.nc(2), 2), 2]: program_id(0) = nc*2 + j.
    let (report, seen) = run(Grid::from_dims(vec![spmd_dim(nc(2), 2), 2.into()]));
    check_common(&report, &seen, &[4, 2], 2);
    let cores = per_core(&report, 2);
    assert_eq!(cores[0], row_pairs([0, 1]));
    assert_eq!(cores[1], row_pairs([2, 3]));

    let k = 3;
    let (report, seen) = run(Grid::new([spmd_dim(nc(2), k)]));
    check_common(&report, &seen, &[2 * k], 2);
    for s in &seen {
        assert_eq!(s.core, s.pid[0] / k, "{s:?}");
    }
}

#[test]
fn nc2_by_2_grid() {
    // kernel[nl.nc(2), 2]: NC0 runs [0,0],[0,1]; NC1 runs [1,0],[1,1].
    let (report, seen) = run(Grid::from_dims(vec![nc(2).into(), 2.into()]));
    check_common(&report, &seen, &[2, 2], 2);
    let cores = per_core(&report, 2);
    assert_eq!(cores[0], vec![vec![0, 0], vec![0, 1]]);
    assert_eq!(cores[1], vec![vec![1, 0], vec![1, 1]]);
}

#[test]
fn nc_on_an_inner_grid_axis() {
    // nc() may sit on any axis: [2, spmd_dim(3, nc(2))] puts odd ids of axis 1 on core 1.
    let (report, seen) = run(Grid::from_dims(vec![2.into(), spmd_dim(3, nc(2))]));
    check_common(&report, &seen, &[2, 6], 2);
    for s in &seen {
        assert_eq!(s.core, s.pid[1] % 2, "{s:?}");
    }
    assert_eq!(report.grid.to_string(), "[2, spmd_dim(3, nc(2))]");
}

#[test]
fn launch_builder_and_macro_agree() {
    let log = Mutex::new(Vec::new());
    let r = launch!(who[spmd_dim(2, nc(2)), 3](&log)).unwrap();
    let from_macro: Vec<(Vec<usize>, usize)> = r
        .instances
        .iter()
        .map(|i| (i.program_id.clone(), i.nc))
        .collect();
    let log2 = Mutex::new(Vec::new());
    let r2 = who::run(
        Launch::new(Grid::from_dims(vec![spmd_dim(2, nc(2)), 3.into()]))
            .target(Target::Trn1)
            .mode(Mode::Simulate),
        &log2,
    )
    .unwrap();
    let from_builder: Vec<(Vec<usize>, usize)> = r2
        .instances
        .iter()
        .map(|i| (i.program_id.clone(), i.nc))
        .collect();
    assert_eq!(from_macro, from_builder);
    assert_eq!(r2.target, Target::Trn1);
    assert_eq!(r2.mode, Mode::Simulate);
    assert!(r2.profile.is_some());
    assert_eq!(log.into_inner().unwrap().len(), 12);
    assert_eq!(log2.into_inner().unwrap().len(), 12);
}

#[test]
fn grid_instances_follow_the_documented_mapping() {
    // Grid::instances is the launcher's plan: check it against the formulas of the NKI docs.
    let g = Grid::from_dims(vec![spmd_dim(3, nc(2)), 2.into()]);
    for (pid, core) in g.instances() {
        assert_eq!(core, pid[0] % 2);
    }
    let g = Grid::from_dims(vec![spmd_dim(nc(2), 3), 2.into()]);
    for (pid, core) in g.instances() {
        assert_eq!(core, pid[0] / 3);
    }
    let plan: Vec<Vec<usize>> = g.instances().into_iter().map(|p| p.0).collect();
    assert_eq!(plan, row_major(&[6, 2]));
}

/// The instances of linear program ids 0 and 1 each wait (bounded) for the other: this only
/// succeeds when the two run at the same time.
#[nki_kernel]
fn rendezvous(flags: &[AtomicBool; 2], met: &[AtomicBool; 2]) {
    let me = (0..nl::program_ndim()).fold(0, |l, d| l * nl::num_programs(d) + nl::program_id(d));
    if me < 2 {
        flags[me].store(true, Ordering::SeqCst);
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if flags[1 - me].load(Ordering::SeqCst) {
                met[me].store(true, Ordering::SeqCst);
                break;
            }
            std::thread::yield_now();
        }
    }
}

#[test]
fn instances_run_side_by_side_on_host_threads_with_or_without_nc() {
    assert!(
        host_threads() >= 2,
        "at least one host thread per NeuronCore"
    );
    for grid in [
        Grid::new([spmd_dim(2, nc(2))]),
        Grid::new([4]),
        Grid::new([2, 2]),
    ] {
        let flags = [AtomicBool::new(false), AtomicBool::new(false)];
        let met = [AtomicBool::new(false), AtomicBool::new(false)];
        rendezvous::run(Launch::new(grid.clone()), &flags, &met).unwrap();
        let met = met.map(|m| m.load(Ordering::SeqCst));
        assert_eq!(met, [true, true], "grid {grid}");
    }
}

#[nki_kernel]
fn thread_names(log: &Mutex<BTreeSet<String>>) {
    let name = std::thread::current().name().unwrap_or("").to_string();
    log.lock().unwrap().insert(name);
}

#[test]
fn one_host_thread_runs_every_instance_on_the_callers_thread() {
    let log = Mutex::new(BTreeSet::new());
    let r = thread_names::run(
        Launch::new(Grid::from_dims(vec![spmd_dim(4, nc(2)), 3.into()])).host_threads(1),
        &log,
    )
    .unwrap();
    assert_eq!(r.instances.len(), 24);
    let me = std::thread::current().name().unwrap_or("").to_string();
    assert_eq!(log.into_inner().unwrap(), BTreeSet::from([me]));

    let e = thread_names::run(Launch::new(2).host_threads(0), &Mutex::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.message().contains("host_threads(0)"), "{e}");
}

#[nki_kernel]
fn bad_axis(at: &Mutex<u32>) {
    *at.lock().unwrap() = line!() + 1;
    let _ = nl::program_id(2);
}

#[test]
fn program_id_of_a_missing_axis_is_an_error() {
    let at = Mutex::new(0);
    let e = launch!(bad_axis[2, 2](&at)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(
        e.message().contains("axis 2") && e.message().contains("2-dimensional"),
        "{e}"
    );
    assert_eq!(e.program_id(), Some(&[0usize, 0][..]));
    assert_eq!(e.location().unwrap().line, *at.lock().unwrap());
}

/// How instance 0 and instance 1 of [`racing_pair`] are ordered on the host.
#[derive(Clone, Copy, Debug)]
enum HostOrder {
    /// Whatever the host threads do.
    Free,
    /// Instance 1 makes its access before instance 0 makes its own (needs two threads).
    OneFirst,
}

/// Sets its flag when dropped (also when a failing instance unwinds).
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Instances 0 and 1 both touch row 0 of `out`: with `load_second`, instance 0 stores the row
/// and instance 1 loads it, else both store it; with `late_error`, instance 0 later fails on
/// its own (a store of the wrong shape). Under [`HostOrder::OneFirst`] instance 0 waits for
/// instance 1's access before making its own.
fn racing_pair(threads: usize, order: HostOrder, load_second: bool, late_error: bool) -> NkiError {
    let a = Hbm::<f32>::full([2, 64], 1.0);
    let mut c = Hbm::<f32>::zeros([2, 64]);
    let out = c.as_output();
    let one_done = AtomicBool::new(false);
    Launch::new(2)
        .host_threads(threads)
        .run(|| {
            let row = out.slice((0..1, ..));
            if nl::program_id(0) == 0 {
                if let HostOrder::OneFirst = order {
                    let start = Instant::now();
                    while !one_done.load(Ordering::SeqCst) {
                        assert!(start.elapsed() < Duration::from_secs(20), "no rendezvous");
                        std::thread::yield_now();
                    }
                }
                nl::store(&row, &nl::load(a.slice((0..1, ..))));
                if late_error {
                    nl::store(&row, &nl::load(&a));
                }
            } else {
                // Instance 1's access is done when it returns or fails (its load may find
                // the row unwritten).
                let _done = SetOnDrop(&one_done);
                if load_second {
                    drop(nl::load(&row));
                } else {
                    nl::store(&row, &nl::load(a.slice((1..2, ..))));
                }
            }
        })
        .unwrap_err()
}

/// The error's text without tensor names (each launch of [`racing_pair`] makes new tensors).
fn unnamed(e: &NkiError) -> String {
    let s = e.to_string();
    let mut out = String::new();
    let mut rest = s.as_str();
    while let Some(i) = rest.find("hbm") {
        out.push_str(&rest[..i + 3]);
        rest = rest[i + 3..].trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out + rest
}

#[test]
fn a_race_is_reported_the_same_whatever_the_host_order() {
    let two = host_threads() >= 2;
    for (load_second, late_error) in [(false, false), (true, false), (false, true)] {
        let want = racing_pair(1, HostOrder::Free, load_second, late_error);
        let what = format!("load_second {load_second}, late_error {late_error}");
        if late_error {
            // Instance 0's own error comes first in launch order.
            assert_eq!(want.kind(), ErrorKind::ShapeMismatch, "{what}: {want}");
            assert_eq!(want.program_id(), Some(&[0usize][..]), "{what}");
        } else {
            // The race belongs to the later instance, naming both in launch order.
            assert_eq!(want.kind(), ErrorKind::OutputDependency, "{what}: {want}");
            assert_eq!(want.program_id(), Some(&[1usize][..]), "{what}");
            let m = want.message();
            let (first, second) = match load_second {
                true => (
                    "is written by program id [0] at",
                    "read by program id [1] (load) at",
                ),
                false => (
                    "is written by program id [0] at",
                    "again by program id [1] at",
                ),
            };
            assert!(m.contains(first) && m.contains(second), "{what}: {want}");
        }
        let mut orders = vec![HostOrder::Free; 10];
        if two {
            orders.push(HostOrder::OneFirst);
        }
        for order in orders {
            let got = racing_pair(host_threads(), order, load_second, late_error);
            assert_eq!(unnamed(&got), unnamed(&want), "{what}, {order:?}");
            assert_eq!(got.kind(), want.kind(), "{what}, {order:?}");
        }
    }
}
