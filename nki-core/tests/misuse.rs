//! Misuse through the public API, by class of issue 10 ("checks without holes"): every mistake
//! is an `Err(NkiError)` of the right kind naming the program id and the kernel line — never a
//! process abort, a hang, a panic escaping nki-core, or `Ok` with a wrong result.

use nki_core::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The line of this file an error must name.
#[track_caller]
fn at_line(e: &NkiError, line: u32) {
    let loc = e.location().unwrap_or_else(|| panic!("no location: {e}"));
    assert!(loc.file.ends_with("misuse.rs"), "{e}");
    assert_eq!(loc.line, line, "{e}");
}

// ---- Class 5: launches inside kernels are rejected at once -------------------------------

#[test]
fn a_launch_inside_a_kernel_is_an_error_naming_its_line() {
    let inner_ran = AtomicBool::new(false);
    let line = line!() + 3;
    let e = Launch::new(2)
        .run(|| {
            let r = Launch::new(1).run(|| inner_ran.store(true, Ordering::SeqCst));
            // Never reached: the nested launch fails the enclosing instance.
            let _ = r;
        })
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NestedLaunch, "{e}");
    assert!(e.message().contains("inside a kernel"), "{e}");
    assert_eq!(e.program_id(), Some(&[0usize][..]), "{e}");
    at_line(&e, line);
    assert!(!inner_ran.load(Ordering::SeqCst), "the nested kernel ran");
}

#[test]
fn a_launch_inside_a_two_core_kernel_does_not_deadlock() {
    let t = Instant::now();
    for mode in [Mode::Execute, Mode::Estimate] {
        let e = Launch::new([nc(2)])
            .mode(mode)
            .run(|| {
                let _ = Launch::new([nc(2)]).run(|| ());
            })
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NestedLaunch, "{e}");
    }
    assert!(t.elapsed() < Duration::from_secs(30));
}

// ---- Class 7: kernel panics keep their file:line -------------------------------------------

#[test]
fn a_panic_in_a_kernel_names_program_id_and_line() {
    let v = [1usize, 2, 3];
    let line = line!() + 4;
    let e = Launch::new(4)
        .run(|| {
            let p = nl::program_id(0);
            let _ = v[p + 1];
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::KernelPanic, "{e}");
    assert!(e.message().contains("index out of bounds"), "{e}");
    assert_eq!(e.program_id(), Some(&[2usize][..]), "{e}");
    at_line(&e, line);
    assert!(e.to_string().contains(&format!("misuse.rs:{line}")), "{e}");
}

#[test]
fn an_explicit_panic_in_a_kernel_names_its_line_in_every_mode() {
    for mode in [Mode::Execute, Mode::Simulate, Mode::Estimate] {
        let line = line!() + 4;
        let e = Launch::new(1)
            .mode(mode)
            .run(|| {
                panic!("my own check failed");
            })
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::KernelPanic, "{e}");
        assert!(e.message().contains("my own check failed"), "{e}");
        at_line(&e, line);
    }
}

// ---- Class 3: size arithmetic never overflows ----------------------------------------------

#[test]
fn a_tile_whose_byte_count_overflows_is_rejected() {
    // 2^62 f32 elements per partition are 2^64 bytes: wrapping to 0 would pass the capacity
    // check.
    for free in [1usize << 62, usize::MAX / 2, usize::MAX] {
        let line = line!() + 2;
        let e = Launch::new(1)
            .run(|| drop(nl::ndarray(&[1, free], DType::F32, MemKind::Sbuf)))
            .unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::Capacity | ErrorKind::InvalidArgument),
            "{e}"
        );
        assert!(e.message().contains(&free.to_string()), "{e}");
        at_line(&e, line);
    }
    // Several dimensions whose product overflows.
    let e = Launch::new(1)
        .mode(Mode::Estimate)
        .run(|| {
            drop(nl::zeros(
                &[128, 1 << 32, 1 << 32],
                DType::F32,
                MemKind::Sbuf,
            ))
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.message().contains("overflow"), "{e}");
}

#[test]
fn a_grid_whose_instance_count_overflows_is_rejected_before_running() {
    let ran = AtomicBool::new(false);
    for grid in [
        Grid::new([usize::MAX, 2]),
        Grid::new([1 << 32, 1 << 32]),
        Grid::from_dims(vec![spmd_dim(usize::MAX, 2)]),
        Grid::from_dims(vec![spmd_dim(1 << 40, nc(2)), (1 << 30).into()]),
    ] {
        let e = Launch::new(grid.clone())
            .run(|| ran.store(true, Ordering::SeqCst))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidGrid, "{grid}: {e}");
        assert!(e.message().contains("overflow"), "{e}");
    }
    assert!(!ran.load(Ordering::SeqCst));
}

#[test]
fn an_hbm_tensor_whose_element_count_overflows_is_an_error() {
    let e = Hbm::<f32>::from_vec(&[1 << 40, 1 << 40], vec![]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.message().contains("overflow"), "{e}");
    let e = Hbm::<f32>::try_shape_only(&[1 << 31, 1 << 31, 1 << 31]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.message().contains("overflow"), "{e}");
}

#[test]
fn a_dynamic_slice_past_the_address_space_is_out_of_bounds() {
    let a = Hbm::<f32>::zeros([128, 64]);
    let line = line!() + 2;
    let e = Launch::new(1)
        .run(|| drop(nl::load(a.slice((ds(usize::MAX - 2, 128), ..)))))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfBounds, "{e}");
    at_line(&e, line);
}

// ---- Class 4: cost follows what the kernel touches -----------------------------------------

#[test]
fn a_huge_grid_fails_fast_at_the_first_out_of_bounds_instance() {
    // The usual mistake: a grid of rows instead of row tiles.
    let a = Hbm::<f32>::zeros([1 << 16, 512]);
    let mut c = Hbm::<f32>::zeros([1 << 16, 512]);
    let out = c.as_output();
    let t = Instant::now();
    let e = Launch::new([1usize << 50])
        .run(|| {
            let i = nl::program_id(0) * 128;
            let x = nl::load(a.slice((i..i + 128, ..)));
            nl::store(out.slice((i..i + 128, ..)), &x);
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfBounds, "{e}");
    assert_eq!(e.program_id(), Some(&[512usize][..]), "{e}");
    // Not a timing claim: a launch that listed 2^51 instances first would never get here.
    assert!(t.elapsed() < Duration::from_secs(120));
}

/// Virtual size of this process in bytes (Linux), if known: what it allocated, touched or
/// not.
fn vm_bytes() -> Option<usize> {
    let s = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = s.split_whitespace().next()?.parse().ok()?;
    Some(pages * 4096)
}

#[test]
fn estimate_on_a_65536_square_tensor_stays_small() {
    let a = Hbm::<f32>::shape_only([65536, 65536]);
    let mut c = Hbm::<f32>::shape_only([65536, 65536]);
    let before = vm_bytes();
    let out = c.as_output();
    // A few tiles stored into a 16 GiB tensor (4 Gi elements), from 4 instances.
    let p = Launch::new(4)
        .mode(Mode::Estimate)
        .run(|| {
            let i = nl::program_id(0) * 128 * 97;
            let x = nl::load(a.slice((i..i + 128, 4096..8192)));
            nl::store(out.slice((i..i + 128, 4096..8192)), &x);
            // A strided store too (per-element tags where it lands).
            nl::store(
                out.slice((i + 1..i + 129, stepped(9..8201, 2))),
                &nl::load(a.slice((i..i + 128, 0..4096))),
            );
        })
        .unwrap();
    assert!(p.profile.is_some());
    if let (Some(b), Some(a)) = (before, vm_bytes()) {
        let grew = a.saturating_sub(b);
        assert!(
            grew < 512 << 20,
            "estimate grew the process by {grew} bytes"
        );
    }
    // The same tensor still detects a race in the next launch.
    let out = c.as_output();
    let e = Launch::new(2)
        .mode(Mode::Estimate)
        .run(|| {
            let x = nl::load(a.slice((60000..60128, 0..512)));
            nl::store(out.slice((60000..60128, 0..512)), &x);
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutputDependency, "{e}");
    assert!(e.message().contains("element [60000, 0]"), "{e}");
}
