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

// ---- Class 6: ownership and shape rules ----------------------------------------------------

#[test]
fn a_store_whose_tile_and_destination_shapes_differ_is_an_error() {
    let a = Hbm::<f32>::zeros([128, 512]);
    for dst in [[512usize, 128], [64, 1024]] {
        let mut c = Hbm::<f32>::zeros(dst);
        let out = c.as_output();
        let line = line!() + 2;
        let e = Launch::new(1)
            .run(|| nl::store(&out, &nl::load(&a)))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch, "{e}");
        assert!(e.message().contains("[128, 512]"), "{e}");
        at_line(&e, line);
    }
    // Free dimensions flatten: a [1, 8] tile into a 1-D row.
    let row = Hbm::<f32>::from_vec(&[1, 8], (0..8).map(|i| i as f32).collect()).unwrap();
    let mut v = Hbm::<f32>::zeros([8]);
    let out = v.as_output();
    Launch::new(1)
        .run(|| nl::store(&out, &nl::load(&row)))
        .unwrap();
    assert_eq!(v.to_f32_vec().unwrap(), row.to_f32_vec().unwrap());
}

// ---- Class 2: read-write races on HBM ------------------------------------------------------

#[test]
fn a_load_racing_a_store_is_an_error_in_either_order() {
    let a = Hbm::<f32>::full([2, 64], 1.0);
    for (mode, shape_only) in [(Mode::Execute, false), (Mode::Estimate, true)] {
        let mut c = if shape_only {
            Hbm::<f32>::shape_only([2, 64])
        } else {
            Hbm::<f32>::zeros([2, 64])
        };
        // Store first: instance 0 stores row 0, instance 1 loads it.
        let out = c.as_output();
        let e = Launch::new(2)
            .mode(mode)
            .run(|| {
                if nl::program_id(0) == 0 {
                    nl::store(out.slice((0..1, ..)), &nl::load(a.slice((0..1, ..))));
                } else {
                    drop(nl::load(out.slice((0..1, ..))));
                }
            })
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::OutputDependency, "{mode:?}: {e}");
        let m = e.message();
        assert!(m.contains("is written by program id [0] at"), "{e}");
        assert!(m.contains("read by program id [1] (load) at"), "{e}");
        assert!(m.contains("element [0, 0]"), "{e}");
        // Load first: affine iteration 0 loads row 0 (stored before the loop), iteration 1
        // stores it.
        let out = c.as_output();
        let e = Launch::new(1)
            .mode(mode)
            .run(|| {
                nl::store(out.slice((0..1, ..)), &nl::load(a.slice((0..1, ..))));
                for i in nl::affine_range(2) {
                    if i == 0 {
                        drop(nl::load(out.slice((0..1, ..))));
                    } else {
                        nl::store(out.slice((0..1, ..)), &nl::load(a.slice((1..2, ..))));
                    }
                }
            })
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::OutputDependency, "{mode:?}: {e}");
        let m = e.message();
        assert!(
            m.contains("is read by program id [0] in affine_range iteration (0) (load)"),
            "{e}"
        );
        assert!(
            m.contains("written by program id [0] in affine_range iteration (1) at"),
            "{e}"
        );
    }
}

#[test]
fn affine_iterations_reading_each_others_writes_race_but_sequential_ones_do_not() {
    let a = Hbm::<f32>::full([4, 32], 1.0);
    let mut c = Hbm::<f32>::zeros([4, 32]);
    // A running sum over rows: row i = row i-1 + a[i].
    let body = |out: &HbmOut<f32>, i: usize| {
        let x = nl::load(a.slice((i..i + 1, ..)));
        let y = if i == 0 {
            x
        } else {
            nl::add(&x, &nl::load(out.slice((i - 1..i, ..))))
        };
        nl::store(out.slice((i..i + 1, ..)), &y);
    };
    let out = c.as_output();
    let e = Launch::new(1)
        .run(|| {
            for i in nl::affine_range(4) {
                body(&out, i);
            }
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutputDependency, "{e}");
    assert!(e.message().contains("affine_range iteration (0)"), "{e}");
    assert!(e.message().contains("affine_range iteration (1)"), "{e}");
    drop(out);
    let out = c.as_output();
    Launch::new(1)
        .run(|| {
            for i in nl::sequential_range(4) {
                body(&out, i);
            }
        })
        .unwrap();
    drop(out);
    let rows: Vec<f32> = c.to_f32_vec().unwrap().chunks(32).map(|r| r[5]).collect();
    assert_eq!(rows, vec![1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn an_instance_reading_back_its_own_store_is_no_race() {
    let a = Hbm::<f32>::full([2, 16], 3.0);
    let mut c = Hbm::<f32>::zeros([2, 16]);
    let out = c.as_output();
    Launch::new(2)
        .run(|| {
            let p = nl::program_id(0);
            nl::store(
                out.slice((p..p + 1, ..)),
                &nl::load(a.slice((p..p + 1, ..))),
            );
            let back = nl::load(out.slice((p..p + 1, ..)));
            nl::store(out.slice((p..p + 1, ..)), &nl::add(&back, &back));
        })
        .unwrap();
    drop(out);
    assert!(c.to_f32_vec().unwrap().iter().all(|&v| v == 6.0));
}

// ---- Class 1: uninitialised data (HBM outputs) ---------------------------------------------

#[test]
fn an_output_the_kernel_never_writes_is_an_error() {
    let a = Hbm::<f32>::full([4, 8], 1.0);
    for mode in [Mode::Execute, Mode::Estimate] {
        let mut c = Hbm::<f32>::zeros([4, 8]);
        let out = c.as_output();
        let e = Launch::new(2)
            .mode(mode)
            .run(|| {
                let _x = nl::load(&a);
                let _ = &out;
            })
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::OutputNotWritten, "{e}");
        assert!(
            e.message().contains("err_tensor_output_not_written_to"),
            "{e}"
        );
        assert!(e.message().contains("[4, 8]"), "{e}");
    }
}

#[test]
fn a_load_of_an_output_region_nothing_wrote_is_an_error() {
    let a = Hbm::<f32>::full([4, 8], 1.0);
    let mut c = Hbm::<f32>::zeros([4, 8]);
    for mode in [Mode::Execute, Mode::Estimate] {
        let out = c.as_output();
        // Rows 0..2 are stored, then rows 0..3 read back: row 2 was never written.
        let line = line!() + 5;
        let e = Launch::new(1)
            .mode(mode)
            .run(|| {
                nl::store(out.slice((0..2, ..)), &nl::load(a.slice((0..2, ..))));
                let back = nl::load(out.slice((0..3, ..)));
                nl::store(out.slice((0..3, ..)), &back);
            })
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UninitializedRead, "{mode:?}: {e}");
        assert!(e.message().contains("element [2, 0]"), "{e}");
        at_line(&e, line);
    }
}

#[test]
fn a_tile_from_another_instance_or_launch_is_an_error() {
    let kept: std::sync::Mutex<Option<Tile>> = std::sync::Mutex::new(None);
    // Instance 0 allocates a tile and leaves it behind; instance 1 uses it.
    let e = Launch::new(2)
        .run(|| {
            let mut g = kept.lock().unwrap_or_else(|p| p.into_inner());
            match g.take() {
                None => *g = Some(nl::zeros(&[4, 8], DType::F32, MemKind::Sbuf)),
                Some(t) => drop(nl::exp(&t)),
            }
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.message().contains("another program instance"), "{e}");
    assert_eq!(e.program_id(), Some(&[1usize][..]), "{e}");
    // A tile kept from an earlier launch.
    Launch::new(1)
        .run(|| {
            *kept.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(nl::zeros(&[4, 8], DType::F32, MemKind::Sbuf))
        })
        .unwrap();
    let e = Launch::new(1)
        .run(|| {
            let t = kept
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
                .unwrap();
            drop(nl::exp(&t));
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.message().contains("an earlier launch"), "{e}");
    // The error names the op that used the tile, at the user's line.
    let mut out = Hbm::<f32>::zeros([4, 8]);
    let o = out.as_output();
    let line = line!() + 8;
    let e = Launch::new(2)
        .run(|| {
            let mut g = kept.lock().unwrap_or_else(|p| p.into_inner());
            match g.take() {
                None => *g = Some(nl::zeros(&[4, 8], DType::F32, MemKind::Sbuf)),
                Some(t) => {
                    drop(g);
                    nl::store(&o, &t)
                }
            }
        })
        .unwrap_err();
    assert_eq!(e.op(), "store", "{e}");
    assert!(e.message().contains("another program instance"), "{e}");
    at_line(&e, line);
}

#[test]
fn a_tile_view_with_a_partition_step_is_rejected() {
    let line = line!() + 4;
    let e = Launch::new(1)
        .run(|| {
            let t = nl::zeros(&[8, 8], DType::F32, MemKind::Sbuf);
            drop(nl::exp(t.slice((stepped(0..8, 2), ..))));
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PartitionOffset, "{e}");
    assert!(e.message().contains("partition step 2"), "{e}");
    at_line(&e, line);
}

#[test]
fn a_loop_step_of_zero_is_an_error() {
    let line = line!() + 2;
    let e = Launch::new(1)
        .run(|| for _ in nl::affine_range_step(0, 4, 0) {})
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.message().contains("step of a loop cannot be 0"), "{e}");
    at_line(&e, line);
}

#[test]
fn a_tile_written_in_part_is_read_only_where_it_was_written() {
    let a = Hbm::<f32>::full([8, 16], 2.0);
    for mode in [Mode::Execute, Mode::Simulate, Mode::Estimate] {
        let mut c = Hbm::<f32>::zeros([8, 16]);
        let out = c.as_output();
        // Columns 0..12 written; reading 0..12 is fine, reading the whole tile is not.
        let line = line!() + 7;
        let e = Launch::new(1)
            .mode(mode)
            .run(|| {
                let t = nl::ndarray(&[8, 16], DType::F32, MemKind::Sbuf);
                nl::assign(t.slice((.., 0..12)), &nl::load(a.slice((.., 0..12))));
                nl::store(out.slice((.., 0..12)), t.slice((.., 0..12)));
                nl::store(&out, &t);
            })
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UninitializedRead, "{mode:?}: {e}");
        assert!(e.message().contains("element [0, 12]"), "{e}");
        assert!(e.message().contains("written only in part"), "{e}");
        at_line(&e, line);
    }
}

#[test]
fn estimate_mode_tracks_written_parts_by_region() {
    // Row blocks and column blocks written in pieces; reads of written parts pass, a read
    // reaching into an unwritten part names its first unwritten element, in every mode.
    for mode in [Mode::Execute, Mode::Simulate, Mode::Estimate] {
        let a = if mode == Mode::Estimate {
            Hbm::<f32>::shape_only([128, 512])
        } else {
            Hbm::<f32>::full([128, 512], 1.0)
        };
        let mut c = if mode == Mode::Estimate {
            Hbm::<f32>::shape_only([128, 512])
        } else {
            Hbm::<f32>::zeros([128, 512])
        };
        let out = c.as_output();
        let line = line!() + 20;
        let e = Launch::new(1)
            .mode(mode)
            .run(|| {
                let t = nl::ndarray(&[128, 512], DType::F32, MemKind::Sbuf);
                for j in 0..3 {
                    let cols = j * 128..(j + 1) * 128;
                    nl::assign(t.slice((.., cols.clone())), &nl::load(a.slice((.., cols))));
                }
                let u = nl::ndarray(&[128, 512], DType::F32, MemKind::Sbuf);
                nl::assign(u.slice((0..64, ..)), &nl::load(a.slice((0..64, ..))));
                nl::assign(u.slice((64..128, ..)), &nl::load(a.slice((64..128, ..))));
                // Whole after two row blocks; columns 0..384 of t written in three pieces.
                nl::store(&out, &nl::add(&u, 1.0));
                nl::store(
                    out.slice((.., 0..384)),
                    &nl::copy(t.slice((.., 0..384)), None),
                );
                nl::store(
                    out.slice((.., 256..512)),
                    &nl::copy(t.slice((.., 256..512)), None),
                );
            })
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UninitializedRead, "{mode:?}: {e}");
        assert!(e.message().contains("element [0, 384]"), "{mode:?}: {e}");
        assert!(e.message().contains("written only in part"), "{e}");
        at_line(&e, line);
    }
}

// ---- Issue 20 item 3: a refused launch leaves nothing behind --------------------------------

#[test]
fn a_refused_launch_leaves_no_outputs_for_the_next_one() {
    let a = Hbm::<f32>::full([2, 4], 1.0);
    for refuse in [Launch::new([0usize]), Launch::new(1).host_threads(0)] {
        let mut stale = Hbm::<f32>::zeros([2, 4]);
        let _o = stale.as_output();
        assert!(refuse.run(|| ()).is_err());
        // The next good launch on this thread writes only its own output.
        let mut c = Hbm::<f32>::zeros([2, 4]);
        let out = c.as_output();
        Launch::new(1)
            .run(|| nl::store(&out, &nl::load(&a)))
            .unwrap();
        assert_eq!(c.to_vec().unwrap(), vec![1.0; 8]);
    }
    // The same for a refused mesh launch (a grid over two NeuronCores).
    let m = nki_core::mesh::Mesh::new([2], ["x"]).unwrap();
    let mut stale = Hbm::<f32>::zeros([2, 4]);
    let _o = stale.as_output();
    assert!(nki_core::mesh::MeshLaunch::new(&m)
        .grid([nc(2)])
        .run(|| ())
        .is_err());
    let mut c = Hbm::<f32>::zeros([2, 4]);
    let out = c.as_output();
    Launch::new(1)
        .run(|| nl::store(&out, &nl::load(&a)))
        .unwrap();
}

#[test]
fn a_mesh_launch_inside_a_kernel_is_a_nested_launch_at_its_line() {
    let m = nki_core::mesh::Mesh::new([2], ["x"]).unwrap();
    let inner_ran = AtomicBool::new(false);
    let line = line!() + 4;
    let e = Launch::new(1)
        .run(|| {
            let _ =
                nki_core::mesh::MeshLaunch::new(&m).run(|| inner_ran.store(true, Ordering::SeqCst));
        })
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NestedLaunch, "{e}");
    at_line(&e, line);
    assert!(!inner_ran.load(Ordering::SeqCst));
    // Inside a mesh device's kernel too.
    let line = line!() + 4;
    let e = nki_core::mesh::MeshLaunch::new(&m)
        .run(|| {
            let _ =
                nki_core::mesh::MeshLaunch::new(&m).run(|| inner_ran.store(true, Ordering::SeqCst));
        })
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NestedLaunch, "{e}");
    at_line(&e, line);
    assert!(!inner_ran.load(Ordering::SeqCst));
}

#[nki_kernel]
fn copy_kernel(a: &Hbm<f32>, c: &mut Hbm<f32>) {
    nl::store(c, &nl::load(a));
}

#[test]
fn a_nested_kernel_launch_points_at_the_call_not_the_kernel() {
    let a = Hbm::<f32>::full([2, 4], 1.0);
    let mut c = Hbm::<f32>::zeros([2, 4]);
    for how in 0..3 {
        let line = line!() + 5;
        let e = Launch::new(1)
            .run(|| {
                let mut inner = Hbm::<f32>::zeros([2, 4]);
                let _ = match how {
                    0 => copy_kernel::launch(1, &a, &mut inner).map(|_| ()),
                    1 => copy_kernel::simulate(1, Target::default(), &a, &mut inner).map(|_| ()),
                    _ => copy_kernel::run(Launch::new(1), &a, &mut inner).map(|_| ()),
                };
            })
            .map(|_| ())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NestedLaunch, "{e}");
        at_line(&e, line + how);
    }
    copy_kernel::launch(1, &a, &mut c).unwrap();
}

// ---- Class 6: the two cases decided against NKI's documented behaviour --------------------

/// Stores `a` through an access pattern of `c`: `pattern`/`offset` as in NKI's `tensor.ap`.
#[nki_kernel]
fn store_through_ap(a: &Hbm<f32>, c: &mut Hbm<f32>, pattern: &[[usize; 2]], offset: usize) {
    nl::store(c.view().ap(pattern, offset), &nl::load(a));
}

#[test]
fn a_store_writing_one_element_twice_is_an_output_dependency_in_every_mode() {
    // [[0, 4], [1, 8]]: all four partitions land on row 0; which one stays depends on the
    // order the DMA queues run in on the device, so it is an error, not "the last one wins".
    let a =
        Hbm::<f32>::from_slice(&[4, 8], &(0..32).map(|i| i as f32).collect::<Vec<_>>()).unwrap();
    for mode in [Mode::Execute, Mode::Simulate] {
        let mut c = Hbm::<f32>::zeros([4, 8]);
        let e = store_through_ap::run(Launch::new(1).mode(mode), &a, &mut c, &[[0, 4], [1, 8]], 0)
            .map(|_| ())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::OutputDependency, "{e}");
        assert!(e.to_string().contains("more than once"), "{e}");
        assert!(e.to_string().contains("[0, 0]"), "{e}");
    }
    // Overlapping but not stride-0: steps of 4 over rows of 8 reach elements 4.. twice.
    let mut c = Hbm::<f32>::zeros([4, 8]);
    let e = store_through_ap::launch(1, &a, &mut c, &[[4, 4], [1, 8]], 0)
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutputDependency, "{e}");
    assert!(e.to_string().contains("[0, 4]"), "{e}");
    // A permutation (columns first) writes every element once: allowed, values transposed.
    let t =
        Hbm::<f32>::from_slice(&[8, 4], &(0..32).map(|i| i as f32).collect::<Vec<_>>()).unwrap();
    let mut c = Hbm::<f32>::zeros([4, 8]);
    store_through_ap::launch(1, &t, &mut c, &[[1, 8], [8, 4]], 0).unwrap();
    let got = c.to_vec().unwrap();
    assert_eq!(got[8], 1.0, "element [1, 0] holds a[0, 1]");
    assert_eq!(got[1], 4.0, "element [0, 1] holds a[1, 0]");
}

/// Writes the first `rows` rows of `c` from `a`.
#[nki_kernel]
fn write_rows(a: &Hbm<f32>, c: &mut Hbm<f32>, rows: usize) {
    nl::store(c.slice((0..rows, ..)), &nl::load(a.slice((0..rows, ..))));
}

#[test]
fn an_output_written_in_part_keeps_its_host_values_unless_outputs_start_uninitialised() {
    let a = Hbm::<f32>::full([4, 8], 2.0);
    // The seeds' form: the caller owns the output; writing part of it is allowed.
    let mut c = Hbm::<f32>::full([4, 8], 7.0);
    write_rows::launch(1, &a, &mut c, 3).unwrap();
    let v = c.to_vec().unwrap();
    assert_eq!((v[0], v[3 * 8]), (2.0, 7.0));
    // A framework's fresh output: the unwritten row is an error naming its first element.
    for mode in [Mode::Execute, Mode::Estimate] {
        let mut c = Hbm::<f32>::zeros([4, 8]);
        let launch = Launch::new(1).mode(mode).outputs_uninitialised();
        let e = write_rows::run(launch, &a, &mut c, 3)
            .map(|_| ())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::OutputNotWritten, "{e}");
        assert!(e.to_string().contains("[3, 0]"), "{e}");
    }
    let mut c = Hbm::<f32>::zeros([4, 8]);
    write_rows::run(Launch::new(1).outputs_uninitialised(), &a, &mut c, 4).unwrap();
    assert_eq!(c.to_vec().unwrap(), vec![2.0; 32]);
}
