//! Allocation and scheduling as NKI 0.8's `CompileConfig` documents them: where the
//! configuration comes from (the launch, the kernel's attribute, the dialect's default).

use nki_core::prelude::*;
use nki_core::{AllocationMode, CompileConfig, SchedulingHeuristic};

/// A kernel that names its own configuration, as `@nki.jit(compile_config=...)` does.
#[nki_kernel(compile_config = CompileConfig::default().linear(AllocationMode::Fast))]
fn configured(a: &Hbm<f32>, out: &mut Hbm<f32>) {
    let t = nl::load(a.view());
    nl::store(out.view(), &t);
}

#[nki_kernel]
fn plain(a: &Hbm<f32>, out: &mut Hbm<f32>) {
    let t = nl::load(a.view());
    nl::store(out.view(), &t);
}

fn estimate_launch() -> Launch {
    Launch::new([1]).mode(Mode::Estimate).target(Target::Trn2)
}

#[test]
fn the_launch_overrides_the_kernel_which_overrides_the_dialect_default() {
    let a = Hbm::<f32>::shape_only([128, 64]);
    let mut out = Hbm::<f32>::shape_only([128, 64]);
    let kernel_own = CompileConfig::default().linear(AllocationMode::Fast);
    let r = configured::run(estimate_launch(), &a, &mut out).unwrap();
    assert_eq!(r.compile_config, kernel_own);
    let asked = CompileConfig::default().scheduling(SchedulingHeuristic::Trivial);
    let r = configured::run(estimate_launch().compile_config(asked), &a, &mut out).unwrap();
    assert_eq!(r.compile_config, asked);
    let r = plain::run(estimate_launch(), &a, &mut out).unwrap();
    assert_eq!(
        r.compile_config,
        CompileConfig::for_dialect(nki_core::Dialect::Beta1)
    );
}

use nki_core::nisa::classic as nisa;
use nki_core::nisa::{AffineExpr, DgeMode, DmaOpts};
use nki_core::{with_compile_config, AddressRotation, Allocation};

/// Where [`reload`] keeps the tile it loads every iteration.
#[derive(Clone, Copy, PartialEq)]
enum Keep {
    /// One tile allocated before the loop.
    Outside,
    /// One tile allocated before the loop at a manual address (`address=`).
    Placed,
    /// A tile allocated in each iteration.
    Inside,
}

#[nki_kernel]
fn reload(a: &Hbm<bf16>, out: &mut Hbm<f32>, keep: Keep) {
    let n = out.shape()[0];
    let shared = match keep {
        Keep::Placed => nl::ndarray(&[128, 512], DType::BF16, nl::sbuf.address(0, 0)),
        _ => nl::ndarray(&[128, 512], DType::BF16, nki_core::Alloc::from(nl::sbuf)),
    };
    for i in nl::affine_range(n) {
        let own;
        let buf = if keep == Keep::Inside {
            own = nl::ndarray(&[128, 512], DType::BF16, nki_core::Alloc::from(nl::sbuf));
            &own
        } else {
            &shared
        };
        nisa::dma_copy(buf.slice((.., ..)), a.slice(i));
        // Two reads of the loaded tile, long enough for the next load to hide behind.
        let e = nl::exp(buf);
        let f = nl::tanh(buf);
        let g = nl::add(&e, &f);
        nl::store(out.slice(i), &g);
    }
}

const ITERS: usize = 8;

fn reloaded(keep: Keep, config: CompileConfig) -> Profile {
    let a = Hbm::<bf16>::shape_only([ITERS, 128, 512]);
    let mut out = Hbm::<f32>::shape_only([ITERS, 128, 512]);
    with_compile_config(config, || {
        reload::estimate(Grid::new([1]), Target::Trn2, &a, &mut out, keep).unwrap()
    })
}

fn rotation(r: AddressRotation) -> CompileConfig {
    CompileConfig::default().address_rotation(r)
}

#[test]
fn with_rotation_a_tile_reloaded_every_iteration_models_like_one_allocated_inside() {
    let dflt = CompileConfig::default();
    let outside = reloaded(Keep::Outside, dflt);
    let inside = reloaded(Keep::Inside, dflt);
    assert_eq!(outside.latency_ns, inside.latency_ns);
    // As written, every load waits for the previous iteration's reads of the one tile.
    let written = reloaded(Keep::Outside, CompileConfig::as_written());
    assert!(
        outside.latency_ns < 0.9 * written.latency_ns,
        "{} vs {}",
        outside.latency_ns,
        written.latency_ns
    );
    // The allocation flow's default rotates: ENABLE is the same.
    let enabled = reloaded(Keep::Outside, rotation(AddressRotation::Enable));
    assert_eq!(enabled.latency_ns, outside.latency_ns);
}

#[test]
fn without_rotation_a_tile_reloaded_every_iteration_models_as_written() {
    let off = reloaded(Keep::Outside, rotation(AddressRotation::Disable));
    let written = reloaded(Keep::Outside, CompileConfig::as_written());
    let rotated = reloaded(Keep::Outside, CompileConfig::default());
    assert_eq!(off.latency_ns, written.latency_ns);
    assert!(off.latency_ns > rotated.latency_ns);
}

#[test]
fn a_manual_address_turns_rotation_off_for_that_tile() {
    let placed = reloaded(Keep::Placed, CompileConfig::default());
    let written = reloaded(Keep::Outside, CompileConfig::as_written());
    let rotated = reloaded(Keep::Outside, CompileConfig::default());
    assert_eq!(placed.latency_ns, written.latency_ns);
    assert!(placed.latency_ns > rotated.latency_ns);
}

#[test]
fn a_write_into_a_freed_address_waits_for_the_last_read_of_its_previous_tile() {
    // Tiles allocated in each iteration: RING gives each a fresh address, FAST and MAX_REUSE
    // the one the previous iteration's tile just freed, whose reads the next load waits for.
    let linear = |m| CompileConfig::default().linear(m);
    let ring = reloaded(Keep::Inside, linear(AllocationMode::Ring));
    let fast = reloaded(Keep::Inside, linear(AllocationMode::Fast));
    let max_reuse = reloaded(Keep::Inside, linear(AllocationMode::MaxReuse));
    let written = reloaded(Keep::Outside, CompileConfig::as_written());
    assert!(
        fast.latency_ns > 1.1 * ring.latency_ns,
        "{} vs {}",
        fast.latency_ns,
        ring.latency_ns
    );
    assert!(max_reuse.latency_ns >= fast.latency_ns);
    // Each tile a buffer of its own: nothing waits for an address.
    let own = reloaded(
        Keep::Inside,
        CompileConfig::default().allocation(Allocation::AsWritten),
    );
    assert!(own.latency_ns < written.latency_ns);
    assert_eq!(ring.latency_ns, own.latency_ns);
}

// ---- Scheduling heuristics ----

#[nki_kernel]
fn stream(a: &Hbm<bf16>, out: &mut Hbm<f32>) {
    for i in nl::affine_range(out.shape()[0]) {
        let x = nl::load(a.slice(i));
        nl::store(out.slice(i), &nl::exp(&x));
    }
}

fn streamed(h: SchedulingHeuristic) -> Profile {
    let a = Hbm::<bf16>::shape_only([ITERS, 128, 512]);
    let mut out = Hbm::<f32>::shape_only([ITERS, 128, 512]);
    with_compile_config(CompileConfig::default().scheduling(h), || {
        stream::estimate(Grid::new([1]), Target::Trn2, &a, &mut out).unwrap()
    })
}

#[test]
fn trivial_keeps_program_order_where_asap_runs_loads_ahead() {
    // TRIVIAL: each load waits behind the previous iteration's store (DMA program order),
    // which waits for its exp; ASAP issues every load at once.
    let asap = streamed(SchedulingHeuristic::Asap);
    let trivial = streamed(SchedulingHeuristic::Trivial);
    assert!(
        trivial.latency_ns > 1.3 * asap.latency_ns,
        "{} vs {}",
        trivial.latency_ns,
        asap.latency_ns
    );
    // The heuristics that only weigh DMAs change nothing where no two DMAs compete.
    assert_eq!(
        streamed(SchedulingHeuristic::DmaPrefetch).latency_ns,
        asap.latency_ns
    );
}

/// Lines of [`burst`]'s second store and of its second load.
const SECOND_STORE: u32 = line!() + 13;
const SECOND_LOAD: u32 = line!() + 14;

/// A load that becomes ready with a store, while an earlier store holds the DMA engines: the
/// load refills the one tile the stores' inputs were computed from (rotation off, so it
/// waits for those reads). `tail`: the load's data feeds a long chain (else a short one).
#[nki_kernel]
fn burst(a: &Hbm<bf16>, b: &Hbm<bf16>, out: &mut Hbm<f32>, tail: bool) {
    let x = nl::ndarray(&[128, 4096], DType::BF16, nki_core::Alloc::from(nl::sbuf));
    nisa::dma_copy(x.slice((.., ..)), a.view());
    let y1 = nl::exp(&x);
    let y2 = nl::tanh(&x);
    nl::store(out.slice(0), &y1);
    nl::store(out.slice(1), &y2);
    let cols = if tail { 2048 } else { 64 };
    nisa::dma_copy(x.slice((.., 0..cols)), b.slice((.., 0..cols)));
    let mut z = nl::exp(x.slice((.., 0..cols)));
    if tail {
        for _ in 0..4 {
            z = nl::tanh(&z);
        }
    }
    nl::store(out.slice((2, .., 0..cols)), &z);
}

fn bursts(h: SchedulingHeuristic, tail: bool) -> (f64, f64, f64) {
    let a = Hbm::<bf16>::shape_only([128, 4096]);
    let b = Hbm::<bf16>::shape_only([128, 2048]);
    let mut out = Hbm::<f32>::shape_only([3, 128, 4096]);
    let config = CompileConfig::default()
        .address_rotation(AddressRotation::Disable)
        .scheduling(h);
    let p = with_compile_config(config, || {
        burst::estimate(Grid::new([1]), Target::Trn2, &a, &b, &mut out, tail).unwrap()
    });
    let start = |line: u32| {
        p.spans
            .iter()
            .filter(|s| s.cause.is_none())
            .filter(|s| p.ops.get(s.op as usize).is_some_and(|o| o.loc.line == line))
            .map(|s| s.start_ns)
            .fold(f64::INFINITY, f64::min)
    };
    (start(SECOND_STORE), start(SECOND_LOAD), p.latency_ns)
}

#[test]
fn dma_prefetch_sends_a_load_before_a_store_ready_as_early() {
    let (store, load, asap) = bursts(SchedulingHeuristic::Asap, true);
    assert!(
        store < load,
        "ASAP: the store, queued first: {store} vs {load}"
    );
    let (store, load, prefetch) = bursts(SchedulingHeuristic::DmaPrefetch, true);
    assert!(
        load < store,
        "DMA_PREFETCH: the load first: {load} vs {store}"
    );
    assert!(prefetch < asap, "{prefetch} vs {asap}");
    // Whatever the load feeds.
    let (store, load, _) = bursts(SchedulingHeuristic::DmaPrefetch, false);
    assert!(load < store, "{load} vs {store}");
}

#[test]
fn critical_path_sends_the_dma_with_the_longest_chain_after_it_first() {
    // A load feeding a long chain goes before the store; a store longer than the short
    // chain a small load feeds (its trigger latency, the activation and the store after it)
    // goes before that load.
    let (store, load, _) = bursts(SchedulingHeuristic::CriticalPath, true);
    assert!(load < store, "{load} vs {store}");
    let (store, load, _) = bursts(SchedulingHeuristic::CriticalPath, false);
    assert!(store < load, "{store} vs {load}");
}

/// The earliest start of the instructions on source line `line` in `p`.
fn line_start(p: &Profile, line: u32) -> f64 {
    p.spans
        .iter()
        .filter(|s| s.cause.is_none())
        .filter(|s| p.ops.get(s.op as usize).is_some_and(|o| o.loc.line == line))
        .map(|s| s.start_ns)
        .fold(f64::INFINITY, f64::min)
}

/// Lines of [`two_paths`]'s long activation (iteration 0) and short one (iteration 1).
const LONG_EXP: u32 = line!() + 11;
const SHORT_EXP: u32 = line!() + 13;

/// Two iterations whose ScalarE activations become ready together (both read the tile
/// loaded before the loop): iteration 0's is long and only stored; iteration 1's is short and
/// feeds a long VectorE chain.
#[nki_kernel]
fn two_paths(a: &Hbm<bf16>, out: &mut Hbm<f32>) {
    let x = nl::load(a.view());
    for i in nl::affine_range(2) {
        if i == 0 {
            let y = nl::exp(&x);
            nl::store(out.slice(0), &y);
        } else {
            let mut z = nl::exp(x.slice((.., 0..512)));
            for _ in 0..12 {
                z = nl::add(&z, &z);
            }
            nl::store(out.slice((1, .., 0..512)), &z);
        }
    }
}

fn paths(h: SchedulingHeuristic) -> (f64, f64, f64) {
    let a = Hbm::<bf16>::shape_only([128, 2048]);
    let mut out = Hbm::<f32>::shape_only([2, 128, 2048]);
    let p = with_compile_config(CompileConfig::default().scheduling(h), || {
        two_paths::estimate(Grid::new([1]), Target::Trn2, &a, &mut out).unwrap()
    });
    (
        line_start(&p, LONG_EXP),
        line_start(&p, SHORT_EXP),
        p.latency_ns,
    )
}

#[test]
fn critical_path_runs_the_compute_instruction_with_the_longest_chain_after_it_first() {
    // ASAP: ScalarE takes the two ready activations in program order; CRITICAL_PATH takes
    // the one whose VectorE chain is longer than the other's activation and store, and the
    // chain then overlaps the long activation.
    let (long, short, asap) = paths(SchedulingHeuristic::Asap);
    assert!(long < short, "ASAP: program order: {long} vs {short}");
    let (long, short, critical) = paths(SchedulingHeuristic::CriticalPath);
    assert!(
        short < long,
        "CRITICAL_PATH: the short one first: {short} vs {long}"
    );
    assert!(critical < asap, "{critical} vs {asap}");
}

/// Lines of [`iota_or_load`]'s iota (iteration 0) and software-DGE load (iteration 1).
const IOTA: u32 = line!() + 9;
const SWDGE_LOAD: u32 = line!() + 13;

/// Two iterations whose GpSimdE instructions are ready at the start: iteration 0's iota and
/// iteration 1's descriptor generation of a software-DGE load.
#[nki_kernel]
fn iota_or_load(b: &Hbm<f32>, out: &mut Hbm<f32>) {
    for i in nl::affine_range(2) {
        if i == 0 {
            let t = nisa::iota(&AffineExpr::new(128, 2048).free(1, 2048), DType::F32);
            nl::store(out.slice(0), &t);
        } else {
            let t = nl::ndarray(&[128, 2048], DType::F32, nki_core::Alloc::from(nl::sbuf));
            let opts = DmaOpts::new().dge_mode(DgeMode::Swdge);
            nki_core::nisa::dma_copy(t.slice((.., ..)), b.view(), opts);
            nl::store(out.slice(1), &t);
        }
    }
}

fn iota_load(h: SchedulingHeuristic) -> (f64, f64, f64) {
    let b = Hbm::<f32>::shape_only([128, 2048]);
    let mut out = Hbm::<f32>::shape_only([2, 128, 2048]);
    let p = with_compile_config(CompileConfig::default().scheduling(h), || {
        iota_or_load::estimate(Grid::new([1]), Target::Trn2, &b, &mut out).unwrap()
    });
    (
        line_start(&p, IOTA),
        line_start(&p, SWDGE_LOAD),
        p.latency_ns,
    )
}

#[test]
fn dma_prefetch_starts_a_dma_on_an_engine_queue_before_compute_ready_as_early() {
    // ASAP: GpSimdE runs the iota first (program order) and generates the load's
    // descriptors after it; DMA_PREFETCH generates them first, so the load starts earlier
    // and the kernel ends sooner.
    let (iota, load, asap) = iota_load(SchedulingHeuristic::Asap);
    assert!(iota < load, "ASAP: program order: {iota} vs {load}");
    let (iota, load, prefetch) = iota_load(SchedulingHeuristic::DmaPrefetch);
    assert!(load < iota, "DMA_PREFETCH: the DMA first: {load} vs {iota}");
    assert!(prefetch < asap, "{prefetch} vs {asap}");
}

// ---- DMA descriptor generation ----

/// An `iota` that holds GpSimdE for a few microseconds, then a `[128, 256]` fp32 tile
/// gathered from the first columns of `a` and stored whole, both transfers with software-DGE
/// descriptors (generated on GpSimdE behind the iota).
#[nki_kernel]
fn generated_copy(a: &Hbm<f32>, out: &mut Hbm<f32>, ramp: &mut Hbm<f32>) {
    let r = nisa::iota(&AffineExpr::new(128, 4096).free(1, 4096), DType::F32);
    let t = nl::ndarray(&[128, 256], DType::F32, nki_core::Alloc::from(nl::sbuf));
    let opts = DmaOpts::new().dge_mode(DgeMode::Swdge);
    nki_core::nisa::dma_copy(t.slice((.., ..)), a.slice((.., 0..256)), opts);
    nki_core::nisa::dma_copy(out.slice((.., ..)), t.slice((.., ..)), opts);
    nl::store(ramp.view(), &r);
}

#[test]
fn a_transfer_starts_after_its_descriptors_whatever_address_its_tile_takes() {
    use nki_core::Track;
    let a = Hbm::<f32>::shape_only([128, 1024]);
    let mut out = Hbm::<f32>::shape_only([128, 256]);
    let mut ramp = Hbm::<f32>::shape_only([128, 4096]);
    for rotation in [AddressRotation::Auto, AddressRotation::Disable] {
        let config = CompileConfig::default().address_rotation(rotation);
        let p = with_compile_config(config, || {
            generated_copy::estimate(Grid::new([1]), Target::Trn2, &a, &mut out, &mut ramp)
        })
        .unwrap();
        let line = |s: &nki_core::Span| {
            p.ops
                .get(s.op as usize)
                .is_some_and(|o| o.api == "nisa.dma_copy")
        };
        let spans = |on: &dyn Fn(&Track) -> bool| {
            let mut v: Vec<(f64, f64)> = p
                .spans
                .iter()
                .filter(|s| s.cause.is_none() && line(s) && on(&s.track))
                .map(|s| (s.start_ns, s.start_ns + s.dur_ns))
                .collect();
            v.sort_by(|x, y| x.0.total_cmp(&y.0));
            v
        };
        let generation = spans(&|t| *t == Track::GpSimd);
        let transfers = spans(&|t| matches!(t, Track::DmaQueue(_)));
        assert_eq!((generation.len(), transfers.len()), (2, 2), "{p}");
        for (g, d) in generation.iter().zip(&transfers) {
            assert!(
                d.0 >= g.1,
                "{rotation:?}: a transfer at {} before its descriptors end at {}",
                d.0,
                g.1
            );
        }
    }
}
