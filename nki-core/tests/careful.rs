//! The newer surface fails as carefully as the old one: outputs written in part, budgets of
//! records and loop iterations, access-pattern numbers near `usize::MAX`, panics in the
//! closures the library calls, launch errors at the user's launch line for kernels that return
//! their outputs, and file-writing errors naming the path.

use nki_core::prelude::*;
use nki_core::sweep::{ParamGrid, Sweep};

/// This file's name as error locations show it.
const FILE: &str = file!();

/// The 1-based line of the first line of this file containing `needle`.
fn line_of(needle: &str) -> u32 {
    let src = include_str!("careful.rs");
    src.lines().position(|l| l.contains(needle)).expect(needle) as u32 + 1
}

fn seq(n: usize) -> Vec<f32> {
    (0..n).map(|x| x as f32 + 1.0).collect()
}

// ---- outputs written in part -----------------------------------------------------------------

/// Two cores, one returned `[256, 8]` output; only core 0 writes (rows 0..128), unless `all`.
#[nki_kernel(nki = "0.7")]
fn halves07(x: &Hbm<f32>, all: bool, mark: bool) -> Hbm<f32> {
    let out = nl::ndarray(&[256, 8], DType::F32, nl::shared_hbm.name("rows"));
    if mark {
        out.allow_partial_write();
    }
    let me = nl::program_id(0);
    let t = nl::ndarray(&[128, 8], DType::F32, nl::sbuf);
    nisa::dma_copy(&t, x.slice((128 * me..128 * me + 128, ..)), None);
    if me == 0 || all {
        nisa::dma_copy(out.slice((128 * me..128 * me + 128, ..)), &t, None);
    }
    out
}

#[test]
fn a_returned_output_written_in_part_is_an_error_naming_its_first_unwritten_element() {
    let x = Hbm::from_vec(&[256, 8], seq(256 * 8)).unwrap();
    let (out, _) = halves07::launch(2, &x, true, false).unwrap();
    assert_eq!(out.to_f32_vec().unwrap(), seq(256 * 8));
    for mode in [Mode::Execute, Mode::Simulate] {
        let e = halves07::run(Launch::new(2).mode(mode), &x, false, false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::OutputNotWritten, "{mode:?}: {e}");
        assert!(e.message().contains("rows"), "{e}");
        assert!(e.message().contains("[128, 0]"), "{e}");
    }
    // Marked as written in part on purpose: the rest comes back as zeros.
    let (out, _) = halves07::launch(2, &x, false, true).unwrap();
    let got = out.to_f32_vec().unwrap();
    assert_eq!(&got[..128 * 8], &seq(128 * 8)[..]);
    assert!(got[128 * 8..].iter().all(|&v| v == 0.0));
}

/// `&mut Hbm` form of [`halves07`]: core 0 writes the first half only.
#[nki_kernel(nki = "0.7")]
fn halves_into07(x: &Hbm<f32>, out: &mut Hbm<f32>, mark: bool) {
    if mark {
        out.allow_partial_write();
    }
    let me = nl::program_id(0);
    let t = nl::ndarray(&[128, 8], DType::F32, nl::sbuf);
    nisa::dma_copy(&t, x.slice((128 * me..128 * me + 128, ..)), None);
    if me == 0 {
        nisa::dma_copy(out.slice((0..128, ..)), &t, None);
    }
}

#[test]
fn an_uninitialised_output_may_be_marked_as_written_in_part() {
    let x = Hbm::from_vec(&[256, 8], seq(256 * 8)).unwrap();
    let mut out = Hbm::<f32>::zeros([256, 8]);
    let fresh = || Launch::new(2).outputs_uninitialised();
    let e = halves_into07::run(fresh(), &x, &mut out, false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutputNotWritten, "{e}");
    halves_into07::run(fresh(), &x, &mut out, true).unwrap();
    // The mark holds for its launch only.
    let e = halves_into07::run(fresh(), &x, &mut out, false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutputNotWritten, "{e}");
}

// ---- budgets ---------------------------------------------------------------------------------

/// A `while_loop` whose condition never changes (one int32 tile holding 1), with a memset per
/// iteration.
#[nki_kernel(nki = "0.7")]
fn spin07(out: &mut Hbm<i32>) {
    let one = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
    nisa::memset(&one, 1.0, None);
    let scratch = nl::ndarray(&[128, 64], DType::F32, nl::sbuf);
    nl::while_loop(nisa::scalar_load(&one), || {
        nisa::memset(&scratch, 0.0, None);
        nisa::scalar_load(&one)
    });
    nisa::dma_copy(out.view(), &one, None);
}

fn spin_error(l: Launch) -> NkiError {
    let mut out = Hbm::<i32>::zeros([1, 1]);
    spin07::run(l, &mut out).unwrap_err()
}

fn is_the_spin_loop(e: &NkiError) {
    assert_eq!(e.kind(), ErrorKind::Budget, "{e}");
    assert_eq!(e.op(), "nl.while_loop", "{e}");
    let loc = e.location().expect("the loop's line");
    assert_eq!(loc.file, FILE, "{e}");
    assert_eq!(
        loc.line,
        line_of("nl::while_loop(nisa::scalar_load(&one)"),
        "{e}"
    );
}

#[test]
fn a_device_loop_that_never_ends_stops_at_the_record_budget_in_recording_modes() {
    let e = spin_error(Launch::new(1).mode(Mode::Simulate).max_records(5_000));
    is_the_spin_loop(&e);
    assert!(e.message().contains("5000 instruction records"), "{e}");
    assert!(e.message().contains("Launch::max_records"), "{e}");
    // Estimate mode runs it as many times as the trip counts say.
    let trips = nki_core::nl::TripCounts::new().all(u64::MAX);
    let l = Launch::new(1).mode(Mode::Estimate).trip_counts(trips);
    let e = spin_error(l.max_records(5_000));
    is_the_spin_loop(&e);
}

#[test]
fn a_device_loop_that_never_ends_stops_at_the_iteration_budget_in_every_mode() {
    for mode in [Mode::Execute, Mode::Simulate] {
        let e = spin_error(Launch::new(1).mode(mode).max_loop_iterations(1_000));
        is_the_spin_loop(&e);
        assert!(e.message().contains("1000 iterations"), "{e}");
    }
}

#[test]
fn the_default_record_budget_stops_a_simulated_endless_loop() {
    // Before the record budget this grew its records until the host's memory ran out.
    let e = spin_error(Launch::new(1).mode(Mode::Simulate));
    is_the_spin_loop(&e);
    let budget = nki_core::DEFAULT_MAX_RECORDS.to_string();
    assert!(e.message().contains(&budget), "{e}");
}

/// A kernel recording `n` instructions outside any device loop.
#[nki_kernel(nki = "0.7")]
fn many07(out: &mut Hbm<f32>, n: usize) {
    let t = nl::ndarray(&[128, 8], DType::F32, nl::sbuf);
    for _ in 0..n {
        nisa::memset(&t, 1.0, None);
    }
    nisa::dma_copy(out.view(), &t, None);
}

#[test]
fn a_kernel_past_the_record_budget_names_its_last_instruction() {
    let mut out = Hbm::<f32>::zeros([128, 8]);
    let l = || Launch::new(1).mode(Mode::Estimate).max_records(100);
    let e = many07::run(l(), &mut out, 200).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Budget, "{e}");
    assert_eq!(
        e.location().unwrap().line,
        line_of("nisa::memset(&t, 1.0, None);"),
        "{e}"
    );
    // Under the budget it runs.
    many07::run(l(), &mut out, 90).unwrap();
}

// ---- access-pattern numbers near usize::MAX --------------------------------------------------

#[nki_kernel(nki = "0.7")]
fn far_ap07(x: &Hbm<f32>, out: &mut Hbm<f32>, pattern: &[[usize; 2]], offset: usize) {
    let t = nl::ndarray(&[4, 8], DType::F32, nl::sbuf);
    nisa::dma_copy(&t, x.view().ap(pattern, offset), None);
    nisa::dma_copy(out.view(), &t, None);
}

#[nki_kernel(nki = "0.7")]
fn far_tile_ap07(x: &Hbm<f32>, out: &mut Hbm<f32>, pattern: &[[usize; 2]], offset: usize) {
    let t = nl::ndarray(&[4, 8], DType::F32, nl::sbuf);
    nisa::dma_copy(&t, x.view(), None);
    nisa::dma_copy(out.view(), t.view().ap(pattern, offset), None);
}

#[test]
fn access_pattern_numbers_near_the_address_space_end_are_errors_at_the_users_call() {
    let x = Hbm::from_vec(&[4, 8], seq(32)).unwrap();
    let mut out = Hbm::<f32>::zeros([4, 8]);
    let near = usize::MAX - 2;
    let cases: [(&[[usize; 2]], usize); 4] = [
        (&[[8, 4], [1, 8]], near),
        (&[[8, 4], [1, 8]], usize::MAX),
        (&[[usize::MAX / 2, 4], [1, 8]], 0),
        (&[[8, 4], [usize::MAX, 8]], 0),
    ];
    for (pattern, offset) in cases {
        let e = far_ap07::launch(1, &x, &mut out, pattern, offset).unwrap_err();
        assert_eq!(
            e.kind(),
            ErrorKind::OutOfBounds,
            "{pattern:?} {offset}: {e}"
        );
        assert_eq!(e.op(), "ap", "{e}");
        let loc = e.location().unwrap();
        assert_eq!(loc.file, FILE, "{e}");
        assert_eq!(loc.line, line_of("x.view().ap(pattern, offset)"), "{e}");
        let e = far_tile_ap07::launch(1, &x, &mut out, pattern, offset).unwrap_err();
        assert_eq!(e.op(), "ap", "{pattern:?} {offset}: {e}");
        assert_eq!(
            e.location().unwrap().line,
            line_of("t.view().ap(pattern, offset)")
        );
    }
    // A step past isize::MAX in a count-1 pair is never taken: fine.
    far_ap07::launch(1, &x, &mut out, &[[8, 4], [1, 8], [usize::MAX, 1]], 0).unwrap();
    assert_eq!(out.to_f32_vec().unwrap(), seq(32));
}

// ---- panics in the closures the library calls ------------------------------------------------

#[nki_kernel]
fn bump(a: &Hbm<f32>, out: &mut Hbm<f32>) {
    let t = nl::load(a.slice((.., ..)));
    nl::store(out.slice((.., ..)), &t);
}

#[test]
fn a_panicking_sweep_rule_or_estimate_rejects_its_point_naming_the_closure() {
    let grid = ParamGrid::new().axis("k", [1, 2, 3, 4]);
    let a = Hbm::<f32>::shape_only([128, 64]);
    let report = Sweep::new(grid)
        .threads(2)
        .progress(false)
        .reject_if(|p| (p["k"] == 2).then(|| "two is out".to_string()))
        .reject_if(|p| {
            assert!(p["k"] != 3, "the rule cannot take k = {}", p["k"]);
            None
        })
        .run(|p| {
            assert!(p["k"] != 4, "the estimate cannot take k = 4");
            let mut out = Hbm::<f32>::shape_only([128, 64]);
            bump::estimate(1, Target::Trn2, &a, &mut out)
        });
    let rejected: Vec<_> = report.rejected().collect();
    assert_eq!(rejected.len(), 3, "{report}");
    let (p, r) = rejected[1];
    assert_eq!(p["k"], 3);
    assert_eq!(r.kind, Some(ErrorKind::ClosurePanic));
    assert!(
        r.reason.contains("reject_if rule #2 panicked"),
        "{}",
        r.reason
    );
    assert!(
        r.reason.contains("the rule cannot take k = 3"),
        "{}",
        r.reason
    );
    assert!(r.reason.contains(FILE), "{}", r.reason);
    let (p, r) = rejected[2];
    assert_eq!(p["k"], 4);
    assert!(
        r.reason.contains("estimate closure panicked"),
        "{}",
        r.reason
    );
    assert!(r.reason.contains("cannot take k = 4"), "{}", r.reason);
    assert_eq!(report.estimated().count(), 1);
}

#[test]
fn call_user_closure_returns_a_panic_as_an_error_naming_the_role() {
    let e = nki_core::call_user_closure("the test's closure", || -> u32 { panic!("boom {}", 7) })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ClosurePanic);
    assert!(
        e.message().contains("the test's closure panicked: boom 7"),
        "{e}"
    );
    assert_eq!(e.location().unwrap().file, FILE);
    assert_eq!(nki_core::call_user_closure("x", || 5).unwrap(), 5);
}

// ---- launch errors of kernels returning outputs point at the launch ----------------------------

#[nki_kernel(nki = "0.7")]
fn copy07(x: &Hbm<f32>) -> Hbm<f32> {
    let out = nl::ndarray(&[4, 8], DType::F32, nl::shared_hbm);
    let t = nl::ndarray(&[4, 8], DType::F32, nl::sbuf);
    nisa::dma_copy(&t, x.view(), None);
    nisa::dma_copy(out.view(), &t, None);
    out
}

#[test]
fn a_returning_kernel_launched_on_a_wrong_grid_points_at_the_launch() {
    let x = Hbm::from_vec(&[4, 8], seq(32)).unwrap();
    let at = |e: &NkiError| {
        assert_eq!(e.kind(), ErrorKind::InvalidGrid, "{e}");
        let l = e.location().expect("the launch line");
        (l.file, l.line)
    };
    let e = copy07::launch(3, &x).unwrap_err(); // launch line
    assert_eq!(
        at(&e),
        (
            FILE,
            line_of("copy07::launch(3, &x).unwrap_err(); // launch line")
        )
    );
    let e = copy07::simulate(3, Target::Trn2, &x).unwrap_err(); // simulate line
    assert_eq!(at(&e), (FILE, line_of("// simulate line")));
    let e = copy07::estimate([4, 2], Target::Trn2, &x).unwrap_err(); // estimate line
    assert_eq!(at(&e), (FILE, line_of("// estimate line")));
    let e = copy07::run(Launch::new(5), &x).unwrap_err(); // run line
    assert_eq!(at(&e), (FILE, line_of("// run line")));
    let e = launch!(copy07[7](&x)).unwrap_err(); // macro line
    assert_eq!(at(&e), (FILE, line_of("// macro line")));
}

// ---- file-writing APIs name the path -----------------------------------------------------------

#[test]
fn writing_a_report_into_a_missing_folder_names_the_path() {
    let a = Hbm::<f32>::shape_only([128, 64]);
    let mut out = Hbm::<f32>::shape_only([128, 64]);
    let p = bump::estimate(1, Target::Trn2, &a, &mut out).unwrap();
    let dir = std::env::temp_dir().join("nki-careful-no-such-folder");
    let path = dir.join("profile.html");
    let e = p.write_html(&path).unwrap_err();
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    assert!(e.to_string().contains("HTML report"), "{e}");
    let path = dir.join("trace.json");
    let e = p.write_chrome_trace(&path).unwrap_err();
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    let report = Sweep::new(ParamGrid::new().axis("k", [1]))
        .progress(false)
        .run(|_| bump::estimate(1, Target::Trn2, &a, &mut Hbm::shape_only([128, 64])));
    let path = dir.join("sweep.csv");
    let e = report.write_csv(&path).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
    assert!(e.message().contains(&path.display().to_string()), "{e}");
    let e = report.write_json(dir.join("sweep.json")).unwrap_err();
    assert!(e.message().contains("sweep.json"), "{e}");
}
