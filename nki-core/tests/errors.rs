//! Run-time errors: user mistakes driven through the public API. Every case launches a real
//! kernel and checks the error kind, that the message names the op and the shapes, and that
//! the program id and the kernel source line of the offending call are attached. Nothing may
//! hang or abort the process.

use nki_core::prelude::*;
// The Beta-1 instruction forms (allocating, `_into` twins): the seeds' dialect.
use nki_core::nisa::classic as nisa;
use nki_core::typed;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Records the kernel line of the statement that follows `at.next(line!())`.
#[derive(Default)]
struct Line(AtomicU32);

impl Line {
    /// Marks the next source line as the one expected to fail.
    fn next(&self, line: u32) {
        self.0.store(line + 1, Ordering::SeqCst);
    }
    fn get(&self) -> u32 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Checks kind, op, message fragments, program id and line of `e`.
#[track_caller]
fn expect(e: &NkiError, kind: ErrorKind, op: &str, fragments: &[&str], pid: &[usize], line: &Line) {
    assert_eq!(e.kind(), kind, "{e}");
    assert!(
        e.op().contains(op),
        "op {:?} does not name {op:?}: {e}",
        e.op()
    );
    for f in fragments {
        assert!(e.message().contains(f), "message lacks {f:?}: {e}");
    }
    assert_eq!(e.program_id(), Some(pid), "{e}");
    let loc = e.location().expect("location attached");
    assert!(loc.file.ends_with("errors.rs"), "{loc}");
    assert_eq!(loc.line, line.get(), "{e}");
    let shown = e.to_string();
    assert!(shown.contains(&format!("program id {pid:?}")), "{shown}");
    assert!(
        shown.contains(&format!("errors.rs:{}", line.get())),
        "{shown}"
    );
}

/// Runs `launch` with a fresh [`Line`], requires it to fail and checks the error with
/// [`expect`] against that line.
#[track_caller]
fn fails<R: std::fmt::Debug>(
    launch: impl FnOnce(&Line) -> Result<R, NkiError>,
    kind: ErrorKind,
    op: &str,
    fragments: &[&str],
    pid: &[usize],
) {
    let at = Line::default();
    let e = launch(&at).unwrap_err();
    expect(&e, kind, op, fragments, pid, &at);
}

fn f32_input(rows: usize, cols: usize) -> Hbm<f32> {
    let v: Vec<f32> = (0..rows * cols).map(|k| (k % 31) as f32).collect();
    Hbm::from_vec(&[rows, cols], v).unwrap()
}

// 1. Out-of-bounds HBM slice.
#[nki_kernel]
fn oob_slice(a: &Hbm<f32>, c: &mut Hbm<f32>, at: &Line) {
    let i = nl::program_id(0) * 128;
    at.next(line!());
    let x = nl::load(a.slice((i..i + 128, 0..512)));
    nl::store(c.slice((0..128, 0..512)), &x);
}

#[test]
fn out_of_bounds_hbm_slice() {
    let a = f32_input(128, 512);
    let mut c = Hbm::<f32>::zeros([128, 512]);
    fails(
        |at| launch!(oob_slice[2](&a, &mut c, at)),
        ErrorKind::OutOfBounds,
        "index",
        &[
            "shape [128, 512]",
            "dimension 0",
            "[128, 255]",
            "size of 128",
        ],
        &[1],
    );
}

// 2. Partition start-offset rule: a 64-partition view must start at partition 0 or 64.
#[nki_kernel]
fn bad_partition_start(a: &Hbm<f32>, c: &mut Hbm<f32>, at: &Line) {
    let x = nl::load(a.view());
    let v = x.slice((32..96, ..));
    at.next(line!());
    let y = nl::add(v, 1.0f32);
    nl::store(c.view(), &y);
}

#[test]
fn partition_start_offset_rule() {
    let a = f32_input(128, 64);
    let mut c = Hbm::<f32>::zeros([64, 64]);
    fails(
        |at| launch!(bad_partition_start[1](&a, &mut c, at)),
        ErrorKind::PartitionOffset,
        "add",
        &[
            "64 partitions",
            "starting at partition 32",
            "0 or 64",
            "[128, 64]",
        ],
        &[0],
    );
}

// 3. Partition-count mismatch in an element-wise op.
#[nki_kernel]
fn partition_mismatch(a: &Hbm<f32>, b: &Hbm<f32>, c: &mut Hbm<f32>, at: &Line) {
    let x = nl::load(a.view());
    let y = nl::load(b.view());
    at.next(line!());
    let z = nl::multiply(&x, &y);
    nl::store(c.view(), &z);
}

#[test]
fn partition_count_mismatch_in_elementwise() {
    let (a, b) = (f32_input(128, 512), f32_input(64, 512));
    let mut c = Hbm::<f32>::zeros([128, 512]);
    fails(
        |at| launch!(partition_mismatch[1](&a, &b, &mut c, at)),
        ErrorKind::PartitionMismatch,
        "multiply",
        &["[128, 512]", "[64, 512]", "partitions"],
        &[0],
    );
}

// 4. Wrong memory: a matmul reading a PSUM tile as its stationary operand.
#[nki_kernel]
fn matmul_from_psum(a: &Hbm<f32>, c: &mut Hbm<f32>, at: &Line) {
    let x = nl::load(a.view());
    let p = nl::zeros(&[128, 128], DType::F32, nl::PSUM);
    at.next(line!());
    let out = nisa::nc_matmul(&p, &x);
    nl::store(c.view(), &out);
}

#[test]
fn matmul_operand_in_psum_is_wrong_memory() {
    let a = f32_input(128, 512);
    let mut c = Hbm::<f32>::zeros([128, 512]);
    fails(
        |at| launch!(matmul_from_psum[1](&a, &mut c, at)),
        ErrorKind::WrongMemory,
        "nc_matmul",
        &["stationary", "'sbuf'", "'psum'", "[128, 128]"],
        &[0],
    );
}

// 5. Wrong memory: an on-chip constructor asked for HBM.
#[nki_kernel]
fn tile_in_hbm(c: &mut Hbm<f32>, at: &Line) {
    at.next(line!());
    let t = nl::zeros(&[128, 512], DType::F32, MemKind::Hbm);
    nl::store(c.view(), &t);
}

#[test]
fn on_chip_tile_in_hbm_is_wrong_memory() {
    let mut c = Hbm::<f32>::zeros([128, 512]);
    fails(
        |at| launch!(tile_in_hbm[1](&mut c, at)),
        ErrorKind::WrongMemory,
        "full",
        &["sbuf or psum"],
        &[0],
    );
}

// 6. dtype misuse: an int8 matmul, and fp32 mixed with bf16.
#[nki_kernel]
fn int8_matmul(a: &Hbm<i8>, c: &mut Hbm<f32>, at: &Line) {
    let x = nl::load(a.slice((.., 0..128)));
    let y = nl::load(a.view());
    at.next(line!());
    let out = nisa::nc_matmul(&x, &y);
    nl::store(c.view(), &out);
}

#[nki_kernel]
fn mixed_matmul(a: &Hbm<f32>, c: &mut Hbm<f32>, at: &Line) {
    let x = nl::load(a.slice((.., 0..128)));
    let y = nl::load_as(a.view(), DType::BF16);
    at.next(line!());
    let out = nisa::nc_matmul(&x, &y);
    nl::store(c.view(), &out);
}

#[test]
fn matmul_dtype_misuse() {
    let a = Hbm::<i8>::full([128, 512], 3);
    let mut c = Hbm::<f32>::zeros([128, 512]);
    fails(
        |at| launch!(int8_matmul[1](&a, &mut c, at)),
        ErrorKind::DType,
        "nc_matmul",
        &["int8"],
        &[0],
    );

    let a = f32_input(128, 512);
    fails(
        |at| launch!(mixed_matmul[1](&a, &mut c, at)),
        ErrorKind::DType,
        "nc_matmul",
        &["float32", "bfloat16"],
        &[0],
    );
}

// 7. Partition dimension over 128 at run time.
#[nki_kernel]
fn too_many_partitions(c: &mut Hbm<f32>, at: &Line) {
    let rows = c.shape()[0];
    at.next(line!());
    let t = nl::zeros(&[rows, 4], DType::F32, nl::SBUF);
    nl::store(c.view(), &t);
}

#[test]
fn partition_dim_over_128_at_run_time() {
    let mut c = Hbm::<f32>::zeros([256, 4]);
    fails(
        |at| launch!(too_many_partitions[1](&mut c, at)),
        ErrorKind::PartitionLimit,
        "full",
        &["256", "[256, 4]", "128"],
        &[0],
    );
}

// 8. A PSUM tile over one 2 KiB bank per partition at run time.
#[nki_kernel]
fn psum_over_bank(c: &mut Hbm<f32>, at: &Line) {
    let cols = c.shape()[1];
    at.next(line!());
    let t = nl::zeros(&[128, cols], DType::F32, nl::PSUM);
    nl::store(c.view(), &t);
}

#[test]
fn psum_tile_over_one_bank_at_run_time() {
    let mut c = Hbm::<f32>::zeros([128, 1024]);
    fails(
        |at| launch!(psum_over_bank[1](&mut c, at)),
        ErrorKind::PsumBankLimit,
        "full",
        &["[128, 1024]", "4096 bytes", "2048-byte bank"],
        &[0],
    );
}

// 9. SBUF capacity. Tiles that exceed SBUF only together are what the compiler resolves
// (live ranges, reloads, spills: shared/reference/calibration.md section 5), not an error;
// the tiles one instruction needs at once that do not fit are: the error lists them and
// where they were allocated.
#[nki_kernel]
fn sbuf_hog(c: &mut Hbm<f32>) {
    let mut live = Vec::new();
    for _ in nl::sequential_range(8) {
        // 64 KiB per partition each: two (trn1) or three (trn2) of them fit in SBUF.
        let t = nl::zeros(&[128, 16384], DType::F32, nl::SBUF);
        live.push(t);
    }
    nl::store(c.view(), &live[0]);
}

#[nki_kernel]
fn sbuf_one_op_too_big(c: &mut Hbm<f32>, free: usize, at: &Line) {
    // Three tiles of a third of SBUF and more: one add needs all three at once.
    let a = nl::zeros(&[128, free], DType::F32, nl::SBUF);
    let b = nl::zeros(&[128, free], DType::F32, nl::SBUF);
    at.next(line!());
    let s = nl::add(&a, &b);
    nl::store(c.slice((.., 0..free)), &s);
}

#[test]
fn sbuf_tiles_over_capacity_together_are_resolved_not_rejected() {
    for target in [Target::Trn1, Target::Trn2] {
        let mut c = Hbm::<f32>::zeros([128, 16384]);
        for mode in [Mode::Execute, Mode::Estimate] {
            let r = sbuf_hog::run(Launch::new(1).target(target).mode(mode), &mut c);
            assert!(r.is_ok(), "{target:?} {mode:?}: {:?}", r.err());
        }
        // Only the first tile is read again: the others die at their fill, nothing moves.
        let p = sbuf_hog::estimate(Grid::new([1]), target, &mut c).unwrap();
        assert!(p.spills.is_empty(), "{:?}", p.spills);
        assert!(p.memory.sbuf_bytes_per_partition <= target.spec().sbuf_bytes_per_partition);
    }
}

#[test]
fn sbuf_capacity_exceeded_by_one_instruction_lists_its_tiles() {
    for target in [Target::Trn1, Target::Trn2] {
        let cap = target.spec().sbuf_bytes_per_partition;
        let free = cap / 4 / 3 + 256;
        let mut c = Hbm::<f32>::shape_only([128, free]);
        let at = Line::default();
        let e =
            sbuf_one_op_too_big::estimate(Grid::new([1]), target, &mut c, free, &at).unwrap_err();
        let bytes = format!("{} B/partition", free * 4);
        let usable = format!("{cap} usable");
        expect(
            &e,
            ErrorKind::Capacity,
            "add",
            &[
                "SBUF capacity exceeded",
                &format!("[128, {free}]"),
                &bytes,
                &usable,
            ],
            &[0],
            &at,
        );
        assert_eq!(
            e.message().matches("allocated at").count(),
            3,
            "one line per tile of the instruction: {e}"
        );
    }
}

// 10. PSUM banks exhausted: a ninth live one-bank PSUM tile.
#[nki_kernel]
fn psum_hog(c: &mut Hbm<f32>, at: &Line) {
    let mut banks = Vec::new();
    for _ in 0..8 {
        banks.push(nl::zeros(&[128, 512], DType::F32, nl::PSUM));
    }
    at.next(line!());
    let ninth = nl::zeros(&[128, 512], DType::F32, nl::PSUM);
    nl::store(c.view(), &ninth);
    drop(banks);
}

#[test]
fn psum_banks_exhausted() {
    let mut c = Hbm::<f32>::zeros([128, 512]);
    fails(
        |at| launch!(psum_hog[1](&mut c, at)),
        ErrorKind::Capacity,
        "full",
        &[
            "PSUM capacity exceeded",
            "16384",
            "held by 8 live tiles",
            "[128, 512]",
        ],
        &[0],
    );
}

// 11. Reading a tile nothing has written.
#[nki_kernel]
fn uninit_read(c: &mut Hbm<f32>, at: &Line) {
    let t = nl::ndarray(&[128, 512], DType::F32, nl::SBUF);
    at.next(line!());
    let u = nl::add(&t, 1.0f32);
    nl::store(c.view(), &u);
}

#[test]
fn uninitialised_tile_read() {
    let mut c = Hbm::<f32>::zeros([128, 512]);
    fails(
        |at| launch!(uninit_read[1](&mut c, at)),
        ErrorKind::UninitializedRead,
        "add",
        &["[128, 512]", "before anything wrote it", "allocated at"],
        &[0],
    );
}

// 12. Two program instances writing the same HBM region.
#[nki_kernel]
fn racy_instances(a: &Hbm<f32>, c: &mut Hbm<f32>, at: &Line) {
    let x = nl::load(a.view());
    at.next(line!());
    nl::store(c.slice((0..128, 0..64)), &x);
}

#[test]
fn race_between_program_instances() {
    let a = f32_input(128, 64);
    let mut c = Hbm::<f32>::zeros([128, 64]);
    let at = Line::default();
    let e = launch!(racy_instances[3](&a, &mut c, &at)).unwrap_err();
    let first = format!("program id [0] at {}:{}", file!(), at.get());
    let second = format!("again by program id [1] at {}:{}", file!(), at.get());
    expect(
        &e,
        ErrorKind::OutputDependency,
        "store",
        &[
            "unexpected output dependencies",
            &first,
            &second,
            "[128, 64]",
        ],
        &[1],
        &at,
    );
}

// 13. Two affine_range iterations writing the same region; sequential_range may.
#[nki_kernel]
fn racy_loop(a: &Hbm<f32>, c: &mut Hbm<f32>, at: &Line, affine: bool) {
    let x = nl::load(a.view());
    if affine {
        for _i in nl::affine_range(4) {
            at.next(line!());
            nl::store(c.view(), &x);
        }
    } else {
        for _i in nl::sequential_range(4) {
            nl::store(c.view(), &x);
        }
    }
}

#[test]
fn race_between_affine_iterations_but_not_sequential() {
    let a = f32_input(128, 64);
    let mut c = Hbm::<f32>::zeros([128, 64]);
    let at = Line::default();
    fails(
        |at| launch!(racy_loop[1](&a, &mut c, at, true)),
        ErrorKind::OutputDependency,
        "store",
        &[
            "affine_range iteration (0)",
            "affine_range iteration (1)",
            "sequential_range",
        ],
        &[0],
    );
    launch!(racy_loop[1](&a, &mut c, &at, false)).unwrap();
    assert_eq!(c.to_f32_vec().unwrap(), a.to_f32_vec().unwrap());
}

// 14. Contraction mismatch, and the TensorE free-size limits at run time.
#[nki_kernel]
fn bad_matmul(a: &Hbm<f32>, b: &Hbm<f32>, c: &mut Hbm<f32>, at: &Line) {
    let s = nl::load(a.view());
    let m = nl::load(b.view());
    at.next(line!());
    let out = nisa::nc_matmul(&s, &m);
    nl::store(c.view(), &out);
}

#[test]
fn matmul_contraction_mismatch() {
    let (a, b) = (f32_input(128, 128), f32_input(64, 512));
    let mut c = Hbm::<f32>::zeros([128, 512]);
    fails(
        |at| launch!(bad_matmul[1](&a, &b, &mut c, at)),
        ErrorKind::ContractionMismatch,
        "nc_matmul",
        &["K=128", "K=64", "[128, 128]", "[64, 512]"],
        &[0],
    );
}

#[test]
fn matmul_free_size_limits_at_run_time() {
    let (a, b) = (f32_input(128, 128), f32_input(128, 1024));
    let mut c = Hbm::<f32>::zeros([128, 1024]);
    fails(
        |at| launch!(bad_matmul[1](&a, &b, &mut c, at)),
        ErrorKind::MatmulLimit,
        "nc_matmul",
        &["moving[128, 1024]", "1024", "gemm_moving_fmax of 512"],
        &[0],
    );
    let (a, b) = (f32_input(128, 256), f32_input(128, 512));
    fails(
        |at| launch!(bad_matmul[1](&a, &b, &mut c, at)),
        ErrorKind::MatmulLimit,
        "nc_matmul",
        &["stationary[128, 256]", "gemm_stationary_fmax of 128"],
        &[0],
    );
}

// 15. Shape mismatch in a store.
#[nki_kernel]
fn bad_store(a: &Hbm<f32>, c: &mut Hbm<f32>, at: &Line) {
    let x = nl::load(a.view());
    at.next(line!());
    nl::store(c.slice((0..128, 0..256)), &x);
}

#[test]
fn store_shape_mismatch() {
    let a = f32_input(128, 512);
    let mut c = Hbm::<f32>::zeros([128, 512]);
    fails(
        |at| launch!(bad_store[1](&a, &mut c, at)),
        ErrorKind::ShapeMismatch,
        "store",
        &["[128, 256]", "[128, 512]", "different shapes"],
        &[0],
    );
}

// 16. A Rust panic inside a kernel body becomes KernelPanic with the program id.
#[nki_kernel]
fn panicking(c: &mut Hbm<f32>, table: &[usize]) {
    let i = nl::program_id(0);
    let t = nl::zeros(&[128, 4], DType::F32, nl::SBUF);
    nl::store(c.slice((i * 128..i * 128 + 128, ..)), &t);
    let _ = table[i]; // out of range for i >= table.len()
}

#[test]
fn rust_panic_in_kernel_is_kernel_panic() {
    let mut c = Hbm::<f32>::zeros([512, 4]);
    let table = vec![1usize, 2];
    let e = launch!(panicking[4](&mut c, &table)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::KernelPanic, "{e}");
    assert_eq!(e.program_id(), Some(&[2usize][..]), "{e}");
    assert!(e.message().contains("index out of bounds"), "{e}");
}

// 17. Malformed grids.
#[nki_kernel]
fn noop(c: &mut Hbm<f32>) {
    let t = nl::zeros(&[1, 1], DType::F32, nl::SBUF);
    let (i, j) = (nl::program_id(0), nl::program_id(1));
    nl::store(c.slice((i..i + 1, j..j + 1)), &t);
}

#[test]
fn invalid_grids() {
    let mut c = Hbm::<f32>::zeros([4, 4]);
    let cases: Vec<(Grid, &str)> = vec![
        (Grid::from_dims(vec![]), "1 to 3 dimensions, got 0"),
        (Grid::new([1, 1, 1, 1]), "1 to 3 dimensions, got 4"),
        (Grid::new([nc(2), nc(2)]), "nc() more than once"),
        (Grid::new([2, 0]), "empty dimension"),
    ];
    for (g, msg) in cases {
        let shown = g.to_string();
        let e = noop::launch(g, &mut c).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidGrid, "{e}");
        assert_eq!(e.op(), "launch");
        assert!(e.message().contains(msg), "{shown}: {e}");
        assert_eq!(e.program_id(), None);
    }
    noop::launch(Grid::new([2, 2]), &mut c).unwrap();
}

// 18. A shape-only tensor in an execute-mode launch (fine when estimating).
#[nki_kernel]
fn reads_input(a: &Hbm<f32>, c: &mut Hbm<f32>, at: &Line) {
    at.next(line!());
    let x = nl::load(a.view());
    nl::store(c.view(), &x);
}

#[test]
fn shape_only_tensor_in_execute_mode() {
    let a = Hbm::<f32>::shape_only([128, 512]);
    let mut c = Hbm::<f32>::zeros([128, 512]);
    let at = Line::default();
    fails(
        |at| launch!(reads_input[1](&a, &mut c, at)),
        ErrorKind::NoData,
        "load",
        &["shape_only", "[128, 512]"],
        &[0],
    );
    let mut c_shape = Hbm::<f32>::shape_only([128, 512]);
    reads_input::run(Launch::new(1).mode(Mode::Estimate), &a, &mut c_shape, &at).unwrap();
}

// 19. The first failure cancels the instances that have not started yet.
#[nki_kernel]
fn fails_from(c: &mut Hbm<f32>, started: &AtomicUsize, at: &Line) {
    started.fetch_add(1, Ordering::SeqCst);
    let i = nl::program_id(0);
    let t = nl::zeros(&[128, 4], DType::F32, nl::SBUF);
    let rows = if i >= 1 { 256 } else { 128 };
    at.next(line!());
    nl::store(c.slice((i * 128..i * 128 + rows, ..)), &t);
}

#[test]
fn failure_cancels_remaining_instances() {
    let mut c = Hbm::<f32>::zeros([1024, 4]);
    let started = AtomicUsize::new(0);
    // On one host thread, instance 1's failure stops the launch before instance 2 starts.
    fails(
        |at| fails_from::run(Launch::new(8).host_threads(1), &mut c, &started, at),
        ErrorKind::ShapeMismatch,
        "store",
        &["[256, 4]", "[128, 4]"],
        &[1],
    );
    assert_eq!(
        started.load(Ordering::SeqCst),
        2,
        "instances 2..8 were cancelled"
    );
    // On every host thread, each other thread may have started one more (failing) instance
    // before instance 1 failed; none starts after a failure.
    started.store(0, Ordering::SeqCst);
    fails(
        |at| launch!(fails_from[8](&mut c, &started, at)),
        ErrorKind::ShapeMismatch,
        "store",
        &["[256, 4]", "[128, 4]"],
        &[1],
    );
    let n = started.load(Ordering::SeqCst);
    let most = 1 + nki_core::host_threads();
    assert!((2..=most.min(8)).contains(&n), "{n} instances started");
}

// 20. With two cores, the lowest failing instance is reported even when a higher one failed
//     first.
#[nki_kernel]
fn two_failures(c: &mut Hbm<f32>, flags: &[AtomicBool; 2], at: &Line) {
    let i = nl::program_id(0);
    let t = nl::zeros(&[128, 4], DType::F32, nl::SBUF);
    // Bounded waits: a broken launcher makes the test fail, never hang.
    let wait = |f: &AtomicBool| {
        let t0 = Instant::now();
        while !f.load(Ordering::SeqCst) && t0.elapsed() < Duration::from_secs(5) {
            std::thread::yield_now();
        }
    };
    match i {
        // Core 1's first instance: starts, waits until instance 2 (core 0) is failing, then
        // panics outside the funnel, so cancellation cannot swallow its error.
        1 => {
            flags[0].store(true, Ordering::SeqCst);
            wait(&flags[1]);
            std::thread::sleep(Duration::from_millis(20));
            panic!("instance 1 gives up");
        }
        2 => {
            wait(&flags[0]);
            flags[1].store(true, Ordering::SeqCst);
            at.next(line!());
            nl::store(c.slice((0..64, ..)), &t);
        }
        _ => nl::store(c.slice((i * 128..i * 128 + 128, ..)), &t),
    }
}

#[test]
fn lowest_failing_instance_is_reported() {
    let mut c = Hbm::<f32>::zeros([512, 4]);
    let flags = [AtomicBool::new(false), AtomicBool::new(false)];
    let at = Line::default();
    let e = launch!(two_failures[spmd_dim(2, nc(2))](&mut c, &flags, &at)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::KernelPanic, "{e}");
    assert_eq!(e.program_id(), Some(&[1usize][..]), "{e}");
    assert!(e.message().contains("instance 1 gives up"), "{e}");
    // Both failures really happened (instance 2 reached its failing store).
    assert!(flags[1].load(Ordering::SeqCst));
}

// 21. Typed tiles: a run-time shape that does not match the type.
#[nki_kernel]
fn typed_wrong_shape(a: &Hbm<f32>, c: &mut Hbm<f32>, at: &Line) {
    at.next(line!());
    let x: Sbuf<f32, 128, 512> = Sbuf::load(a.view());
    nl::store(c.view(), &x);
}

#[nki_kernel]
fn typed_from_tile(c: &mut Hbm<f32>, at: &Line) {
    let t = nl::zeros(&[128, 256], DType::F32, nl::SBUF);
    at.next(line!());
    let x: Sbuf<f32, 128, 512> = Sbuf::from_tile(t);
    nl::store(c.view(), &x);
}

#[nki_kernel]
fn typed_ok(a: &Hbm<f32>, b: &Hbm<f32>, c: &mut Hbm<f32>) {
    let x: Sbuf<f32, 64, 128> = Sbuf::load(a.view());
    let y: Sbuf<f32, 64, 256> = Sbuf::load(b.view());
    let p = typed::matmul(&x, &y);
    nl::store(c.view(), &p);
    // TryFrom reports a mismatch as a value instead of failing the instance.
    let kind = |t: Tile| {
        Sbuf::<f32, 64, 128>::try_from(t)
            .map(|_| ())
            .unwrap_err()
            .kind()
    };
    assert_eq!(
        kind(nl::zeros(&[64, 256], DType::F32, nl::SBUF)),
        ErrorKind::ShapeMismatch
    );
    assert_eq!(
        kind(nl::zeros(&[64, 128], DType::BF16, nl::SBUF)),
        ErrorKind::DType
    );
    assert_eq!(
        kind(nl::zeros(&[64, 128], DType::F32, nl::PSUM)),
        ErrorKind::WrongMemory
    );
    assert!(Sbuf::<f32, 64, 128>::try_from(nl::zeros(&[64, 128], DType::F32, nl::SBUF)).is_ok());
}

#[test]
fn typed_tiles_check_run_time_shapes() {
    let a = f32_input(128, 256);
    let mut c = Hbm::<f32>::zeros([128, 512]);
    fails(
        |at| launch!(typed_wrong_shape[1](&a, &mut c, at)),
        ErrorKind::ShapeMismatch,
        "Sbuf::load",
        &["[128, 256]", "Sbuf<float32, 128, 512>"],
        &[0],
    );
    fails(
        |at| launch!(typed_from_tile[1](&mut c, at)),
        ErrorKind::ShapeMismatch,
        "Sbuf::from_tile",
        &["[128, 256]", "[128, 512]"],
        &[0],
    );
    let (x, y) = (f32_input(64, 128), f32_input(64, 256));
    let mut out = Hbm::<f32>::zeros([128, 256]);
    launch!(typed_ok[1](&x, &y, &mut out)).unwrap();
    let (xv, yv, ov) = (
        x.to_f32_vec().unwrap(),
        y.to_f32_vec().unwrap(),
        out.to_f32_vec().unwrap(),
    );
    for i in 0..128 {
        for j in 0..256 {
            let want: f32 = (0..64).map(|k| xv[k * 128 + i] * yv[k * 256 + j]).sum();
            assert_eq!(ov[i * 256 + j], want);
        }
    }
}

// 22. Element-wise shape mismatch (free dims that do not broadcast).
#[nki_kernel]
fn free_mismatch(a: &Hbm<f32>, b: &Hbm<f32>, c: &mut Hbm<f32>, at: &Line) {
    let x = nl::load(a.view());
    let y = nl::load(b.view());
    at.next(line!());
    let z = nl::add(&x, &y);
    nl::store(c.view(), &z);
}

#[test]
fn elementwise_free_shape_mismatch() {
    let (a, b) = (f32_input(128, 512), f32_input(128, 384));
    let mut c = Hbm::<f32>::zeros([128, 512]);
    fails(
        |at| launch!(free_mismatch[1](&a, &b, &mut c, at)),
        ErrorKind::ShapeMismatch,
        "add",
        &["[128, 512]", "[128, 384]", "cannot be broadcast"],
        &[0],
    );
}

// 23. An nl call outside any launch panics with a clear message (it is a Rust-side misuse, not
//     a kernel error); inside a launch the same call works.
#[test]
fn nl_call_outside_a_kernel_panics_clearly() {
    let r = std::panic::catch_unwind(|| nl::program_id(0));
    let payload = r.unwrap_err();
    let msg = payload
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(msg.contains("outside of a kernel launch"), "{msg}");
    assert!(msg.contains("program_id"), "{msg}");
}

// Errors in estimate mode carry the same facts as in execute mode.
#[test]
fn estimate_mode_reports_the_same_error() {
    let (a, b) = (f32_input(128, 128), f32_input(64, 512));
    let mut c = Hbm::<f32>::zeros([128, 512]);
    fails(
        |at| bad_matmul::run(Launch::new(1).mode(Mode::Estimate), &a, &b, &mut c, at),
        ErrorKind::ContractionMismatch,
        "nc_matmul",
        &["K=128", "K=64"],
        &[0],
    );
}

// Failed launches leave nothing behind: the same failing launch reports the same error again,
// and a correct launch on the same tensors then succeeds.
#[test]
fn repeated_failing_launches_report_their_own_error() {
    let mut c = Hbm::<f32>::zeros([512, 4]);
    let table = vec![1usize];
    for _ in 0..3 {
        let e = launch!(panicking[4](&mut c, &table)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::KernelPanic, "{e}");
        assert_eq!(e.program_id(), Some(&[1usize][..]), "{e}");
    }
    let table = vec![0usize; 4];
    launch!(panicking[4](&mut c, &table)).unwrap();
}

// 24. A reduction over the partition axis (nl.sum and nisa.tensor_reduce).
#[nki_kernel]
fn partition_reduce(a: &Hbm<f32>, c: &mut Hbm<f32>, at: &Line, isa: bool) {
    let x = nl::load(a.view());
    let s = if isa {
        at.next(line!());
        nisa::tensor_reduce(nisa::AluOp::Add, &x, &[0], false, false, None)
    } else {
        at.next(line!());
        nl::sum(&x, &[0], true)
    };
    nl::store(c.view(), &s);
}

#[test]
fn reduction_over_the_partition_axis() {
    let a = f32_input(128, 512);
    let mut c = Hbm::<f32>::zeros([1, 512]);
    for (isa, op) in [(false, "nl.sum"), (true, "tensor_reduce")] {
        fails(
            |at| launch!(partition_reduce[1](&a, &mut c, at, isa)),
            ErrorKind::PartitionReduction,
            op,
            &["partition axis", "axis 0", "[128, 512]"],
            &[0],
        );
    }
}

// 25. Wrong memory: a TensorE transpose reading PSUM.
#[nki_kernel]
fn transpose_psum(c: &mut Hbm<f32>, at: &Line) {
    let p = nl::zeros(&[64, 128], DType::F32, nl::PSUM);
    at.next(line!());
    let t = nisa::nc_transpose(&p, nisa::Engine::Tensor);
    nl::store(c.view(), &t);
}

#[test]
fn tensor_engine_transpose_of_psum_is_wrong_memory() {
    let mut c = Hbm::<f32>::zeros([128, 64]);
    fails(
        |at| launch!(transpose_psum[1](&mut c, at)),
        ErrorKind::WrongMemory,
        "nc_transpose",
        &["'data'", "'sbuf'", "'psum'", "[64, 128]"],
        &[0],
    );
}

// 26. Output-dependency tracking has no false positives: interleaved (strided) columns written
//     by different instances, affine iterations writing their own rows, sequential passes over
//     one affine loop, and a store after the loop are all legal; nested affine iterations
//     writing one row are not.
#[nki_kernel]
fn strided_columns(a: &Hbm<f32>, c: &mut Hbm<f32>) {
    let i = nl::program_id(0);
    let x = nl::load(a.slice((.., stepped(i..64, 2))));
    nl::store(c.slice((.., stepped(i..64, 2))), &x);
}

#[nki_kernel]
fn loops(a: &Hbm<f32>, c: &mut Hbm<f32>, at: &Line, nested_affine: bool) {
    let x = nl::load(a.slice((0..32, ..)));
    for _pass in nl::sequential_range(2) {
        for i in nl::affine_range(4) {
            nl::store(c.slice((i * 32..i * 32 + 32, ..)), &x);
        }
    }
    nl::store(c.slice((0..32, ..)), &x);
    for i in nl::affine_range(2) {
        if nested_affine {
            for _j in nl::affine_range(2) {
                at.next(line!());
                nl::store(c.slice((i * 32..i * 32 + 32, ..)), &x);
            }
        } else {
            for _j in nl::sequential_range(2) {
                nl::store(c.slice((i * 32..i * 32 + 32, ..)), &x);
            }
        }
    }
}

#[test]
fn output_dependency_tracking_has_no_false_positives() {
    let a = f32_input(128, 64);
    let mut c = Hbm::<f32>::zeros([128, 64]);
    launch!(strided_columns[2](&a, &mut c)).unwrap();
    assert_eq!(c.to_f32_vec().unwrap(), a.to_f32_vec().unwrap());

    let mut c = Hbm::<f32>::zeros([128, 64]);
    let at = Line::default();
    launch!(loops[1](&a, &mut c, &at, false)).unwrap();
    let (av, cv) = (a.to_f32_vec().unwrap(), c.to_f32_vec().unwrap());
    for r in 0..128 {
        assert_eq!(
            cv[r * 64..r * 64 + 64],
            av[(r % 32) * 64..(r % 32) * 64 + 64]
        );
    }
    fails(
        |at| launch!(loops[1](&a, &mut c, at, true)),
        ErrorKind::OutputDependency,
        "store",
        &[
            "affine_range iteration (0, 0)",
            "affine_range iteration (0, 1)",
        ],
        &[0],
    );
}

// 25. Estimate mode (timeline only, no values) still reports the value-level errors:
// uninitialised reads (checked on the instruction records) and output races (writer tags kept
// without values, shape-only tensors included).

/// An estimate-mode launch of `grid` on the default target.
fn estimating(grid: impl Into<Grid>) -> Launch {
    Launch::new(grid).mode(Mode::Estimate)
}

#[test]
fn uninitialised_read_is_reported_in_estimate_mode() {
    let mut c = Hbm::<f32>::shape_only([128, 512]);
    fails(
        |at| uninit_read::run(estimating(1), &mut c, at),
        ErrorKind::UninitializedRead,
        "add",
        &[
            "sbuf tile 't' float32[128, 512]",
            "before anything wrote it",
            "allocated at",
        ],
        &[0],
    );
}

/// Instance 0 writes its tile before reading it; the others read it unwritten, through the
/// op chosen by `how` (0: activation, 1: matmul operand, 2: DMA to HBM, 3: store of a view).
#[nki_kernel]
fn uninit_on_some_instances(a: &Hbm<f32>, c: &mut Hbm<f32>, at: &Line, how: usize) {
    let p = nl::program_id(0);
    let t = nl::ndarray(&[128, 64], DType::F32, nl::SBUF);
    if p == 0 {
        // Written whole (written-ness is per element in execute mode; see tests/misuse.rs).
        nl::assign(&t, &nl::load(a.view()));
    }
    let rows = p * 128..(p + 1) * 128;
    match how {
        0 => {
            at.next(line!());
            let u = nl::exp(&t);
            nl::store(c.slice((rows, ..)), &u);
        }
        1 => {
            let x = nl::load(a.view());
            at.next(line!());
            let m = nisa::nc_matmul(&t, &x);
            nl::store(c.slice((p * 128..p * 128 + 64, ..)), &nl::copy(&m, None));
        }
        2 => {
            at.next(line!());
            nisa::dma_copy(c.slice((rows, ..)), &t);
        }
        _ => {
            at.next(line!());
            nl::store(c.slice((rows, 0..32)), t.slice((.., 32..64)));
        }
    }
}

#[test]
fn uninitialised_reads_name_the_instance_and_line_in_both_modes() {
    let a = f32_input(128, 64);
    for (how, op) in [(0, "exp"), (1, "matmul"), (2, "dma_copy"), (3, "store")] {
        let at = Line::default();
        let mut c = Hbm::<f32>::zeros([256, 64]);
        let est = uninit_on_some_instances::run(estimating(2), &a, &mut c, &at, how).unwrap_err();
        expect(
            &est,
            ErrorKind::UninitializedRead,
            op,
            &["float32[128, 64]", "before anything wrote it"],
            &[1],
            &at,
        );
        let exe = launch!(uninit_on_some_instances[2](&a, &mut c, &at, how)).unwrap_err();
        assert_eq!(exe.kind(), est.kind(), "{exe}");
        assert_eq!(exe.program_id(), est.program_id(), "{exe}");
        assert_eq!(
            exe.location().map(|l| l.line),
            est.location().map(|l| l.line)
        );
        // Both name where the tile was allocated.
        let alloc = format!("allocated at {}:", file!());
        assert!(est.message().contains(&alloc), "{est}");
        assert!(exe.message().contains(&alloc), "{exe}");
    }
}

/// `acc += a_t[k]^T @ b[k]` over `k` into a PSUM accumulator from `nl::ndarray` (the first
/// matmul opens the group, nothing reads the unwritten accumulator), then a tiled add of
/// `bias`; `early_read` reads the accumulator before any matmul wrote it.
#[nki_kernel]
fn accumulate(
    a_t: &Hbm<f32>,
    b: &Hbm<f32>,
    bias: &Hbm<f32>,
    c: &mut Hbm<f32>,
    at: &Line,
    early_read: bool,
) {
    let p = nl::program_id(0);
    let (m, n) = (64, 128);
    let acc = nl::ndarray(&[m, n], DType::F32, nl::PSUM);
    if early_read {
        at.next(line!());
        let _ = nl::copy(&acc, None);
    }
    for k in nl::affine_range(a_t.shape()[0] / 128) {
        let x = nl::load(a_t.slice((k * 128..(k + 1) * 128, p * m..(p + 1) * m)));
        let y = nl::load(b.slice((k * 128..(k + 1) * 128, ..)));
        nisa::nc_matmul_acc(&acc, &x, &y);
    }
    let out = nl::ndarray(&[m, n], DType::F32, nl::SBUF);
    for j in nl::affine_range(n / 32) {
        let cols = j * 32..(j + 1) * 32;
        let z = nl::load(bias.slice((p * m..(p + 1) * m, cols.clone())));
        nl::assign(
            out.slice((.., cols.clone())),
            &nl::add(acc.slice((.., cols)), &z),
        );
    }
    nl::store(c.slice((p * m..(p + 1) * m, ..)), &out);
}

#[test]
fn correct_kernels_pass_in_estimate_mode_and_compute_in_execute_mode() {
    let (kk, mm, n) = (256, 128, 128);
    let (a_t, b, bias) = (f32_input(kk, mm), f32_input(kk, n), f32_input(mm, n));
    let at = Line::default();
    // Estimate mode on shape-only tensors: no error and a timeline.
    let (sa, sb, sbias) = (
        Hbm::<f32>::shape_only([kk, mm]),
        Hbm::<f32>::shape_only([kk, n]),
        Hbm::<f32>::shape_only([mm, n]),
    );
    let mut sc = Hbm::<f32>::shape_only([mm, n]);
    let p = accumulate::estimate(2, Target::Trn2, &sa, &sb, &sbias, &mut sc, &at, false).unwrap();
    assert!(p.instructions > 0);
    // Estimate mode on real tensors leaves the output's values alone (tags only), twice
    // (tags of the first launch are stale in the second).
    let mut c = Hbm::<f32>::full([mm, n], 7.0);
    for _ in 0..2 {
        accumulate::run(estimating(2), &a_t, &b, &bias, &mut c, &at, false).unwrap();
    }
    assert!(c.to_f32_vec().unwrap().iter().all(|&v| v == 7.0));
    // Execute mode computes c = a_t^T @ b + bias (plain-loop reference).
    launch!(accumulate[2](&a_t, &b, &bias, &mut c, &at, false)).unwrap();
    let (av, bv, zv) = (
        a_t.to_f32_vec().unwrap(),
        b.to_f32_vec().unwrap(),
        bias.to_f32_vec().unwrap(),
    );
    let got = c.to_f32_vec().unwrap();
    for i in 0..mm {
        for j in 0..n {
            let dot: f64 = (0..kk)
                .map(|k| av[k * mm + i] as f64 * bv[k * n + j] as f64)
                .sum();
            let want = dot + zv[i * n + j] as f64;
            assert!(
                (got[i * n + j] as f64 - want).abs() <= 1e-3 * want.abs().max(1.0),
                "({i}, {j})"
            );
        }
    }
    // Reading the accumulator before the first matmul is an error in both modes.
    fails(
        |at| accumulate::run(estimating(2), &sa, &sb, &sbias, &mut sc, at, true),
        ErrorKind::UninitializedRead,
        "copy",
        &["psum tile 'acc' float32[64, 128]"],
        &[0],
    );
    fails(
        |at| launch!(accumulate[2](&a_t, &b, &bias, &mut c, at, true)),
        ErrorKind::UninitializedRead,
        "copy",
        &["psum tile 'acc' float32[64, 128]"],
        &[0],
    );
}

#[test]
fn output_races_are_reported_in_estimate_mode() {
    // Between program instances, on shape-only tensors.
    let a = Hbm::<f32>::shape_only([128, 64]);
    let mut c = Hbm::<f32>::shape_only([128, 64]);
    let at = Line::default();
    let e = racy_instances::run(estimating(3), &a, &mut c, &at).unwrap_err();
    let first = format!("program id [0] at {}:{}", file!(), at.get());
    let second = format!("again by program id [1] at {}:{}", file!(), at.get());
    expect(
        &e,
        ErrorKind::OutputDependency,
        "store",
        &[
            "unexpected output dependencies",
            "element [0, 0]",
            &first,
            &second,
        ],
        &[1],
        &at,
    );
    // Between affine_range iterations, but not sequential_range ones.
    fails(
        |at| racy_loop::run(estimating(1), &a, &mut c, at, true),
        ErrorKind::OutputDependency,
        "store",
        &["affine_range iteration (0)", "affine_range iteration (1)"],
        &[0],
    );
    racy_loop::run(estimating(1), &a, &mut c, &at, false).unwrap();
    // No false positives: interleaved strided stores, and repeated stores in sequential loops.
    strided_columns::run(estimating(2), &a, &mut c).unwrap();
    let a = Hbm::<f32>::shape_only([128, 64]);
    let mut c = Hbm::<f32>::shape_only([128, 64]);
    loops::run(estimating(1), &a, &mut c, &at, false).unwrap();
    fails(
        |at| loops::run(estimating(1), &a, &mut c, at, true),
        ErrorKind::OutputDependency,
        "store",
        &[
            "affine_range iteration (0, 0)",
            "affine_range iteration (0, 1)",
        ],
        &[0],
    );
}

/// Every instance DMAs its tile to `c` at row offset `p * step` (overlapping when step < 32).
#[nki_kernel]
fn dma_rows(a: &Hbm<f32>, c: &mut Hbm<f32>, at: &Line, step: usize) {
    let p = nl::program_id(0);
    let t = nl::load(a.slice((0..32, ..)));
    at.next(line!());
    nisa::dma_copy(c.slice((p * step..p * step + 32, ..)), &t);
}

#[test]
fn dma_copy_races_are_reported_in_estimate_mode() {
    let a = Hbm::<f32>::shape_only([32, 16]);
    let mut c = Hbm::<f32>::shape_only([128, 16]);
    let at = Line::default();
    dma_rows::run(estimating(4), &a, &mut c, &at, 32).unwrap();
    let e = dma_rows::run(estimating(4), &a, &mut c, &at, 31).unwrap_err();
    // Instance 1 writes rows 31..63, of which row 31 is instance 0's.
    let second = format!("again by program id [1] at {}:{}", file!(), at.get());
    // The op is the API the kernel called, not a store.
    expect(
        &e,
        ErrorKind::OutputDependency,
        "dma_copy",
        &["element [31, 0]", &second],
        &[1],
        &at,
    );
    // Execute mode agrees.
    let a = f32_input(32, 16);
    let mut c = Hbm::<f32>::zeros([128, 16]);
    let x = launch!(dma_rows[4](&a, &mut c, &at, 31)).unwrap_err();
    assert_eq!(
        (x.kind(), x.program_id()),
        (e.kind(), e.program_id()),
        "{x}"
    );
    assert_eq!(
        x.message(),
        e.message().replace(&hbm_name(&e), &hbm_name(&x))
    );
    // The tensor is named after the kernel parameter.
    assert_eq!(hbm_name(&x), "c", "{x}");
}

/// The tensor name (the kernel parameter's, else `hbmN`) an output-dependency message is
/// about.
fn hbm_name(e: &NkiError) -> String {
    let m = e.message();
    let at = m.find("] of ").expect("names the tensor") + 5;
    m[at..].split_whitespace().next().unwrap().to_string()
}

// A one-instance estimate whose records are followed by a modelling thread while it records
// (thousands of records) and that then fails or panics: the launch reports the failure and
// does not hang; the same kernel then estimates normally.
#[nki_kernel]
fn many_records_then(c: &mut Hbm<f32>, how: usize, at: &Line) {
    let t = nl::zeros(&[128, 4], DType::F32, nl::SBUF);
    for _ in 0..5000 {
        let _ = nl::add(&t, 1.0f32);
    }
    match how {
        0 => {
            at.next(line!());
            nl::store(c.slice((0..256, ..)), &t);
        }
        1 => panic!("late panic"),
        _ => nl::store(c.slice((0..128, ..)), &t),
    }
}

#[test]
fn a_long_estimate_that_fails_late_reports_its_error() {
    let mut c = Hbm::<f32>::shape_only([128, 4]);
    fails(
        |at| many_records_then::run(estimating(1), &mut c, 0, at),
        ErrorKind::OutOfBounds,
        "index",
        &["[0, 255]"],
        &[0],
    );
    let at = Line::default();
    let e = many_records_then::run(estimating(1), &mut c, 1, &at).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::KernelPanic, "{e}");
    let r = many_records_then::run(estimating(1), &mut c, 2, &at).unwrap();
    let p = r.profile.expect("an estimate models a timeline");
    assert_eq!(p.instructions, 5002, "{p:?}");
}
