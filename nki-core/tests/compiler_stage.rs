//! The `compiler` stage between recording and costing: duplicate-load removal, hoisting out of
//! `affine_range` loops, multi-buffering and PSUM zero-fill folding, each switchable, each
//! listed in the profile; on by default for Beta-1 kernels (the compiler always ran them),
//! and with `CompilerStage::OFF` the kernel is costed as written.

use nki_core::nisa::classic as nisa;
use nki_core::prelude::*;
use nki_core::{with_compiler_stage, CompilerKind, CompilerStage};

/// Line of the `affine_range` call of [`invariant_loads`] (checked by the profile test).
const INVARIANT_LOOP_LINE: u32 = line!() + 6;

#[nki_kernel]
fn invariant_loads(a: &Hbm<f32>, w: &Hbm<f32>, out: &mut Hbm<f32>, sum: &mut Hbm<f32>) {
    let n = out.shape()[0];
    let mut kept = Vec::with_capacity(n);
    for i in nl::affine_range(n) {
        let wt = nl::load(w.view()); // the same bytes in every iteration
        let x = nl::load(a.slice(i));
        let again = nl::load(w.view()); // the same bytes twice in one iteration
        let y = nl::add(&x, &wt);
        let z = nl::multiply(&y, &again);
        nl::store(out.slice(i), &z);
        kept.push(wt);
    }
    // Every iteration's tile is read after the loop: each stays in use until then.
    let mut s = nl::add(&kept[0], &kept[1]);
    for t in &kept[2..] {
        s = nl::add(&s, t);
    }
    nl::store(sum.view(), &s);
}

#[nki_kernel]
fn dropped_each_iteration(a: &Hbm<f32>, w: &Hbm<f32>, out: &mut Hbm<f32>) {
    // As the tutorial's tiled matmul: the repeated tile is dropped before the next load.
    for i in nl::affine_range(out.shape()[0]) {
        let wt = nl::load(w.view());
        let x = nl::load(a.slice(i));
        nl::store(out.slice(i), &nl::add(&x, &wt));
    }
}

const N: usize = 6;
const TILE_BYTES: u64 = 128 * 512 * 4;

fn invariant(stage: CompilerStage) -> Profile {
    let a = Hbm::<f32>::shape_only([N, 128, 512]);
    let w = Hbm::<f32>::shape_only([128, 512]);
    let mut out = Hbm::<f32>::shape_only([N, 128, 512]);
    let mut sum = Hbm::<f32>::shape_only([128, 512]);
    with_compiler_stage(stage, || {
        invariant_loads::estimate(Grid::new([1]), Target::Trn2, &a, &w, &mut out, &mut sum).unwrap()
    })
}

#[test]
fn by_default_a_beta1_kernel_is_compiled_and_off_costs_it_as_written() {
    let off = invariant(CompilerStage::OFF);
    let on = invariant(CompilerStage::BETA1);
    let default = {
        let a = Hbm::<f32>::shape_only([N, 128, 512]);
        let w = Hbm::<f32>::shape_only([128, 512]);
        let mut out = Hbm::<f32>::shape_only([N, 128, 512]);
        let mut sum = Hbm::<f32>::shape_only([128, 512]);
        invariant_loads::estimate(Grid::new([1]), Target::Trn2, &a, &w, &mut out, &mut sum).unwrap()
    };
    assert!(off.compiler.is_empty());
    assert!(!off.to_json().contains("\"compiler\""));
    assert!(!default.compiler.is_empty());
    assert_eq!(default.latency_ns, on.latency_ns);
    assert_eq!(default.instructions, on.instructions);
    assert!(default.instructions < off.instructions);
    // Every load as written: 3 per iteration.
    assert_eq!(off.dma.hbm_read_bytes, 3 * N as u64 * TILE_BYTES);
}

#[test]
fn a_repeated_load_whose_tile_was_dropped_is_not_hoisted() {
    let a = Hbm::<f32>::shape_only([N, 128, 512]);
    let w = Hbm::<f32>::shape_only([128, 512]);
    let mut out = Hbm::<f32>::shape_only([N, 128, 512]);
    let p = with_compiler_stage(CompilerStage::BETA1, || {
        dropped_each_iteration::estimate(Grid::new([1]), Target::Trn2, &a, &w, &mut out).unwrap()
    });
    assert!(p.compiler.is_empty(), "{:?}", p.compiler);
    assert_eq!(p.dma.hbm_read_bytes, 2 * N as u64 * TILE_BYTES);
}

#[test]
fn repeated_loads_are_removed_and_loop_invariant_ones_hoisted() {
    let off = invariant(CompilerStage::OFF);
    let on = invariant(CompilerStage::BETA1);
    // What runs: w once, a's tile per iteration.
    assert_eq!(on.dma.hbm_read_bytes, (1 + N as u64) * TILE_BYTES);
    assert_eq!(on.instructions, off.instructions - (2 * N - 1));
    let c = &on.compiler;
    assert_eq!(c.removed, 2 * N - 1);
    assert_eq!(c.removed_hbm_bytes, (2 * N as u64 - 1) * TILE_BYTES);
    let hoisted: usize = c.of_kind(CompilerKind::Hoisted).map(|l| l.count).sum();
    let dups: Vec<_> = c.of_kind(CompilerKind::Duplicate).collect();
    // Iteration 0's second load of w is a duplicate; the later iterations' two are hoisted.
    assert_eq!(hoisted, 2 * (N - 1));
    assert_eq!(dups.len(), 1);
    assert_eq!(dups[0].count, 1);
    for l in &c.lines {
        assert_eq!(l.api, "nl.load");
        assert!(l.line.file.ends_with("compiler_stage.rs"), "{l}");
        assert_eq!(l.kept.map(|k| k.line), Some(INVARIANT_LOOP_LINE + 1), "{l}");
        if l.kind == CompilerKind::Hoisted {
            assert_eq!(
                l.loop_line.map(|k| k.line),
                Some(INVARIANT_LOOP_LINE),
                "{l}"
            );
        }
    }
    let text = on.to_string();
    assert!(
        text.contains("compiler stage: 11 instructions removed"),
        "{text}"
    );
    assert!(
        text.contains("nl.load hoisted out of the loop at"),
        "{text}"
    );
    assert!(text.contains("nl.load duplicate removed"), "{text}");
    assert!(on.to_json().contains("\"compiler\""));
    // This kernel is VectorE-bound: fewer DMAs, no later end.
    let dma = |p: &Profile| p.engine("DMA").unwrap().active_ns;
    assert!(dma(&on) < dma(&off), "{} vs {}", dma(&on), dma(&off));
    assert!(on.latency_ns <= off.latency_ns);
}

#[test]
fn each_transformation_is_switchable() {
    let only_dedup = invariant(CompilerStage {
        dedup: true,
        ..CompilerStage::OFF
    });
    // Only iteration 0's duplicate goes (the other repeats are in later iterations).
    assert_eq!(only_dedup.compiler.removed, 1);
    assert!(only_dedup
        .compiler
        .lines
        .iter()
        .all(|l| l.kind == CompilerKind::Duplicate));
    let only_hoist = invariant(CompilerStage {
        hoist: true,
        ..CompilerStage::OFF
    });
    assert!(only_hoist
        .compiler
        .lines
        .iter()
        .all(|l| l.kind == CompilerKind::Hoisted));
    assert_eq!(only_hoist.compiler.removed, 2 * (N - 1));
    // The launch's own setting wins over nothing set.
    let a = Hbm::<f32>::shape_only([N, 128, 512]);
    let w = Hbm::<f32>::shape_only([128, 512]);
    let mut out = Hbm::<f32>::shape_only([N, 128, 512]);
    let mut sum = Hbm::<f32>::shape_only([128, 512]);
    let report = Launch::new(Grid::new([1]))
        .target(Target::Trn2)
        .mode(Mode::Estimate)
        .compiler(CompilerStage::BETA1);
    let report = invariant_loads::run(report, &a, &w, &mut out, &mut sum).unwrap();
    assert_eq!(report.profile.unwrap().compiler.removed, 2 * N - 1);
}

#[nki_kernel]
fn written_between(a: &Hbm<f32>, out: &mut Hbm<f32>) {
    let x = nl::load(a.view());
    nl::store(out.view(), &x);
    let y = nl::load(out.view());
    nl::store(out.view(), &nl::add(&x, &y));
    // The same bytes as `y`, written in between: kept.
    let y2 = nl::load(out.view());
    // The same bytes as `x`, unchanged, and `x` still in use: removed.
    let z = nl::load(a.view());
    nl::store(out.view(), &nl::add(&nl::multiply(&y2, &z), &x));
}

#[test]
fn a_load_after_a_write_to_its_bytes_is_kept() {
    let a = Hbm::<f32>::shape_only([128, 512]);
    let mut out = Hbm::<f32>::shape_only([128, 512]);
    let p = with_compiler_stage(CompilerStage::BETA1, || {
        written_between::estimate(Grid::new([1]), Target::Trn2, &a, &mut out).unwrap()
    });
    assert_eq!(p.compiler.removed, 1, "{:?}", p.compiler);
    assert_eq!(p.compiler.lines[0].kind, CompilerKind::Duplicate);
    assert_eq!(p.dma.hbm_read_bytes, 3 * TILE_BYTES);
}

/// Line of the `affine_range` call of [`reused_buffer`].
const REUSED_LOOP_LINE: u32 = line!() + 11;

#[nki_kernel]
fn reused_buffer(a: &Hbm<bf16>, b: &Hbm<bf16>, out: &mut Hbm<f32>, carried: bool) {
    let n = out.shape()[0];
    let y = nl::load(b.view());
    // One buffer for every iteration, as written.
    let buf = nl::ndarray(&[128, 128], DType::BF16, nl::SBUF);
    if carried {
        nisa::memset_into(&buf, 0.0);
    }
    for i in nl::affine_range(n) {
        if carried {
            // Reads what the previous iteration left: must stay one buffer.
            let keep = nisa::tensor_copy(&buf, None, nki_core::Engine::Vector);
            nisa::tensor_tensor_into(&buf, &keep, &y, nl::AluOp::Add);
        } else {
            nisa::dma_copy(buf.slice((.., ..)), a.slice(i));
        }
        let m = nl::matmul(&buf, &y, true);
        let s = nisa::tensor_copy(&m, None, nki_core::Engine::Scalar);
        nl::store(out.slice(i), &s);
    }
}

fn reused(stage: CompilerStage, carried: bool) -> Profile {
    let a = Hbm::<bf16>::shape_only([8, 128, 128]);
    let b = Hbm::<bf16>::shape_only([128, 128]);
    let mut out = Hbm::<f32>::shape_only([8, 128, 128]);
    // Allocation as written: with address rotation (the default) the allocator already
    // gives each iteration's value a buffer of its own (tests/allocation.rs).
    let written = nki_core::CompileConfig::default().allocation(nki_core::Allocation::AsWritten);
    nki_core::with_compile_config(written, || {
        with_compiler_stage(stage, || {
            reused_buffer::estimate(Grid::new([1]), Target::Trn1, &a, &b, &mut out, carried)
                .unwrap()
        })
    })
}

#[test]
fn a_tile_every_iteration_rewrites_gets_a_buffer_per_iteration() {
    let mb = CompilerStage {
        multi_buffer: true,
        ..CompilerStage::OFF
    };
    let off = reused(CompilerStage::OFF, false);
    let on = reused(mb, false);
    let lines: Vec<_> = on.compiler.of_kind(CompilerKind::MultiBuffered).collect();
    assert!(!lines.is_empty(), "{:?}", on.compiler);
    let dma_line = lines
        .iter()
        .find(|l| l.api == "nisa.dma_copy")
        .expect("the reused SBUF buffer is renamed");
    assert_eq!(dma_line.count, 8);
    assert_eq!(dma_line.loop_line.map(|l| l.line), Some(REUSED_LOOP_LINE));
    assert!(on
        .to_string()
        .contains("multi-buffered across the iterations of the loop at"));
    // Same instructions and bytes; the loads no longer wait for the previous matmuls.
    assert_eq!(on.instructions, off.instructions);
    assert_eq!(on.dma.hbm_read_bytes, off.dma.hbm_read_bytes);
    assert!(
        on.latency_ns < off.latency_ns,
        "{} vs {}",
        on.latency_ns,
        off.latency_ns
    );
    // A tile whose iterations read what the previous one wrote keeps its one buffer.
    let carried = reused(mb, true);
    assert!(carried.compiler.is_empty(), "{:?}", carried.compiler);
}

#[nki_kernel(nki = "0.7")]
fn repeated_loads_07(w: &Hbm<f32>, out: &mut Hbm<f32>) {
    let a = nl::load(w.view());
    let b = nl::load(w.view());
    nl::store(out.view(), &nl::add(&a, &b));
}

#[test]
fn an_nki_07_kernel_is_costed_as_written_whatever_the_stage() {
    let w = Hbm::<f32>::shape_only([128, 512]);
    let mut out = Hbm::<f32>::shape_only([128, 512]);
    let p = with_compiler_stage(CompilerStage::BETA1, || {
        repeated_loads_07::estimate(Grid::new([1]), Target::Trn2, &w, &mut out).unwrap()
    });
    assert!(p.compiler.is_empty(), "{:?}", p.compiler);
    assert_eq!(p.dma.hbm_read_bytes, 2 * TILE_BYTES);
}

/// Line of the `nl::zeros` call of [`zeroed_accumulator`].
const ZEROS_LINE: u32 = line!() + 19;

#[nki_kernel]
fn zeroed_accumulator(
    x: &Hbm<bf16>,
    y: &Hbm<bf16>,
    out: &mut Hbm<f32>,
    side: &mut Hbm<i32>,
    read_first: bool,
) {
    let (xt, yt) = (nl::load(x.view()), nl::load(y.view()));
    // GpSimdE work issued before the fill (ready at once, one op after the other: int32
    // additions run on GpSimdE): the fill, a memset of PSUM the compiler puts on GpSimdE,
    // queues behind it.
    let mut v = nl::full(&[128, 4096], 1.0, DType::I32, nl::SBUF);
    for _ in 0..6 {
        v = nl::add(&v, &v);
    }
    nl::store(side.view(), &v);
    let acc = nl::zeros(&[128, 512], DType::F32, nl::PSUM);
    if read_first {
        // The zeros are read before any matmul writes them: the fill must stay.
        let early = nl::add(&acc, &acc);
        nl::store(out.view(), &early);
    }
    for _ in 0..4 {
        nl::matmul_acc(&acc, &xt, &yt, true);
    }
    let s = nl::copy(&acc, None);
    nl::store(out.view(), &s);
}

fn accumulate(stage: CompilerStage, read_first: bool) -> Profile {
    let x = Hbm::<bf16>::shape_only([128, 128]);
    let y = Hbm::<bf16>::shape_only([128, 512]);
    let mut out = Hbm::<f32>::shape_only([128, 512]);
    let mut side = Hbm::<i32>::shape_only([128, 4096]);
    with_compiler_stage(stage, || {
        zeroed_accumulator::estimate(
            Grid::new([1]),
            Target::Trn2,
            &x,
            &y,
            &mut out,
            &mut side,
            read_first,
        )
        .unwrap()
    })
}

#[test]
fn a_psum_zero_fill_is_folded_into_the_first_matmul() {
    let fold = CompilerStage {
        psum_zero_fold: true,
        ..CompilerStage::OFF
    };
    let off = accumulate(CompilerStage::OFF, false);
    let on = accumulate(fold, false);
    assert_eq!(on.instructions + 1, off.instructions);
    assert_eq!(on.compiler.removed, 1);
    let l = &on.compiler.lines[..];
    assert_eq!(l.len(), 1, "{l:?}");
    assert_eq!(l[0].kind, CompilerKind::PsumZeroFolded);
    assert_eq!(
        (l[0].api, l[0].line.line, l[0].count),
        ("nl.zeros", ZEROS_LINE, 1)
    );
    assert!(l[0].kept.is_some());
    assert!(l[0]
        .to_string()
        .contains("nl.zeros folded into the first matmul"));
    // As written, the first matmul's PSUM write waits for the fill behind the GpSimdE chain;
    // folded it does not.
    let tensor_start = |p: &Profile| {
        p.spans
            .get()
            .iter()
            .filter(|s| s.track == nki_core::Track::MultiplyMoving)
            .map(|s| s.start_ns)
            .fold(f64::INFINITY, f64::min)
    };
    assert!(
        tensor_start(&on) + 1000.0 < tensor_start(&off),
        "first matmul at {} ns folded vs {} ns as written",
        tensor_start(&on),
        tensor_start(&off)
    );
    assert!(on.latency_ns < off.latency_ns);
    // BETA1 includes it.
    assert_eq!(accumulate(CompilerStage::BETA1, false).compiler.removed, 1);
}

#[test]
fn a_psum_zero_fill_read_before_any_matmul_is_kept() {
    let fold = CompilerStage {
        psum_zero_fold: true,
        ..CompilerStage::OFF
    };
    let on = accumulate(fold, true);
    let off = accumulate(CompilerStage::OFF, true);
    assert!(on.compiler.is_empty(), "{:?}", on.compiler);
    assert_eq!(on.instructions, off.instructions);
    assert_eq!(on.latency_ns, off.latency_ns);
}

#[nki_kernel]
fn invariant_product(x: &Hbm<f32>, y: &Hbm<f32>, c: &Hbm<f32>, out: &mut Hbm<f32>) {
    // `x * y` is the same in every iteration (NKIBench mamba's `delta * u`); `x` is also read
    // by a loop-variant instruction, `y` only by the product.
    for s in nl::affine_range(out.shape()[0]) {
        let xt = nl::load(x.view());
        let yt = nl::load(y.view());
        let ct = nl::load(c.slice(s));
        let p = nisa::tensor_tensor(&xt, &yt, nl::AluOp::Multiply, None);
        let q = nisa::tensor_tensor(&xt, &ct, nl::AluOp::Add, None);
        let r = nisa::tensor_tensor(&p, &q, nl::AluOp::Add, None);
        nl::store(out.slice(s), &r);
    }
}

fn product(stage: CompilerStage) -> Profile {
    let x = Hbm::<f32>::shape_only([128, 512]);
    let y = Hbm::<f32>::shape_only([128, 512]);
    let c = Hbm::<f32>::shape_only([N, 128, 512]);
    let mut out = Hbm::<f32>::shape_only([N, 128, 512]);
    with_compiler_stage(stage, || {
        invariant_product::estimate(Grid::new([1]), Target::Trn1, &x, &y, &c, &mut out).unwrap()
    })
}

#[test]
fn a_loop_invariant_computation_runs_once_and_the_loads_only_it_read_go() {
    let off = product(CompilerStage::OFF);
    let on = product(CompilerStage {
        hoist_compute: true,
        ..CompilerStage::OFF
    });
    let n = N as u64 - 1;
    // The product of iterations 1.. and their `y` loads go; the `x` loads stay (read by `q`).
    assert_eq!(on.compiler.removed as u64, 2 * n, "{on}");
    assert_eq!(off.instructions - on.instructions, 2 * n as usize);
    assert_eq!(on.compiler.removed_hbm_bytes, n * TILE_BYTES);
    assert_eq!(
        off.dma.hbm_read_bytes - on.dma.hbm_read_bytes,
        n * TILE_BYTES
    );
    let shown = on.to_string();
    assert!(
        shown.contains("nisa.tensor_tensor hoisted out of the loop"),
        "{shown}"
    );
    assert!(shown.contains("nl.load hoisted out of the loop"), "{shown}");
    // Values are computed as written whatever the stage: simulate matches execute.
    let (xs, ys) = (
        Hbm::<f32>::full([128, 512], 2.0),
        Hbm::<f32>::full([128, 512], 3.0),
    );
    let c = Hbm::<f32>::full([N, 128, 512], 1.0);
    let mut out = Hbm::<f32>::zeros([N, 128, 512]);
    with_compiler_stage(CompilerStage::BETA1, || {
        invariant_product::simulate(Grid::new([1]), Target::Trn1, &xs, &ys, &c, &mut out)
    })
    .unwrap();
    assert!(out
        .to_vec()
        .unwrap()
        .iter()
        .all(|&v| v == 2.0 * 3.0 + 2.0 + 1.0));
}

/// Line of the store to the scratch in [`through_scratch`] (checked by the profile test).
const SCRATCH_STORE_LINE: u32 = line!() + 7;

#[nki_kernel]
fn through_scratch(a: &Hbm<f32>, out: &mut Hbm<f32>) {
    let h = nl::ndarray(&[128, 512], DType::F32, nl::private_hbm.name("scratch_t"));
    let x = nl::load(a.view());
    let y = nl::multiply(&x, 2.0);
    nisa::dma_copy(&h, &y);
    let back = nl::ndarray(&[128, 512], DType::F32, nl::SBUF);
    nisa::dma_copy(&back, &h);
    let z = nl::add(&back, &x);
    nl::store(out.view(), &z);
}

fn scratch(stage: CompilerStage) -> Profile {
    let a = Hbm::<f32>::shape_only([128, 512]);
    let mut out = Hbm::<f32>::shape_only([128, 512]);
    with_compiler_stage(stage, || {
        through_scratch::estimate(Grid::new([1]), Target::Trn1, &a, &mut out).unwrap()
    })
}

#[test]
fn private_hbm_scratch_traffic_is_counted_as_spill_when_switched_on() {
    let on = scratch(CompilerStage {
        scratch_spill: true,
        ..CompilerStage::OFF
    });
    let off = scratch(CompilerStage::OFF);
    // As written: no spill, and the DMAs are costed the same either way.
    assert!(off.spills.is_empty(), "{:?}", off.spills);
    assert!(off.compiler.is_empty(), "{:?}", off.compiler);
    assert_eq!(on.latency_ns, off.latency_ns);
    assert_eq!(on.dma.hbm_write_bytes, off.dma.hbm_write_bytes);
    assert_eq!(on.spills.save_bytes, TILE_BYTES);
    assert_eq!(on.spills.reload_bytes, TILE_BYTES);
    assert_eq!(on.spills.input_reload_bytes, 0);
    assert!(on
        .spills
        .lines
        .iter()
        .all(|l| l.tile.contains("scratch_t") && l.count == 1));
    let l = &on.compiler.lines[..];
    assert_eq!(l.len(), 2, "{l:?}");
    assert!(l.iter().all(|l| l.kind == CompilerKind::ScratchSpill));
    let store = l
        .iter()
        .find(|l| l.line.line == SCRATCH_STORE_LINE)
        .unwrap();
    assert_eq!((store.count, store.bytes), (1, TILE_BYTES));
    assert!(
        store.to_string().contains("counted as spill traffic"),
        "{store}"
    );
    // BETA1 includes it; it removes nothing.
    let beta1 = scratch(CompilerStage::BETA1);
    assert_eq!(beta1.spills.save_bytes, TILE_BYTES);
    assert_eq!(beta1.compiler.removed, 0);
}

/// Line of the first `affine_range` of [`two_nests`] (checked by the fusion test).
const FIRST_NEST_LINE: u32 = line!() + 6;

#[nki_kernel]
fn two_nests(a: &Hbm<f32>, out: &mut Hbm<f32>, shift: usize) {
    let n = out.shape()[0];
    let mut made = Vec::with_capacity(n);
    for i in nl::affine_range(n) {
        let x = nl::load(a.slice(i));
        made.push(nl::multiply(&x, 2.0));
    }
    for i in nl::affine_range(n) {
        let y = nl::add(&made[(i + shift) % n], 1.0);
        nl::store(out.slice(i), &y);
    }
}

fn nests(stage: CompilerStage, shift: usize) -> Profile {
    // 100 tiles of 2 KiB per partition: more than trn1's SBUF if all stay live.
    let a = Hbm::<f32>::shape_only([100, 128, 512]);
    let mut out = Hbm::<f32>::shape_only([100, 128, 512]);
    with_compiler_stage(stage, || {
        two_nests::estimate(Grid::new([1]), Target::Trn1, &a, &mut out, shift).unwrap()
    })
}

#[test]
fn a_loop_consuming_what_a_sibling_loop_makes_is_fused_with_it() {
    let fuse = CompilerStage {
        fuse: true,
        ..CompilerStage::OFF
    };
    let off = nests(CompilerStage::OFF, 0);
    let on = nests(fuse, 0);
    // As written the 100 products cannot all stay in SBUF: some are saved and re-loaded.
    assert!(off.spills.save_bytes > 0, "{:?}", off.spills);
    // Fused, each product is consumed in the iteration that makes it.
    assert_eq!(on.spills.save_bytes, 0, "{:?}", on.spills);
    // The records as written (load, multiply, add, store per iteration), reordered: no
    // spill DMA added.
    assert_eq!(on.instructions, 4 * 100);
    assert!(off.instructions > on.instructions);
    let l = &on.compiler.lines[..];
    assert_eq!(l.len(), 1, "{l:?}");
    assert_eq!(l[0].kind, CompilerKind::Fused);
    assert_eq!(l[0].loop_line.map(|x| x.line), Some(FIRST_NEST_LINE));
    assert!(
        l[0].to_string().contains("fused into the loop at"),
        "{}",
        l[0]
    );
    // Iteration i of the second loop reading what iteration i + 1 of the first made: a
    // dependence across iterations, not fused.
    let shifted = nests(fuse, 1);
    assert!(shifted.compiler.is_empty(), "{:?}", shifted.compiler);
    assert!(shifted.spills.save_bytes > 0);
}

/// Line of the `affine_range` call of [`steps_of_a_sequential_loop`].
const STEPPED_LOOP_LINE: u32 = line!() + 10;

/// `out[j] = sum_k exp(x[k or j, k]) * w[j]`: an affine loop over `j` whose every iteration
/// runs a sequential loop over `k`; `exp(x[k])` is the same in every iteration of `j` unless
/// `varying` (then `x` holds a row block per `(j, k)`).
#[nki_kernel]
fn steps_of_a_sequential_loop(x: &Hbm<f32>, w: &Hbm<f32>, out: &mut Hbm<f32>, varying: usize) {
    let f = out.shape()[1];
    let blocks = out.shape()[0] / 128;
    let steps = x.shape()[0] / 128 / if varying == 1 { blocks } else { 1 };
    for j in nl::affine_range(blocks) {
        let rows = j * 128..(j + 1) * 128;
        let wj = nl::load(w.slice((rows.clone(), ..)));
        let acc = nl::zeros(&[128, f], DType::F32, nl::SBUF);
        for k in nl::sequential_range(steps) {
            let r0 = (varying * j * steps + k) * 128;
            let xk = nl::load(x.slice((r0..r0 + 128, ..)));
            let e = nl::exp(&xk);
            let p = nl::multiply(&e, &wj);
            nisa::tensor_tensor_into(&acc, &acc, &p, nl::AluOp::Add);
        }
        nl::store(out.slice((rows, ..)), &acc);
    }
}

/// 3 blocks of `j`, 16 steps of `k`, `[128, 4096]` fp32 tiles (16 KiB per partition): the 16
/// `exp` results, kept across the loop over `j` as written, need 256 KiB per partition (over
/// trn2's SBUF); one step's, 16 KiB.
fn stepped(stage: CompilerStage, varying: usize) -> Profile {
    let (blocks, steps, f) = (3, 16, 4096);
    let x = Hbm::<f32>::shape_only([(1 + varying * (blocks - 1)) * steps * 128, f]);
    let w = Hbm::<f32>::shape_only([blocks * 128, f]);
    let mut out = Hbm::<f32>::shape_only([blocks * 128, f]);
    with_compiler_stage(stage, || {
        steps_of_a_sequential_loop::estimate(
            Grid::new([1]),
            Target::Trn2,
            &x,
            &w,
            &mut out,
            varying,
        )
        .unwrap()
    })
}

#[test]
fn an_affine_loop_moves_inside_its_sequential_loop_when_a_step_then_keeps_a_hoisted_value() {
    let tile = 128 * 4096 * 4u64;
    let on = stepped(CompilerStage::BETA1, 0);
    let without = stepped(
        CompilerStage {
            interchange: false,
            ..CompilerStage::BETA1
        },
        0,
    );
    // Interchanged, each step's exp runs once for the 3 blocks: x read once, w once per block.
    assert_eq!(
        on.dma.hbm_read_bytes,
        (16 + 3) * tile,
        "{}",
        on.compiler.lines.len()
    );
    let l: Vec<_> = on.compiler.of_kind(CompilerKind::Interchanged).collect();
    assert_eq!(l.len(), 1, "{:?}", on.compiler);
    assert_eq!(l[0].line.line, STEPPED_LOOP_LINE, "{}", l[0]);
    assert_eq!(l[0].count, 16);
    assert!(
        l[0].to_string()
            .contains("moved inside the sequential loop"),
        "{}",
        l[0]
    );
    assert!(on
        .compiler
        .lines
        .iter()
        .any(|l| l.kind == CompilerKind::Hoisted && l.api == "nl.exp"));
    // Switched off: the 16 results do not fit in SBUF, nothing is hoisted, x is read per block.
    assert!(without
        .compiler
        .lines
        .iter()
        .all(|l| l.kind != CompilerKind::Interchanged));
    assert_eq!(without.dma.hbm_read_bytes, (3 * 16 + 3) * tile);
    // A sequential body with nothing the same in every iteration stays as written.
    let varying = stepped(CompilerStage::BETA1, 1);
    assert!(
        varying
            .compiler
            .lines
            .iter()
            .all(|l| l.kind != CompilerKind::Interchanged),
        "{:?}",
        varying.compiler
    );
    assert_eq!(varying.dma.hbm_read_bytes, (3 * 16 + 3) * tile);
}

// The default: a Beta-1 kernel is costed as the compiler runs it (every transformation of
// `CompilerStage::BETA1`, as neuronx-cc always ran them); `CompilerStage::OFF` costs it as
// written. Each kernel below is written for one rule; each test checks that the default
// applies it, that it shows in `Profile::compiler`, and that without that rule (the rest of
// the stage on) it does not happen.

/// The estimate of `run` with the default stage, with `CompilerStage::OFF`, and with every
/// transformation but the one `without` switches off.
fn default_off_without(
    without: impl Fn(&mut CompilerStage),
    run: impl Fn() -> Profile,
) -> (Profile, Profile, Profile) {
    let mut stage = CompilerStage::BETA1;
    without(&mut stage);
    (
        run(),
        with_compiler_stage(CompilerStage::OFF, &run),
        with_compiler_stage(stage, &run),
    )
}

#[nki_kernel]
fn same_region_twice(a: &Hbm<f32>, out: &mut Hbm<f32>) {
    for i in nl::affine_range(out.shape()[0]) {
        let x = nl::load(a.slice(i));
        let again = nl::load(a.slice(i)); // the same HBM bytes in the same iteration
        nl::store(out.slice(i), &nl::multiply(&x, &again));
    }
}

#[test]
fn by_default_the_same_region_loaded_twice_per_iteration_is_loaded_once() {
    let a = Hbm::<f32>::shape_only([N, 128, 512]);
    let run = || {
        let mut out = Hbm::<f32>::shape_only([N, 128, 512]);
        same_region_twice::estimate(Grid::new([1]), Target::Trn2, &a, &mut out).unwrap()
    };
    let (default, off, without) = default_off_without(|s| s.dedup = false, run);
    let dups: usize = default
        .compiler
        .of_kind(CompilerKind::Duplicate)
        .map(|l| l.count)
        .sum();
    assert_eq!(dups, N, "{:?}", default.compiler);
    assert_eq!(default.dma.hbm_read_bytes, N as u64 * TILE_BYTES);
    assert_eq!(off.dma.hbm_read_bytes, 2 * N as u64 * TILE_BYTES);
    assert!(off.compiler.is_empty());
    assert_eq!(without.dma.hbm_read_bytes, off.dma.hbm_read_bytes);
    assert_eq!(without.compiler.of_kind(CompilerKind::Duplicate).count(), 0);
}

#[test]
fn by_default_a_weight_load_the_row_loop_does_not_change_is_hoisted() {
    // `invariant_loads`: `w` loaded in every iteration of the row loop, its tiles in use
    // after the loop.
    let (default, off, without) = default_off_without(
        |s| s.hoist = false,
        || {
            let a = Hbm::<f32>::shape_only([N, 128, 512]);
            let w = Hbm::<f32>::shape_only([128, 512]);
            let mut out = Hbm::<f32>::shape_only([N, 128, 512]);
            let mut sum = Hbm::<f32>::shape_only([128, 512]);
            invariant_loads::estimate(Grid::new([1]), Target::Trn2, &a, &w, &mut out, &mut sum)
                .unwrap()
        },
    );
    let hoisted = |p: &Profile| -> usize {
        p.compiler
            .of_kind(CompilerKind::Hoisted)
            .map(|l| l.count)
            .sum()
    };
    assert_eq!(hoisted(&default), 2 * (N - 1), "{:?}", default.compiler);
    assert_eq!(default.dma.hbm_read_bytes, (1 + N as u64) * TILE_BYTES);
    assert_eq!(off.dma.hbm_read_bytes, 3 * N as u64 * TILE_BYTES);
    assert_eq!(hoisted(&without), 0, "{:?}", without.compiler);
    assert!(without.dma.hbm_read_bytes > default.dma.hbm_read_bytes);
}

#[nki_kernel]
fn invariant_transpose(w: &Hbm<f32>, a: &Hbm<f32>, out: &mut Hbm<f32>) {
    let wt = nl::load(w.view());
    for i in nl::affine_range(out.shape()[0]) {
        // The same transpose of the same unchanged tile in every iteration.
        let t = nl::transpose(&wt);
        let ts = nl::copy(&t, None);
        let x = nl::load(a.slice(i));
        nl::store(out.slice(i), &nl::add(&x, &ts));
    }
}

#[test]
fn by_default_a_loop_invariant_transpose_runs_once() {
    let (default, off, without) = default_off_without(
        |s| s.hoist_compute = false,
        || {
            let w = Hbm::<f32>::shape_only([128, 128]);
            let a = Hbm::<f32>::shape_only([N, 128, 128]);
            let mut out = Hbm::<f32>::shape_only([N, 128, 128]);
            invariant_transpose::estimate(Grid::new([1]), Target::Trn2, &w, &a, &mut out).unwrap()
        },
    );
    let hoisted = |p: &Profile, api: &str| -> usize {
        p.compiler
            .of_kind(CompilerKind::Hoisted)
            .filter(|l| l.api == api)
            .map(|l| l.count)
            .sum()
    };
    let transposes = |p: &Profile| p.engine("TensorE").map_or(0, |e| e.instructions);
    assert!(
        hoisted(&default, "nl.transpose") > 0,
        "{:?}",
        default.compiler
    );
    assert_eq!(transposes(&default), 1, "{default}");
    assert_eq!(transposes(&off), N, "{off}");
    assert!(off.compiler.is_empty());
    assert_eq!(transposes(&without), N, "{:?}", without.compiler);
}

#[test]
fn by_default_a_tile_reloaded_every_iteration_gets_a_buffer_per_iteration() {
    let run = || {
        let a = Hbm::<bf16>::shape_only([8, 128, 128]);
        let b = Hbm::<bf16>::shape_only([128, 128]);
        let mut out = Hbm::<f32>::shape_only([8, 128, 128]);
        reused_buffer::estimate(Grid::new([1]), Target::Trn1, &a, &b, &mut out, false).unwrap()
    };
    let (default, off, without) = default_off_without(|s| s.multi_buffer = false, run);
    let renamed = |p: &Profile| -> usize {
        p.compiler
            .of_kind(CompilerKind::MultiBuffered)
            .filter(|l| l.api == "nisa.dma_copy")
            .map(|l| l.count)
            .sum()
    };
    assert_eq!(renamed(&default), 8, "{:?}", default.compiler);
    // (Its latency gain is the allocator's address rotation, on with the stage off too:
    // tests/allocation.rs.)
    assert!(off.compiler.is_empty());
    assert_eq!(renamed(&without), 0, "{:?}", without.compiler);
}

#[test]
fn compile_config_as_written_costs_a_beta1_kernel_as_written() {
    let a = Hbm::<f32>::shape_only([N, 128, 512]);
    let launch = || Launch::new([1]).mode(Mode::Estimate).target(Target::Trn2);
    let profile = |l: Launch| {
        let mut out = Hbm::<f32>::shape_only([N, 128, 512]);
        same_region_twice::run(l, &a, &mut out)
            .unwrap()
            .profile
            .expect("an estimate has a profile")
    };
    let default = profile(launch());
    let written = profile(launch().compile_config(nki_core::CompileConfig::as_written()));
    let off = with_compiler_stage(CompilerStage::OFF, || profile(launch()));
    assert!(!default.compiler.is_empty());
    assert!(written.compiler.is_empty(), "{:?}", written.compiler);
    assert_eq!(written.dma.hbm_read_bytes, off.dma.hbm_read_bytes);
    assert_eq!(written.instructions, off.instructions);
}
