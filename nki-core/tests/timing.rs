//! The timing model's scheduler, profile and Chrome trace on hand-built record streams and on
//! small kernels. Expected times are computed here from the target table, independently of the
//! model's code.

use nki_core::__private::MemoryPeak;
use nki_core::prelude::*;
use nki_core::SourceLoc;
// The Beta-1 instruction forms (allocating, `_into` twins): the seeds' dialect.
use nki_core::__private::model;
use nki_core::nisa::classic as nisa;
use nki_core::{Bound, Track};
use nki_core::{BufId, CoreStream, CostFacts, DmaDims, Engine, Instr, MatmulDims, Opcode, Region};
use std::collections::HashMap;

const EPS: f64 = 1e-6;

fn region(tile: u64, p0: u32, p1: u32, lo: u64, hi: u64) -> Region {
    Region {
        buf: BufId::Tile(tile),
        p0,
        p1,
        lo,
        hi,
    }
}

fn whole(tile: u64) -> Region {
    region(tile, 0, 128, 0, 4096)
}

/// A Vector/Scalar/GpSimd record over `free` fp32 elements per partition.
fn op(engine: Engine, free: u32, reads: Vec<Region>, writes: Vec<Region>) -> Instr {
    Instr {
        reads: reads.into(),
        writes: writes.into(),
        ..Instr::with_cost(
            CostFacts {
                partitions: 128,
                free,
                ..CostFacts::new(engine, Opcode::TensorCopy)
            },
            "test.op",
            SourceLoc::caller(),
        )
    }
}

fn matmul(stat: Region, mov: Region, out: Region, acc: bool) -> Instr {
    let mut reads = vec![stat, mov];
    if acc {
        reads.push(out);
    }
    Instr {
        reads: reads.into(),
        writes: [out].into(),
        ..Instr::with_cost(
            CostFacts {
                partitions: 128,
                free: 512,
                inputs: 2,
                in_dtype: DType::BF16,
                psum: true,
                matmul: Some(MatmulDims {
                    k: 128,
                    m: 128,
                    n: 512,
                    fp32: false,
                    onezero: 0,
                }),
                ..CostFacts::new(Engine::Tensor, Opcode::Matmul)
            },
            "test.matmul",
            SourceLoc::caller(),
        )
    }
}

/// An HBM -> SBUF load of `[parts, bytes_per_partition]` into `tile` from HBM tensor `hbm`
/// (one contiguous HBM block).
fn load(hbm: u64, tile: u64, parts: u32, bytes_per_partition: u64) -> Instr {
    let bytes = parts as u64 * bytes_per_partition;
    Instr {
        reads: [Region {
            buf: BufId::Hbm(hbm),
            p0: 0,
            p1: 1,
            lo: 0,
            hi: bytes,
        }]
        .into(),
        writes: [region(tile, 0, parts, 0, bytes_per_partition)].into(),
        ..Instr::with_cost(
            CostFacts {
                partitions: parts,
                free: (bytes_per_partition / 2) as u32,
                in_dtype: DType::BF16,
                out_dtype: DType::BF16,
                dma: Some(DmaDims {
                    src: MemKind::Hbm,
                    dst: MemKind::Sbuf,
                    bytes,
                    partitions: parts,
                    start_partition: 0,
                    chunk_bytes: bytes,
                }),
                ..CostFacts::new(Engine::Dma, Opcode::DmaCopy)
            },
            "test.load",
            SourceLoc::caller(),
        )
    }
}

fn run_cores(target: Target, cores: Vec<(usize, Vec<Vec<Instr>>)>) -> Profile {
    let streams: Vec<CoreStream> = cores
        .into_iter()
        .map(|(nc, insts)| CoreStream {
            nc,
            instances: insts
                .into_iter()
                .enumerate()
                .map(|(i, r)| (vec![i], r))
                .collect(),
        })
        .collect();
    model(&streams, target, MemoryPeak::default())
}

fn run(target: Target, recs: Vec<Instr>) -> Profile {
    run_cores(target, vec![(0, vec![recs])])
}

/// (start, end) of every op, indexed like the records (TensorE: LS start to MM end; DMA: the
/// queue span).
fn times(p: &Profile) -> Vec<(f64, f64)> {
    let mut t: HashMap<u32, (f64, f64)> = HashMap::new();
    for s in &p.spans {
        if matches!(
            s.track,
            Track::DmaEngine(_) | Track::Stall(_) | Track::Launch
        ) {
            continue;
        }
        let e = t.entry(s.op).or_insert((f64::INFINITY, 0.0));
        e.0 = e.0.min(s.start_ns);
        e.1 = e.1.max(s.start_ns + s.dur_ns);
    }
    (0..p.ops.len() as u32).map(|i| t[&i]).collect()
}

fn trn1_cycles_ns(engine: Engine, cycles: f64) -> f64 {
    let s = Target::Trn1.spec();
    let ghz = match engine {
        Engine::Tensor => s.tensor_ghz,
        Engine::Vector => s.vector_ghz,
        Engine::Scalar => s.scalar_ghz,
        _ => s.gpsimd_ghz,
    };
    cycles / ghz
}

#[test]
fn raw_chain_serialises_with_dependency_latency() {
    let recs = vec![
        op(Engine::Vector, 1000, vec![], vec![whole(1)]),
        op(Engine::Vector, 1000, vec![whole(1)], vec![whole(2)]),
        op(Engine::Vector, 1000, vec![whole(2)], vec![whole(3)]),
    ];
    let p = run(Target::Trn1, recs);
    let t = times(&p);
    let dur = trn1_cycles_ns(Engine::Vector, 1000.0);
    let lat = trn1_cycles_ns(Engine::Vector, 200.0);
    assert!((t[0].1 - dur).abs() < EPS);
    assert!((t[1].0 - (t[0].1 + lat)).abs() < EPS, "{t:?}");
    assert!((t[2].0 - (t[1].1 + lat)).abs() < EPS, "{t:?}");
    assert!((p.active_ns - (3.0 * dur + 2.0 * lat)).abs() < EPS);
}

#[test]
fn independent_records_of_one_engine_run_back_to_back() {
    let recs = vec![
        op(Engine::Vector, 1000, vec![], vec![whole(1)]),
        op(Engine::Vector, 1000, vec![], vec![whole(2)]),
        op(Engine::Vector, 1000, vec![], vec![whole(3)]),
    ];
    let p = run(Target::Trn1, recs);
    let dur = trn1_cycles_ns(Engine::Vector, 1000.0);
    assert!((p.active_ns - 3.0 * dur).abs() < EPS, "{}", p.active_ns);
    let t = times(&p);
    assert!((t[1].0 - t[0].1).abs() < EPS && (t[2].0 - t[1].1).abs() < EPS);
}

#[test]
fn disjoint_parts_of_one_tile_do_not_depend() {
    let recs = vec![
        // Partitions 0..64 vs 64..128 of tile 1.
        op(Engine::Vector, 1000, vec![], vec![region(1, 0, 64, 0, 64)]),
        op(
            Engine::Scalar,
            10,
            vec![region(1, 64, 128, 0, 64)],
            vec![whole(9)],
        ),
        // Bytes 0..64 vs 64..128 of tile 2.
        op(Engine::Vector, 1000, vec![], vec![region(2, 0, 128, 0, 64)]),
        op(Engine::GpSimd, 10, vec![], vec![region(2, 0, 128, 64, 128)]),
        // Overlapping bytes 60..70 of tile 2: depends on record 2 (WAW).
        op(Engine::Scalar, 10, vec![], vec![region(2, 0, 1, 60, 70)]),
    ];
    let p = run(Target::Trn1, recs);
    let t = times(&p);
    assert!(t[1].0.abs() < EPS, "{t:?}");
    assert!(t[3].0.abs() < EPS, "{t:?}");
    assert!((t[4].0 - t[2].1).abs() < EPS, "{t:?}");
}

#[test]
fn independent_engines_overlap() {
    let recs = vec![
        op(Engine::Vector, 2000, vec![], vec![whole(1)]),
        op(Engine::Scalar, 1000, vec![], vec![whole(2)]),
        op(Engine::GpSimd, 500, vec![], vec![whole(3)]),
    ];
    let p = run(Target::Trn1, recs);
    let t = times(&p);
    assert!(t.iter().all(|x| x.0.abs() < EPS), "all start at 0: {t:?}");
    let want = trn1_cycles_ns(Engine::Vector, 2000.0);
    assert!((p.active_ns - want).abs() < EPS);
    let v = p.engine("VectorE").unwrap();
    assert!(
        (v.active_ns - want).abs() < EPS
            && (v.active_percent - 100.0 * want / p.latency_ns).abs() < 1e-6
    );
    let s = p.engine("ScalarE").unwrap();
    assert!((s.active_ns - trn1_cycles_ns(Engine::Scalar, 1000.0)).abs() < EPS);
    let g = p.engine("GpSimdE").unwrap();
    assert!((g.active_ns - trn1_cycles_ns(Engine::GpSimd, 650.0)).abs() < EPS);
}

#[test]
fn cross_engine_raw_war_and_waw() {
    let recs = vec![
        // 0: VectorE writes tile 1 (long).
        op(Engine::Vector, 4000, vec![], vec![whole(1)]),
        // 1: ScalarE reads tile 1: RAW, waits for 0's end + ScalarE dependency latency.
        op(Engine::Scalar, 100, vec![whole(1)], vec![whole(2)]),
        // 2: GpSimd writes tile 2 (written by 1): WAW, waits for 1's end (no latency).
        op(Engine::GpSimd, 10, vec![], vec![whole(2)]),
        // 3: VectorE long read of tile 4.
        op(Engine::Vector, 4000, vec![whole(4)], vec![whole(5)]),
        // 4: ScalarE overwrites tile 4: WAR, waits for 3's end (no latency).
        op(Engine::Scalar, 100, vec![], vec![whole(4)]),
    ];
    let p = run(Target::Trn1, recs);
    let t = times(&p);
    let lat_s = trn1_cycles_ns(Engine::Scalar, 200.0);
    assert!((t[1].0 - (t[0].1 + lat_s)).abs() < EPS, "RAW {t:?}");
    assert!((t[2].0 - t[1].1).abs() < EPS, "WAW {t:?}");
    assert!((t[4].0 - t[3].1).abs() < EPS, "WAR {t:?}");
    // 3 runs after 0 on VectorE (in order) without waiting for anything else.
    assert!((t[3].0 - t[0].1).abs() < EPS);
}

#[test]
fn matmul_accumulation_streams_with_background_weight_load() {
    let n = 64;
    let psum = region(100, 0, 128, 0, 2048);
    let mut recs = Vec::new();
    for i in 0..n {
        recs.push(matmul(whole(2 * i + 1), whole(2 * i + 2), psum, i > 0));
    }
    let p = run(Target::Trn1, recs);
    let mm = trn1_cycles_ns(Engine::Tensor, 512.0);
    let ls = trn1_cycles_ns(Engine::Tensor, 32.0);
    // One LoadStationary exposed, then MultiplyMoving back to back.
    assert!(
        (p.active_ns - (ls + n as f64 * mm)).abs() < 1e-3,
        "{}",
        p.active_ns
    );
    let spans: Vec<_> = p
        .spans
        .iter()
        .filter(|s| s.track == Track::MultiplyMoving)
        .collect();
    for w in spans.windows(2) {
        assert!((w[1].start_ns - (w[0].start_ns + w[0].dur_ns)).abs() < 1e-6);
    }
    // HFU: 64 full matmuls over the latency.
    let flops = 2.0 * 128.0 * 128.0 * 512.0 * n as f64;
    let hfu = 100.0 * flops / (2.0 * 128.0 * 128.0 * 2.8 * p.latency_ns);
    assert!((p.hfu_percent - hfu).abs() < 1e-9);
    assert_eq!(p.hardware_flops, flops as u64);
    assert!((p.mfu_percent - p.hfu_percent).abs() < 1e-12);
}

#[test]
fn trn2_tensor_engine_throttle_ramps_up_and_reengages_after_idle() {
    let s = Target::Trn2.spec();
    let mm = 512.0 / s.tensor_ghz;
    let ls = 32.0 / s.tensor_ghz;
    let psum = region(100, 0, 128, 0, 2048);
    let mut recs = Vec::new();
    for i in 0..40 {
        recs.push(matmul(whole(2 * i + 1), whole(2 * i + 2), psum, i > 0));
    }
    // A long VectorE op, then one more matmul that waits for it: the engine idled > 1.5 us.
    recs.push(op(Engine::Vector, 20000, vec![], vec![whole(500)]));
    recs.push(matmul(
        whole(500),
        whole(501),
        region(101, 0, 128, 0, 2048),
        false,
    ));
    let p = run(Target::Trn2, recs);
    // Independent reference: limit = 0.5 + 0.5 * min(1, (t - ramp start) / 3000).
    let limit = |since: f64| 0.5 + 0.5 * (since / 3000.0).min(1.0);
    let mut t = ls;
    let mut want = Vec::new();
    for _ in 0..40 {
        let d = mm / limit(t - ls);
        want.push((t, d));
        t += d;
    }
    let mms: Vec<(f64, f64)> = p
        .spans
        .iter()
        .filter(|x| x.track == Track::MultiplyMoving)
        .map(|x| (x.start_ns, x.dur_ns))
        .collect();
    assert_eq!(mms.len(), 41);
    for (g, w) in mms.iter().zip(&want) {
        assert!(
            (g.0 - w.0).abs() < 1e-6 && (g.1 - w.1).abs() < 1e-6,
            "{g:?} vs {w:?}"
        );
    }
    assert!((mms[0].1 - 2.0 * mm).abs() < 1e-9, "cold start at 50 %");
    assert!((mms[39].1 - mm).abs() < 1e-9, "full speed after the ramp");
    assert!(
        (mms[40].1 - 2.0 * mm).abs() < 1e-9,
        "re-engaged after idling"
    );
    // trn1 has no throttle.
    let p1 = run(
        Target::Trn1,
        vec![matmul(
            whole(1),
            whole(2),
            region(3, 0, 128, 0, 2048),
            false,
        )],
    );
    assert!((p1.active_ns - (32.0 + 512.0) / 2.8).abs() < 1e-9);
}

#[test]
fn trn2_tensor_engine_stays_throttled_while_its_utilisation_is_below_half() {
    // Each matmul waits for a VectorE copy of ~500 ns (the copies run back to back), so
    // TensorE works 213 ns of every ~500 (43 %): below 50 % over every 3 us window, the
    // limit keeps re-engaging and every matmul runs at half rate, though no gap between
    // them is long (the engine never idles 1.5 us).
    let s = Target::Trn2.spec();
    let mm = 512.0 / s.tensor_ghz;
    let n = 24;
    let mut recs = Vec::new();
    for i in 0..n {
        recs.push(op(Engine::Vector, 480, vec![], vec![whole(1000 + i)]));
    }
    for i in 0..n {
        recs.push(matmul(
            whole(1),
            whole(1000 + i),
            region(2000 + i, 0, 128, 0, 2048),
            false,
        ));
    }
    let p = run(Target::Trn2, recs);
    let mms: Vec<(f64, f64)> = p
        .spans
        .iter()
        .filter(|x| x.track == Track::MultiplyMoving)
        .map(|x| (x.start_ns, x.dur_ns))
        .collect();
    assert_eq!(mms.len(), n as usize);
    assert!(mms.last().unwrap().0 > 3.0 * s.pe_throttle_ramp_ns);
    for w in mms.windows(2) {
        let gap = w[1].0 - (w[0].0 + w[0].1);
        assert!(gap > 0.0 && gap < s.pe_throttle_ramp_ns / 2.0, "{w:?}");
    }
    for m in &mms {
        assert!(
            (m.1 - 2.0 * mm).abs() < 1e-9,
            "throttled throughout: {mms:?}"
        );
    }
}

#[test]
fn fp32_matmul_is_four_times_slower() {
    let mut r = matmul(whole(1), whole(2), region(3, 0, 128, 0, 2048), false);
    r.matmul = Some(MatmulDims {
        k: 128,
        m: 128,
        n: 512,
        fp32: true,
        onezero: 0,
    });
    let p32 = run(Target::Trn2, vec![r]);
    let p16 = run(
        Target::Trn2,
        vec![matmul(
            whole(1),
            whole(2),
            region(3, 0, 128, 0, 2048),
            false,
        )],
    );
    let ls16 = 32.0 / 2.4;
    assert!(((p32.active_ns - 4.0 * ls16) - 4.0 * (p16.active_ns - ls16)).abs() < 1e-6);
}

#[test]
fn small_dmas_pipeline_their_latency_but_hold_every_engine_for_the_minimum() {
    // 128 loads of 32 B per partition: each alone takes the ~850 ns floor, but the floor is a
    // latency; what serialises them is the per-DMA minimum every DMA engine spends on each.
    let n = 128u64;
    let recs: Vec<Instr> = (0..n).map(|i| load(1, 10 + i, 128, 32)).collect();
    let p = run(Target::Trn2, recs);
    let s = Target::Trn2.spec();
    let per_dma_ns = (8.0 * 32.0 / s.dma_engine_bytes_per_ns).max(s.dma_engine_min_ns);
    let want = s.dma_fixed_latency_ns + (n - 1) as f64 * per_dma_ns + s.dma_min_transfer_ns;
    assert!(
        (p.active_ns - want).abs() < 1e-6,
        "{} vs {want}",
        p.active_ns
    );
    assert!(p.active_ns < 0.3 * n as f64 * s.dma_min_transfer_ns);
    assert_eq!(p.dma.count, n as usize);
    assert_eq!(p.dma.bytes, n * 128 * 32);
    assert!((p.dma.average_bytes - 4096.0).abs() < EPS);
    assert_eq!(p.bottleneck().map(|b| b.bound), Some(Bound::DmaLatency));
}

#[test]
fn streaming_dmas_run_at_the_engines_bandwidth_and_short_row_gathers_slower() {
    // trn1: 16 contiguous loads of 2 MiB: 16 engines at 17 B/ns.
    let recs: Vec<Instr> = (0..16).map(|i| load(1, 10 + i, 128, 16384)).collect();
    let p = run(Target::Trn1, recs);
    let s = Target::Trn1.spec();
    let bytes = 16.0 * 128.0 * 16384.0;
    let want = s.dma_fixed_latency_ns + 8.0 * 16.0 * 16384.0 / s.dma_engine_bytes_per_ns;
    assert!(
        (p.active_ns - want).abs() < 1e-3,
        "{} vs {want}",
        p.active_ns
    );
    assert!((p.dma.hbm_gbps - bytes / p.latency_ns).abs() < 1e-9);
    assert_eq!(p.bottleneck().map(|b| b.bound), Some(Bound::DmaBandwidth));
    // The same loads gathered from separate 16 KiB HBM rows: descriptors of 4 KiB and more
    // move at the full rate too.
    let gather = |i: u64, bytes_per_partition: u64| {
        let mut r = load(1, 10 + i, 128, bytes_per_partition);
        r.dma.as_mut().unwrap().chunk_bytes = bytes_per_partition;
        r
    };
    let long = run(Target::Trn1, (0..16).map(|i| gather(i, 16384)).collect());
    assert!(
        (long.active_ns - want).abs() < 1e-3,
        "{} vs {want}",
        long.active_ns
    );
    // Gathered 1 KiB rows (the matmul tutorial's) move at the fitted short-run fraction.
    let p = run(Target::Trn1, (0..16).map(|i| gather(i, 1024)).collect());
    let want = s.dma_fixed_latency_ns
        + 8.0 * 16.0 * 1024.0 / (s.dma_engine_bytes_per_ns * s.dma_short_run_efficiency);
    assert!(
        (p.active_ns - want).abs() < 1e-3,
        "{} vs {want}",
        p.active_ns
    );
    // The launch pays the fixed pre/postamble on top.
    assert!((p.latency_ns - p.active_ns - s.launch_overhead_ns).abs() < 1e-6);
}

#[test]
fn dma_partitions_map_to_engines() {
    // Two 8-partition loads on partitions 0..8 share engine 0; they serialise.
    let a = load(1, 10, 8, 4096);
    let mut b = load(1, 11, 8, 4096);
    let p1 = run(Target::Trn2, vec![a.clone(), b.clone()]);
    // On partitions 8..16 the second one moves its bytes on engine 1, after the first one's
    // minimum there.
    b.dma.as_mut().unwrap().start_partition = 8;
    let p2 = run(Target::Trn2, vec![a, b]);
    let s = Target::Trn2.spec();
    let one = 8.0 * 4096.0 / s.dma_engine_bytes_per_ns;
    assert!((p1.active_ns - (s.dma_fixed_latency_ns + 2.0 * one)).abs() < 1e-6);
    let want = s.dma_fixed_latency_ns + s.dma_engine_min_ns + one;
    assert!((p2.active_ns - want).abs() < 1e-6);
    let busy: Vec<Track> = p2
        .spans
        .iter()
        .filter(|x| matches!(x.track, Track::DmaEngine(_)) && x.dur_ns > s.dma_engine_min_ns)
        .map(|x| x.track)
        .collect();
    assert_eq!(busy, vec![Track::DmaEngine(0), Track::DmaEngine(1)]);
}

#[test]
fn a_late_store_does_not_block_later_loads() {
    // Compute, then store its result; the next loads are independent and must not wait
    // behind the store in the DMA queues.
    let mut store = load(2, 1, 128, 2048);
    store.dma.as_mut().unwrap().src = MemKind::Sbuf;
    store.dma.as_mut().unwrap().dst = MemKind::Hbm;
    store.reads = [whole(1)].into();
    store.writes = [Region {
        buf: BufId::Hbm(2),
        p0: 0,
        p1: 1,
        lo: 0,
        hi: 128 * 2048,
    }]
    .into();
    let recs = vec![
        op(Engine::Vector, 60000, vec![], vec![whole(1)]),
        store,
        load(3, 20, 128, 2048),
    ];
    let p = run(Target::Trn2, recs);
    let t = times(&p);
    assert!(
        t[2].1 < t[0].1,
        "the load finishes while VectorE still runs: {t:?}"
    );
    assert!(t[1].0 >= t[0].1, "the store waits for its data: {t:?}");
}

fn store(tile: u64, hbm: u64, p0: u32, parts: u32, lo: u64, hi: u64) -> Instr {
    let bytes = hi - lo;
    Instr {
        reads: [region(tile, p0, p0 + parts, 0, bytes / parts as u64)].into(),
        writes: [Region {
            buf: BufId::Hbm(hbm),
            p0: 0,
            p1: 1,
            lo,
            hi,
        }]
        .into(),
        ..Instr::with_cost(
            CostFacts {
                partitions: parts,
                free: (bytes / parts as u64 / 2) as u32,
                in_dtype: DType::BF16,
                out_dtype: DType::BF16,
                dma: Some(DmaDims {
                    src: MemKind::Sbuf,
                    dst: MemKind::Hbm,
                    bytes,
                    partitions: parts,
                    start_partition: p0,
                    chunk_bytes: bytes / parts as u64,
                }),
                ..CostFacts::new(Engine::Dma, Opcode::DmaCopy)
            },
            "test.store",
            SourceLoc::caller(),
        )
    }
}

#[test]
fn stores_to_one_hbm_tensor_stay_ordered_but_overlap() {
    // Bounding ranges overlap (tiles of one output tensor); the two stores use different DMA
    // engines, so the second may run alongside the first but not start before it.
    let recs = vec![
        store(1, 7, 0, 64, 0, 64 * 4096),
        store(2, 7, 64, 64, 1000, 1000 + 64 * 4096),
    ];
    let p = run(Target::Trn2, recs);
    let t = times(&p);
    assert!(t[1].0 >= t[0].0 - EPS);
    assert!(t[1].0 < t[0].1, "not serialised: {t:?}");
    // A load of what a store wrote waits for the store (RAW through HBM).
    let mut ld = load(7, 3, 128, 2048);
    ld.reads[0].lo = 100;
    let recs = vec![store(1, 7, 0, 128, 0, 128 * 2048), ld];
    let t = times(&run(Target::Trn2, recs));
    assert!(t[1].0 >= t[0].1 - EPS, "{t:?}");
}

#[test]
fn writes_wait_for_recent_reads_even_after_many_reads() {
    // 200 short reads of tile 1 on ScalarE, then one VectorE write of tile 1: it must wait for
    // the last read (the access lists are bounded, the recent accesses are kept).
    let mut recs: Vec<Instr> = (0..200)
        .map(|i| op(Engine::Scalar, 64, vec![whole(1)], vec![whole(1000 + i)]))
        .collect();
    recs.push(op(Engine::Vector, 64, vec![], vec![whole(1)]));
    let p = run(Target::Trn1, recs);
    let t = times(&p);
    assert!(
        (t[200].0 - t[199].1).abs() < EPS,
        "{:?} {:?}",
        t[199],
        t[200]
    );
}

#[test]
fn instances_on_one_core_run_in_turn_cores_side_by_side() {
    let chain = || {
        vec![
            op(Engine::Scalar, 1000, vec![], vec![whole(1)]),
            op(Engine::Scalar, 1000, vec![whole(1)], vec![whole(2)]),
        ]
    };
    let one = run(Target::Trn1, chain());
    let same_core = run_cores(Target::Trn1, vec![(0, vec![chain(), chain()])]);
    let two_cores = run_cores(Target::Trn1, vec![(0, vec![chain()]), (1, vec![chain()])]);
    assert!((two_cores.active_ns - one.active_ns).abs() < EPS);
    assert!(same_core.active_ns >= 2.0 * one.active_ns - trn1_cycles_ns(Engine::Scalar, 200.0));
    assert_eq!(two_cores.cores.len(), 2);
    assert_eq!(two_cores.cores[1].nc, 1);
    assert_eq!(same_core.cores[0].instances, 2);
}

#[test]
fn neuroncores_on_one_hbm_stack_share_its_bandwidth() {
    // trn2: two cores streaming at their full DMA rate (2 x 368 B/ns) exceed one stack's
    // 725 B/ns; cores on different stacks do not.
    let loads = || -> Vec<Instr> { (0..32).map(|i| load(1, 10 + i, 128, 16384)).collect() };
    let shared = run_cores(Target::Trn2, vec![(0, vec![loads()]), (1, vec![loads()])]);
    let apart = run_cores(Target::Trn2, vec![(0, vec![loads()]), (2, vec![loads()])]);
    let s = Target::Trn2.spec();
    let bytes = 2.0 * 32.0 * 128.0 * 16384.0;
    assert!(shared.active_ns > apart.active_ns);
    assert!(bytes / (shared.active_ns - s.dma_fixed_latency_ns) <= s.hbm_bytes_per_ns + 1e-9);
    assert!(bytes / (apart.active_ns - s.dma_fixed_latency_ns) > s.hbm_bytes_per_ns);
}

#[nki_kernel]
fn add_tiles(a: &Hbm<bf16>, b: &Hbm<bf16>, c: &mut Hbm<bf16>) {
    // Each program instance stores its own rows of c (overlapping stores are a race).
    let base = nl::program_id(0) * a.shape()[0];
    for i in nl::affine_range(a.shape()[0] / 128) {
        let r = i * 128..(i + 1) * 128;
        let x = nl::load(a.slice((r.clone(), ..)));
        let y = nl::load(b.slice((r.clone(), ..)));
        let m = nl::matmul(&x, &y, true);
        let z = nl::add(&m, &y);
        nl::store(c.slice((base + r.start..base + r.end, ..)), &z);
    }
}

/// `x + 1` through `nisa.tensor_scalar` with no engine named (the result keeps `x`'s dtype),
/// `* 2` and `- 1` as nl ops (a float scalar promotes to fp32), then `* 3` on a named engine.
#[nki_kernel]
fn scale_shift<T: Element>(a: &Hbm<T>, c: &mut Hbm<f32>) {
    let x = nl::load(a.view());
    let unnamed = nki_core::nisa::TensorScalarOpts::new();
    let v = nisa::tensor_scalar(&x, nki_core::AluOp::Add, 1.0, unnamed);
    let y = nl::multiply(&v, 2.0);
    let z = nl::subtract(&y, 1.0);
    let named = nki_core::nisa::TensorScalarOpts::new().engine(Engine::Vector);
    let w = nisa::tensor_scalar(&z, nki_core::AluOp::Multiply, 3.0, named);
    nl::store(c.view(), &w);
}

#[test]
fn a_tensor_scalar_with_no_engine_named_runs_where_it_costs_least() {
    // The engines of (unnamed add, multiply, subtract, named multiply) per target and dtype.
    fn engines<T: Element>(target: Target) -> Vec<Engine> {
        let a = Hbm::<T>::shape_only([128, 512]);
        let mut c = Hbm::<f32>::shape_only([128, 512]);
        let p = scale_shift::estimate(Grid::new([1]), target, &a, &mut c).unwrap();
        let ops = p.ops.iter().filter(|o| o.opcode == Opcode::TensorScalar);
        ops.map(|o| o.engine).collect()
    }
    let (v, s) = (Engine::Vector, Engine::Scalar);
    // trn2 fp32: N = 512 cycles on either engine (VectorE has no performance mode for fp32),
    // and ScalarE's clock (1.2 GHz) beats VectorE's (0.96 GHz): ScalarE, where it may run
    // the operators. ScalarE cannot subtract; a named engine stays.
    assert_eq!(engines::<f32>(Target::Trn2), [s, s, v, v]);
    // trn2 bf16 in and out, in SBUF: VectorE's 4x mode makes it the cheaper one; the multiply
    // writes fp32 (no performance mode), so it goes to ScalarE.
    assert_eq!(engines::<bf16>(Target::Trn2), [v, s, v, v]);
    // trn1: ScalarE runs no tensor_scalar.
    assert_eq!(engines::<f32>(Target::Trn1), [v, v, v, v]);
    // trn3: equal clocks, and VectorE's 4x bf16 mode beats ScalarE's 2x; a tie keeps VectorE.
    assert_eq!(engines::<f32>(Target::Trn3), [v, v, v, v]);
    assert_eq!(engines::<bf16>(Target::Trn3), [v, v, v, v]);
}

#[nki_kernel]
fn store_psum(a: &Hbm<bf16>, c: &mut Hbm<f32>) {
    let x = nl::load(a.view());
    let m = nl::matmul(&x, &x, true);
    nl::store(c.view(), &m);
}

#[test]
fn a_psum_tile_stored_to_hbm_goes_through_an_inserted_scalar_copy() {
    // Beta 1 nl.store of a PSUM tile: the compiler inserts a PSUM -> SBUF copy (ScalarE), and
    // the DMA reads the SBUF copy, after it.
    let a = Hbm::<bf16>::shape_only([128, 128]);
    let mut c = Hbm::<f32>::shape_only([128, 128]);
    let p = store_psum::estimate(Grid::new([1]), Target::Trn2, &a, &mut c).unwrap();
    let copy = p
        .ops
        .iter()
        .position(|o| o.api == "nl.store (PSUM copy)")
        .expect("an inserted copy");
    assert_eq!(p.ops[copy].engine, Engine::Scalar);
    let store = p.ops.iter().position(|o| o.api == "nl.store").unwrap();
    assert!(store > copy);
    let span = |i: usize| {
        p.spans
            .iter()
            .find(|s| s.op as usize == i && s.track != Track::Launch)
            .map(|s| (s.start_ns, s.start_ns + s.dur_ns))
            .unwrap()
    };
    assert!(
        span(store).0 >= span(copy).1,
        "{:?} {:?}",
        span(copy),
        span(store)
    );
}

#[test]
fn chrome_trace_is_valid_and_tracks_never_partially_overlap() {
    let a = Hbm::<bf16>::shape_only([512, 128]);
    let b = Hbm::<bf16>::shape_only([512, 128]);
    let mut c = Hbm::<bf16>::shape_only([4 * 512, 128]);
    let grid = Grid::from_dims(vec![spmd_dim(2, nc(2))]);
    let p = add_tiles::estimate(grid, Target::Trn2, &a, &b, &mut c).unwrap();
    assert_eq!(p.cores.len(), 2);
    let path = std::env::temp_dir().join(format!("nki_timing_trace_{}.json", std::process::id()));
    p.write_chrome_trace(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).ok();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let mut procs = 0;
    let mut threads: HashMap<(i64, i64), String> = HashMap::new();
    let mut per_track: HashMap<(i64, i64), Vec<(f64, f64)>> = HashMap::new();
    let mut opcodes = std::collections::BTreeSet::new();
    for e in events {
        let pid = e["pid"].as_i64().unwrap();
        match e["ph"].as_str().unwrap() {
            "M" if e["name"] == "process_name" => {
                procs += 1;
                assert!(e["args"]["name"].as_str().unwrap().contains("NeuronCore"));
            }
            "M" if e["name"] == "thread_name" => {
                threads.insert(
                    (pid, e["tid"].as_i64().unwrap()),
                    e["args"]["name"].as_str().unwrap().to_string(),
                );
            }
            "M" => {}
            "X" if e["cat"] == "launch" => {}
            "X" => {
                let tid = e["tid"].as_i64().unwrap();
                let ts = e["ts"].as_f64().unwrap();
                let dur = e["dur"].as_f64().unwrap();
                assert!(dur >= 0.0);
                let args = &e["args"];
                assert!(args["source"].as_str().unwrap().contains("timing.rs:"));
                assert!(args["api"].as_str().unwrap().starts_with("nl."));
                assert!(args["shape"].as_str().unwrap().starts_with('['));
                assert!(args["program_id"].is_array());
                opcodes.insert(args["opcode"].as_str().unwrap().to_string());
                per_track
                    .entry((pid, tid))
                    .or_default()
                    .push((ts, ts + dur));
            }
            other => panic!("unexpected event phase {other}"),
        }
    }
    assert_eq!(procs, 2);
    for k in per_track.keys() {
        assert!(threads.contains_key(k), "track {k:?} has no thread_name");
    }
    let names: std::collections::BTreeSet<&str> = threads.values().map(|s| s.as_str()).collect();
    for want in [
        "TensorMatrixE (MultiplyMoving)",
        "VectorE",
        "DMA engine 0",
        "DMA queue 0",
    ] {
        assert!(names.contains(want), "{names:?}");
    }
    for want in ["DMA_COPY", "MATMUL", "TENSOR_TENSOR"] {
        assert!(opcodes.contains(want), "{opcodes:?}");
    }
    // No partial overlaps on a track: each event starts after the previous ends or nests in it.
    for (k, mut v) in per_track {
        v.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)));
        let mut stack: Vec<(f64, f64)> = Vec::new();
        for (s, e) in v {
            while let Some(&(_, pe)) = stack.last() {
                if s >= pe - 1e-9 {
                    stack.pop();
                } else {
                    break;
                }
            }
            if let Some(&(_, pe)) = stack.last() {
                assert!(
                    e <= pe + 1e-9,
                    "partial overlap on {k:?}: [{s}, {e}] vs end {pe}"
                );
            }
            stack.push((s, e));
        }
    }
}

#[test]
fn profile_summary_json_and_display() {
    let a = Hbm::<bf16>::shape_only([256, 128]);
    let b = Hbm::<bf16>::shape_only([256, 128]);
    let mut c = Hbm::<bf16>::shape_only([256, 128]);
    let p = add_tiles::estimate(Grid::new([1]), Target::Trn1, &a, &b, &mut c).unwrap();
    // 2 iterations: 4 loads + 2 stores of 32 KiB.
    assert_eq!(p.dma.count, 6);
    assert_eq!(p.dma.bytes, 6 * 128 * 128 * 2);
    assert_eq!(p.dma.hbm_read_bytes, 4 * 32768);
    assert_eq!(p.dma.hbm_write_bytes, 2 * 32768);
    let counts: HashMap<String, usize> = p.instruction_counts.iter().cloned().collect();
    assert_eq!(counts["TensorE"], 2);
    assert_eq!(counts["VectorE"], 2);
    assert_eq!(counts["DMA"], 6);
    assert_eq!(p.instructions, 10);
    assert!(p.memory.sbuf_bytes_per_partition > 0);
    let j: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
    assert!((j["latency_ns"].as_f64().unwrap() - p.latency_ns).abs() < 1e-6);
    assert!((j["active_ns"].as_f64().unwrap() - p.active_ns).abs() < 1e-6);
    assert!(j["bounds"].as_array().is_some_and(|b| !b.is_empty()));
    assert_eq!(j["dma"]["count"], 6);
    assert!(j["top_lines"].as_array().unwrap().len() >= 4);
    let text = p.to_string();
    assert!(text.contains("latency") && text.contains("TensorE") && text.contains("HFU"));
    assert!(text.contains("timing.rs:"), "{text}");
    // The top line by time is one of the loads (DMA-bound kernel).
    assert_eq!(p.top_lines[0].engine, "DMA");
}

/// One load, then per iteration: VectorE square, ScalarE exp of it, VectorE square, store.
#[nki_kernel]
fn vector_scalar_chain(a: &Hbm<f32>, out: &mut Hbm<f32>, affine: bool) {
    let n = out.shape()[0];
    let x = nl::load(a);
    let iters: Box<dyn Iterator<Item = usize>> = if affine {
        Box::new(nl::affine_range(n))
    } else {
        Box::new(nl::sequential_range(n))
    };
    for i in iters {
        let y = nl::multiply(&x, &x);
        let z = nisa::activation(nisa::ActFn::Exp, &y, nisa::ActivationOpts::new());
        let w = nl::multiply(&z, &z);
        nl::store(out.slice(i), &w);
    }
}

/// A running sum over column blocks (nl.sequential_range's loop-carried dependency): `acc +=
/// x[:, block]`, stored each iteration, in a `sequential_range` or a host loop.
#[nki_kernel]
fn running_sum(a: &Hbm<f32>, out: &mut Hbm<f32>, sequential: bool) {
    let n = a.shape()[1] / 512;
    let mut acc = nl::zeros(&[128, 512], DType::F32, MemKind::Sbuf);
    let iters: Box<dyn Iterator<Item = usize>> = if sequential {
        Box::new(nl::sequential_range(n))
    } else {
        Box::new(0..n)
    };
    for i in iters {
        let cols = i * 512..(i + 1) * 512;
        let x = nl::load(a.slice((0..128, cols.clone())));
        acc = nl::add(&acc, &x);
        nl::store(out.slice((0..128, cols)), &acc);
    }
}

#[test]
fn sequential_range_is_timed_like_a_host_loop_with_its_loop_carried_dependency() {
    let a = Hbm::<f32>::shape_only([128, 4096]);
    let mut out = Hbm::<f32>::shape_only([128, 4096]);
    let g = || Grid::new([1]);
    let seq = running_sum::estimate(g(), Target::Trn2, &a, &mut out, true).unwrap();
    let host = running_sum::estimate(g(), Target::Trn2, &a, &mut out, false).unwrap();
    // Beta 1 replaces a kernel's Python range() with sequential_range: the same timeline.
    assert_eq!(seq.latency_ns, host.latency_ns);
    // Each add reads the previous one's result: it starts no earlier than that add's end.
    let t = times(&seq);
    let adds: Vec<usize> = (0..seq.ops.len())
        .filter(|&i| seq.ops[i].opcode == Opcode::TensorTensor)
        .collect();
    assert_eq!(adds.len(), 8);
    for w in adds.windows(2) {
        assert!(t[w[1]].0 >= t[w[0]].1, "{:?} {:?}", t[w[0]], t[w[1]]);
    }
}

/// VectorE start times in program order of its records.
fn vector_starts(p: &Profile) -> Vec<f64> {
    let t = times(p);
    p.ops
        .iter()
        .enumerate()
        .filter(|(_, o)| o.engine == Engine::Vector)
        .map(|(i, _)| t[i].0)
        .collect()
}

#[test]
fn affine_iterations_interleave_on_an_engine_and_sequential_ones_keep_order() {
    let a = Hbm::<f32>::shape_only([128, 512]);
    let mut out = Hbm::<f32>::shape_only([8, 128, 512]);
    let g = || Grid::new([1]);
    // The program as written: compiled (the Beta-1 default), the affine loop's body, the same
    // in every iteration, runs once (`CompilerStage::hoist_compute`).
    let (par, seq) = nki_core::with_compiler_stage(nki_core::CompilerStage::OFF, || {
        (
            vector_scalar_chain::estimate(g(), Target::Trn1, &a, &mut out, true).unwrap(),
            vector_scalar_chain::estimate(g(), Target::Trn1, &a, &mut out, false).unwrap(),
        )
    });
    // sequential_range: VectorE runs its records in program order.
    let s = vector_starts(&seq);
    assert!(s.windows(2).all(|w| w[0] <= w[1]), "{s:?}");
    // affine_range: a later iteration's first multiply runs while an earlier iteration waits
    // for its ScalarE exp, so some VectorE record starts before one issued earlier.
    let v = vector_starts(&par);
    assert!(v.windows(2).any(|w| w[1] < w[0]), "{v:?}");
    assert!(
        par.active_ns < seq.active_ns,
        "{} vs {}",
        par.active_ns,
        seq.active_ns
    );
    // The waiting shows as stalls in the sequential timeline, and is named in the bounds.
    assert!(seq
        .spans
        .iter()
        .any(|s| s.track == Track::Stall(Engine::Vector)));
    assert!(seq.bounds.iter().any(|b| b.bound == Bound::DependencyStall));
    // The Chrome trace draws them on a "VectorE stalls" thread, naming what was waited for.
    let path = std::env::temp_dir().join(format!("nki-stalls-{}.json", std::process::id()));
    seq.write_chrome_trace(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let events = json["traceEvents"].as_array().unwrap();
    assert!(events
        .iter()
        .any(|e| e["args"]["name"] == "VectorE stalls" && e["name"] == "thread_name"));
    assert!(events
        .iter()
        .any(|e| e["name"] == "stall" && e["args"]["for"] == "ACTIVATE"));
}

/// Each iteration loads the same `[64, 128]` tile of `a` again, transposes it on TensorE and
/// multiplies it (K = 64 of TensorE's 128 rows) with its own `[64, 512]` rows of `b`.
#[nki_kernel]
fn transposes_the_same_tile(a: &Hbm<bf16>, b: &Hbm<bf16>, c: &mut Hbm<f32>) {
    for i in nl::sequential_range(3) {
        let x = nl::load(a.view());
        let _xt = nisa::nc_transpose(&x, nisa::Engine::Tensor);
        let y = nl::load(b.slice((i * 64..(i + 1) * 64, ..)));
        let m = nl::matmul(&x, &y, true);
        let z = nl::copy(&m, None);
        nl::store(c.slice((i * 128..(i + 1) * 128, ..)), &z);
    }
}

#[test]
fn bounds_find_reloads_reduced_tensor_tiles_and_recurring_transposes() {
    use nki_core::FindingKind;
    let a = Hbm::<bf16>::shape_only([64, 128]);
    let b = Hbm::<bf16>::shape_only([192, 512]);
    let mut c = Hbm::<f32>::shape_only([384, 512]);
    let p =
        transposes_the_same_tile::estimate(Grid::new([1]), Target::Trn2, &a, &b, &mut c).unwrap();
    let bounds = p.bounds();
    let one = |kind| {
        let v: Vec<_> = bounds.of_kind(kind).collect();
        assert_eq!(v.len(), 1, "{kind:?}: {bounds}");
        v[0].clone()
    };
    let reloaded = one(FindingKind::Reloaded);
    assert_eq!((reloaded.count, reloaded.bytes), (2, 2 * 64 * 128 * 2));
    assert_eq!(reloaded.api, "nl.load");
    let reduced = one(FindingKind::ReducedTensorTile);
    assert_eq!(reduced.count, 3);
    assert!(reduced.detail.contains("50% of the PE array"), "{reduced}");
    let recurring = one(FindingKind::RecurringTranspose);
    assert_eq!(recurring.count, 2);
    assert!(
        recurring.detail.contains("2 of 3 transposes"),
        "{recurring}"
    );
    // Rows of 256 B (a) and 1 KiB (b) are both under 4 KiB; the stores' 2 KiB rows too.
    assert_eq!(
        bounds.of_kind(FindingKind::SmallDescriptors).count(),
        3,
        "{bounds}"
    );
    // Ideal: a once, b once, c once; the kernel moved a three times.
    assert_eq!(
        bounds.bytes_ideal,
        (64 * 128 * 2 + 192 * 512 * 2 + 384 * 512 * 4) as u64
    );
    assert_eq!(bounds.bytes_moved, bounds.bytes_ideal + 2 * 64 * 128 * 2);
    assert!(bounds.of_kind(FindingKind::Spilled).next().is_none());
}

#[test]
fn the_instruction_dump_folds_loop_iterations_and_shows_operands_and_times() {
    let one = bf16::from_f32(1.0);
    let a = Hbm::<bf16>::full([512, 128], one);
    let b = Hbm::<bf16>::full([512, 128], one);
    let mut c = Hbm::<bf16>::zeros([512, 128]);
    let p = add_tiles::simulate(Grid::new([1]), Target::Trn2, &a, &b, &mut c).unwrap();
    let ir = p
        .ir()
        .expect("simulate launches keep their records")
        .to_string();
    // 4 iterations of load, load, matmul, add, store: one folded body.
    assert!(ir.contains("loop x4 (records 0..20"), "{ir}");
    let body: Vec<&str> = ir.lines().filter(|l| l.contains("timing.rs:")).collect();
    assert_eq!(body.len(), 5, "{ir}");
    assert!(
        body[0].contains("DMA") && body[0].contains("nl.load"),
        "{ir}"
    );
    assert!(
        body[0].contains("sbuf:t0[p0..128, 0..256 B] bfloat16 <- hbm:hbm0[0..32768 B]"),
        "{ir}"
    );
    assert!(
        body[2].contains("MATMUL") && body[2].contains("K=128 M=128 N=128"),
        "{ir}"
    );
    assert!(
        body.iter()
            .all(|l| l.contains(" ns..") || l.contains(" us..")),
        "{ir}"
    );
    let path = std::env::temp_dir().join(format!("nki-ir-{}.txt", std::process::id()));
    p.write_ir(&path).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), ir);
    let _ = std::fs::remove_file(&path);
    // Estimates drop their records unless asked to keep them.
    let (sa, sb) = (
        Hbm::<bf16>::shape_only([512, 128]),
        Hbm::<bf16>::shape_only([512, 128]),
    );
    let mut sc = Hbm::<bf16>::shape_only([512, 128]);
    let e = add_tiles::estimate(Grid::new([1]), Target::Trn2, &sa, &sb, &mut sc).unwrap();
    assert!(e.ir().is_none());
    let err = e.write_ir(&path).unwrap_err();
    assert!(err.to_string().contains("keep_records"), "{err}");
    let launch = Launch::new(1)
        .target(Target::Trn2)
        .mode(Mode::Estimate)
        .keep_records();
    let kept = add_tiles::run(launch, &sa, &sb, &mut sc)
        .unwrap()
        .profile
        .unwrap();
    assert_eq!(
        kept.ir().unwrap().to_string().lines().count(),
        ir.lines().count()
    );
}
