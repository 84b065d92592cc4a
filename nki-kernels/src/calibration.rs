//! The public calibration points of the timing model (shared/reference/calibration.md
//! sections 1–6) and their modelled values: each point names its published figure and the
//! kernel (written as the source writes it) that [`points`] estimates for it. The
//! `calibration` example prints them; `tests/calibration.rs` holds the accuracy bands.
//! Section 5's points are byte counters (HBM and spill traffic of kernels whose tiles exceed
//! SBUF if all stay live), not times.

use crate::calibration_kernels::{
    activation_chain, one_load, transpose_tiles, vector_add_stream, vector_add_stream_dma,
    vector_add_tiled,
};
use crate::matmul::{PUBLISHED_TRN1, TUTORIAL_BENCHMARK_KMN};
use crate::nkibench::Baseline;
use nki_core::mesh::{CollectiveKind, ShardedHbm};
use nki_core::prelude::*;
use nki_core::Track;
use std::path::Path;

/// One published figure and its modelled value.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Section of calibration.md (1 to 6).
    pub section: u8,
    /// What was measured.
    pub name: String,
    /// The hardware it was measured on.
    pub target: Target,
    /// Published figure (µs, or percent when `percent`).
    pub published: f64,
    /// Modelled figure in the same unit.
    pub model: f64,
    /// True for the DMA-efficiency rows (percent of the 32 KiB/partition throughput).
    pub percent: bool,
    /// True for section 5's byte counters (`published` and `model` in bytes).
    pub bytes: bool,
    /// The two largest shares of what bounds the modelled kernel.
    pub bottleneck: String,
}

impl std::fmt::Display for Row {
    /// One table line: section, name, target, published, model, error, bottleneck.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let unit = if self.percent {
            "%"
        } else if self.bytes {
            "MB"
        } else {
            "us"
        };
        let scale = if self.bytes { 1e-6 } else { 1.0 };
        write!(
            f,
            "{:<3} {:<68} {:<5} {:>10.2}{unit:<2} {:>10.2}{unit:<2} {:>+7.1}%  {}",
            self.section,
            self.name,
            self.target.name(),
            self.published * scale,
            self.model * scale,
            self.error_percent(),
            self.bottleneck
        )
    }
}

impl Row {
    /// `model / published - 1`, in percent (a zero counter: 0 when the model is zero too,
    /// else 100).
    pub fn error_percent(&self) -> f64 {
        if self.published == 0.0 {
            return if self.model == 0.0 { 0.0 } else { 100.0 };
        }
        (self.model / self.published - 1.0) * 100.0
    }

    /// The row as a JSON object: `section`, `name`, `target`, `published_us`, `model_us`
    /// (null for percentage rows, which carry `published_percent` and `model_percent`, and
    /// for byte rows, which carry `published_bytes` and `model_bytes`), `error_percent` and
    /// `bottleneck`.
    pub fn json(&self) -> serde_json::Value {
        let us = |v: f64| {
            if self.percent || self.bytes {
                serde_json::Value::Null
            } else {
                serde_json::json!(v)
            }
        };
        let mut o = serde_json::json!({
            "section": self.section,
            "name": self.name,
            "target": self.target.name(),
            "published_us": us(self.published),
            "model_us": us(self.model),
            "error_percent": self.error_percent(),
            "bottleneck": self.bottleneck,
        });
        if self.percent {
            o["published_percent"] = serde_json::json!(self.published);
            o["model_percent"] = serde_json::json!(self.model);
        }
        if self.bytes {
            o["published_bytes"] = serde_json::json!(self.published);
            o["model_bytes"] = serde_json::json!(self.model);
        }
        o
    }
}

/// The profile's answer to "what bounds this kernel".
fn bottleneck(p: &Profile) -> String {
    let parts: Vec<String> = p.bounds.iter().take(2).map(|b| b.to_string()).collect();
    parts.join(", ")
}

/// A µs row from a profile's latency.
fn row(section: u8, name: &str, target: Target, published_us: f64, p: &Profile) -> Row {
    Row {
        section,
        name: name.to_string(),
        target,
        published: published_us,
        model: p.latency_us(),
        percent: false,
        bytes: false,
        bottleneck: bottleneck(p),
    }
}

/// Section 1 (the matmul tutorial on trn1); returns the wall and CPU time of the four
/// estimates, s.
fn section1(rows: &mut Vec<Row>) -> Result<(f64, f64), NkiError> {
    let t0 = std::time::Instant::now();
    let cpu0 = cpu_seconds().unwrap_or(0.0);
    let (k, m, n) = TUTORIAL_BENCHMARK_KMN;
    let lhs_t = Hbm::<bf16>::shape_only([k, m]);
    let rhs = Hbm::<bf16>::shape_only([k, n]);
    let mut result = Hbm::<bf16>::shape_only([m, n]);
    for p in PUBLISHED_TRN1 {
        let prof = p.kernel.estimate(Target::Trn1, &lhs_t, &rhs, &mut result)?;
        rows.push(row(
            1,
            p.kernel.name(),
            Target::Trn1,
            p.latency_ms * 1e3,
            &prof,
        ));
    }
    Ok((
        t0.elapsed().as_secs_f64(),
        cpu_seconds().unwrap_or(0.0) - cpu0,
    ))
}

/// Section 2: the micro-benchmarks.
fn section2(rows: &mut Vec<Row>) -> Result<(), NkiError> {
    // Back-to-back dependent activations, 1 element per partition: issue interval.
    let links = 16;
    let a = Hbm::<f32>::shape_only([128, 1]);
    let mut out = Hbm::<f32>::shape_only([128, 1]);
    let p = activation_chain::estimate(Grid::new([1]), Target::Trn1, &a, &mut out, links)?;
    let mut starts: Vec<f64> = p
        .spans
        .iter()
        .filter(|s| s.track == Track::Scalar)
        .map(|s| s.start_ns)
        .collect();
    starts.sort_by(f64::total_cmp);
    let ii = (starts[starts.len() - 1] - starts[0]) / (starts.len() - 1) as f64;
    rows.push(Row {
        section: 2,
        name: "dependent ScalarE activation, issue interval".into(),
        target: Target::Trn1,
        published: 0.189,
        model: ii / 1e3,
        percent: false,
        bytes: false,
        bottleneck: bottleneck(&p),
    });
    let load_us = |p: usize, f: usize| -> Result<(f64, Profile), NkiError> {
        let a = Hbm::<bf16>::shape_only([p, f]);
        let prof = one_load::estimate(Grid::new([1]), Target::Trn2, &a)?;
        let d = prof
            .spans
            .iter()
            .filter(|s| matches!(s.track, Track::DmaQueue(_)))
            .map(|s| s.dur_ns)
            .sum::<f64>();
        Ok((d / 1e3, prof))
    };
    let (d, prof) = load_us(4, 4096)?;
    rows.push(Row {
        section: 2,
        name: "one 32 KiB DMA [4, 4096] bf16".into(),
        target: Target::Trn2,
        published: 1.416,
        model: d,
        percent: false,
        bytes: false,
        bottleneck: bottleneck(&prof),
    });
    let (reference, _) = load_us(128, 16384)?;
    for (bytes, pct) in [
        (32usize, 1.4),
        (256, 10.0),
        (1024, 42.0),
        (2048, 81.0),
        (4096, 97.0),
        (16384, 99.0),
    ] {
        let (d, prof) = load_us(128, bytes / 2)?;
        let eff = 100.0 * (bytes as f64 / d) / (32768.0 / reference);
        rows.push(Row {
            section: 2,
            name: format!("DMA efficiency, {bytes} B/partition"),
            target: Target::Trn2,
            published: pct,
            model: eff,
            percent: true,
            bytes: false,
            bottleneck: bottleneck(&prof),
        });
    }
    Ok(())
}

/// Writes `p`'s Chrome trace into `dir` (when given) under a file name made from `name`.
fn trace(dir: Option<&Path>, name: &str, p: &Profile) {
    if let Some(dir) = dir {
        let file: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let path = dir.join(format!("{file}.json"));
        if let Err(e) = std::fs::create_dir_all(dir).and_then(|_| p.write_chrome_trace(&path)) {
            eprintln!("could not write {}: {e}", path.display());
        }
    }
}

/// Section 3a: the small kernels on trn1 (`nki.benchmark`).
fn section3_trn1(rows: &mut Vec<Row>, dir: Option<&Path>) -> Result<(), NkiError> {
    let g = || Grid::new([1]);
    let t1 = Target::Trn1;
    for (rc, published) in [(1usize, 27_404.0), (128, 206.0)] {
        let n = 25_600;
        let (a, b) = (Hbm::<f32>::shape_only([n, 1]), Hbm::shape_only([n, 1]));
        let mut out = Hbm::<f32>::shape_only([n, 1]);
        let p = vector_add_tiled::estimate(g(), t1, &a, &b, &mut out, rc)?;
        let name = format!("vector_add_tiled n=25600 ROW_CHUNK={rc}");
        trace(dir, &name, &p);
        rows.push(row(3, &name, t1, published, &p));
    }
    for (n, fd, published) in [
        (25_600usize, 2usize, 53.0),
        (25_600, 200, 19.0),
        (256_000, 2000, 34.0),
        (256_000, 1000, 29.0),
    ] {
        let shape = [n / (128 * fd), 128, fd];
        let (a, b) = (Hbm::<f32>::shape_only(shape), Hbm::shape_only(shape));
        let mut out = Hbm::<f32>::shape_only(shape);
        let p = vector_add_stream::estimate(g(), t1, &a, &b, &mut out)?;
        let name = format!("vector_add_stream n={n} FREE_DIM={fd}");
        trace(dir, &name, &p);
        rows.push(row(3, &name, t1, published, &p));
    }
    Ok(())
}

/// Section 3b: the small kernels on trn2 (`neuron-profile` summaries).
fn section3_trn2(rows: &mut Vec<Row>, dir: Option<&Path>) -> Result<(), NkiError> {
    let g = || Grid::new([1]);
    let t2 = Target::Trn2;
    for (fd, total, active) in [(1000usize, 26.4, 14.00), (2000, 28.9, 16.14)] {
        let shape = [128, 2000];
        let (a, b) = (Hbm::<f32>::shape_only(shape), Hbm::shape_only(shape));
        let mut out = Hbm::<f32>::shape_only(shape);
        let p = vector_add_stream_dma::estimate(g(), t2, &a, &b, &mut out, fd)?;
        let name = format!("vector_add_stream (dma_copy) n=256000 FREE_DIM={fd}");
        trace(dir, &name, &p);
        rows.push(row(3, &name, t2, total, &p));
        rows.push(Row {
            model: p.active_ns / 1e3,
            ..row(3, &format!("{name}, active"), t2, active, &p)
        });
    }
    let input = Hbm::<f32>::shape_only([1024, 1024]);
    let mut out = Hbm::<f32>::shape_only([1024, 1024]);
    let p = transpose_tiles::estimate(g(), t2, &input, &mut out)?;
    let name = "transpose 1024x1024 fp32 (dma_copy, nc_transpose, PSUM copy)";
    trace(dir, name, &p);
    rows.push(row(3, name, t2, 46.5, &p));
    rows.push(Row {
        model: p.active_ns / 1e3,
        ..row(3, &format!("{name}, active"), t2, 33.30, &p)
    });
    Ok(())
}

/// One nccom-test style collective on trn1 (the guide's instances): `ranks` devices in a row,
/// a message of `bytes` (per rank for all-reduce, the gathered output for all-gather) of
/// `T`, the algorithm the runtime picks. Returns the collective's modelled time (first rank
/// in to last rank out, as nccom-test times it, no launch pre/postamble) in µs and the
/// algorithm.
fn collective_us<T: Element>(
    kind: CollectiveKind,
    ranks: usize,
    bytes: usize,
) -> Result<(f64, String), NkiError> {
    use nki_core::mesh::{self, Algorithm, Mesh, MeshLaunch, PartitionSpec, ReplicaGroups};
    let m = Mesh::new([ranks], ["r"])?;
    let g = ReplicaGroups::all(&m);
    let elems = bytes / std::mem::size_of::<T>();
    let split = PartitionSpec::new([Some("r"), None]);
    let report = match kind {
        CollectiveKind::AllReduce => {
            // One row per rank of the group: dimension 0 splits over the ranks.
            let shape = [ranks * ranks, elems / ranks];
            let x = ShardedHbm::<T>::shape_only(&m, &shape, split.clone())?;
            let y = ShardedHbm::<T>::shape_only(&m, &shape, split)?;
            MeshLaunch::new(&m)
                .target(Target::Trn1)
                .mode(Mode::Estimate)
                .run(|| mesh::all_reduce(x.view(), y.view(), &g, Algorithm::Runtime))?
        }
        _ => {
            let per = elems / ranks;
            let x = ShardedHbm::<T>::shape_only(&m, &[ranks, per], split)?;
            let y = ShardedHbm::<T>::shape_only(&m, &[ranks, per], PartitionSpec::replicated(2))?;
            MeshLaunch::new(&m)
                .target(Target::Trn1)
                .mode(Mode::Estimate)
                .run(|| mesh::all_gather(x.view(), y.view(), 0, &g, Algorithm::Runtime))?
        }
    };
    let c = &report.collectives[0];
    Ok((c.time_ns / 1e3, c.algorithm.clone().unwrap_or_default()))
}

/// Section 4: nccom-test's example results (trn1).
fn section4(rows: &mut Vec<Row>) -> Result<(), NkiError> {
    use nki_core::mesh::CollectiveKind::{AllGather, AllReduce};
    // GiB/s of algorithm bandwidth to µs for `bytes`.
    let us = |bytes: usize, gib_s: f64| bytes as f64 / (gib_s * (1u64 << 30) as f64) * 1e6;
    let mib = 1usize << 20;
    let mut push = |name: String, published: f64, (model, alg): (f64, String)| {
        rows.push(Row {
            section: 4,
            name,
            target: Target::Trn1,
            published,
            model,
            percent: false,
            bytes: false,
            bottleneck: format!("{alg} algorithm"),
        });
    };
    push(
        "all-reduce 2 ranks uint8 32 MiB".into(),
        768.0,
        collective_us::<u8>(AllReduce, 2, 32 * mib)?,
    );
    for bytes in [8usize, 1024, 64 * 1024] {
        push(
            format!("all-reduce 2 ranks fp32 {bytes} B (floor)"),
            58.0,
            collective_us::<f32>(AllReduce, 2, bytes)?,
        );
    }
    for (bytes, gib_s, label) in [
        (mib, 14.4, "1 MiB"),
        (16 * mib, 47.0, "16 MiB"),
        (1024 * mib, 52.8, "1 GiB"),
    ] {
        push(
            format!("all-reduce 2 ranks fp32 {label}"),
            us(bytes, gib_s),
            collective_us::<f32>(AllReduce, 2, bytes)?,
        );
    }
    push(
        "all-gather 8 ranks fp32 1 KiB (p50)".into(),
        10.0,
        collective_us::<f32>(AllGather, 8, 1024)?,
    );
    push(
        "all-gather 8 ranks fp32 524 KiB".into(),
        14.8,
        collective_us::<f32>(AllGather, 8, 524 * 1024)?,
    );
    Ok(())
}

/// Section 5: NKIBench baselines on trn1 whose tiles exceed SBUF if all stay live; their
/// modelled HBM read and write and spill save and reload bytes beside the profiler's
/// counters. That they estimate at all is the first point: none may be rejected.
fn section5(rows: &mut Vec<Row>) -> Result<(), NkiError> {
    for b in Baseline::ALL {
        let p = b.estimate(Target::Trn1)?;
        let model = [
            p.dma.hbm_read_bytes,
            p.dma.hbm_write_bytes,
            p.spills.save_bytes,
            p.spills.reload_bytes,
        ];
        let what = ["HBM read", "HBM write", "spill save", "spill reload"];
        for ((what, counter), model) in what.iter().zip(b.counters()).zip(model) {
            rows.push(Row {
                section: 5,
                name: format!("{} {what}", b.name()),
                target: Target::Trn1,
                published: counter as f64,
                model: model as f64,
                percent: false,
                bytes: true,
                bottleneck: bottleneck(&p),
            });
        }
    }
    Ok(())
}

/// One trn2 profile's figure of §6: `what` of `p` (the latency, or an engine's active time)
/// beside the published µs.
fn profile_row(name: String, what: &str, published_us: f64, p: &Profile) -> Row {
    let model_ns = match what {
        "total" => p.latency_ns,
        engine => p.engine(engine).map_or(0.0, |e| e.active_ns),
    };
    Row {
        section: 6,
        model: model_ns / 1e3,
        ..row(6, &format!("{name}, {what}"), Target::Trn2, published_us, p)
    }
}

/// Section 6: AWS's trn2 profile analyses (calibration.md §6). The 4096³ bf16 matmul
/// ladder's totals and DMA, TensorE and VectorE active times; the TensorE time of 2,048
/// reduced or full matmuls and the DMA active time of tile loads and stores with 1 KiB and
/// 4 KiB descriptors, each published as a rate over that time (TFLOPS, GB/s) and compared
/// here as the time the kernel's own FLOPs or bytes take at that rate.
fn section6(rows: &mut Vec<Row>) -> Result<(), NkiError> {
    use crate::trn2_profiles::{dma_descriptors, ladder_blocked, ladder_tiled, te_tile_sizes};
    let t2 = Target::Trn2;
    let g = || Grid::new([1]);
    let s = 4096;
    let (lhs_t, rhs) = (
        Hbm::<bf16>::shape_only([s, s]),
        Hbm::<bf16>::shape_only([s, s]),
    );
    let ladder = [
        ("V0 tiled", [8602.0, 7906.0, 4806.0, 176.0]),
        ("V1 blocked BM=8 BN=2", [2451.0, 1325.0, 2163.0, 174.0]),
        ("V2 blocked, row loads", [1801.0, 819.0, 1781.0, 172.0]),
    ];
    for (v, (label, published)) in ladder.iter().enumerate() {
        let p = match v {
            0 => ladder_tiled::estimate(g(), t2, &lhs_t, &rhs)?.1,
            _ => ladder_blocked::estimate(g(), t2, &lhs_t, &rhs, 8, 2, v == 2)?.1,
        };
        let name = format!("matmul 4096^3 bf16 {label}");
        for (what, us) in ["total", "DMA", "TensorE", "VectorE"].iter().zip(published) {
            rows.push(profile_row(name.clone(), what, *us, &p));
        }
    }
    // §6b: 2,048 matmuls; FLOPs of the reduced sections: 512 each of M = 32, N = 64, K = 32
    // and full 128 x 128 x 512.
    let full = 2.0 * 128.0 * 128.0 * 512.0;
    let (a, b) = (
        Hbm::<bf16>::shape_only([128, 128]),
        Hbm::<bf16>::shape_only([128, 512]),
    );
    for (reduced, tflops, flops) in [
        (true, 30.8, 512.0 * full * (0.25 + 0.125 + 0.25 + 1.0)),
        (false, 77.2, 2048.0 * full),
    ] {
        let p = te_tile_sizes::estimate(g(), t2, &a, &b, reduced)?;
        let tiles = if reduced { "reduced" } else { "full" };
        let name = format!("2048 matmuls, {tiles} tiles ({tflops} TFLOPS over TensorE active)");
        rows.push(profile_row(name, "TensorE", flops / (tflops * 1e6), &p));
    }
    // §6c: 16 tiles in and out, 2 tile_cols bytes per descriptor.
    for (tile_cols, gbps) in [(512usize, 259.0), (2048, 354.0)] {
        let input = Hbm::<bf16>::shape_only([128, 16 * tile_cols]);
        let mut out = Hbm::<bf16>::shape_only([128, 16 * tile_cols]);
        let p = dma_descriptors::estimate(g(), t2, &input, &mut out, tile_cols)?;
        let bytes = 2.0 * 16.0 * (128 * tile_cols * 2) as f64;
        let name = format!(
            "DMA loads and stores, {} KiB descriptors ({gbps} GB/s over DMA active)",
            tile_cols * 2 / 1024
        );
        rows.push(profile_row(name, "DMA", bytes / (gbps * 1e3), &p));
    }
    Ok(())
}

/// A family of public calibration points: the points of one source and kind, which
/// cross-validation (`nki_kernels::cross_validation`) leaves out together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// Section 1: the NKI matmul tutorial's four stages on trn1.
    MatmulTutorial,
    /// Section 2: the micro-benchmarks (dependent ScalarE activations on trn1, DMA size on trn2).
    MicroBenchmarks,
    /// Section 3a: the CS149 small kernels on trn1.
    SmallKernelsTrn1,
    /// Section 3b: the CS149 small kernels' profiles on trn2.
    SmallKernelsTrn2,
    /// Section 4: nccom-test's collectives on trn1.
    Collectives,
    /// Section 5: the NKIBench baselines' HBM and spill byte counters on trn1.
    Counters,
    /// Section 6: AWS's trn2 profile analyses (the bf16 matmul ladder, TensorE tile sizes,
    /// DMA descriptor sizes).
    Trn2Profiles,
}

impl Family {
    /// Every family, in section order.
    pub const ALL: [Family; 7] = [
        Family::MatmulTutorial,
        Family::MicroBenchmarks,
        Family::SmallKernelsTrn1,
        Family::SmallKernelsTrn2,
        Family::Collectives,
        Family::Counters,
        Family::Trn2Profiles,
    ];

    /// Short name with its section ("§3a small kernels trn1", ...).
    pub fn name(self) -> &'static str {
        match self {
            Family::MatmulTutorial => "§1 matmul tutorial",
            Family::MicroBenchmarks => "§2 micro-benchmarks",
            Family::SmallKernelsTrn1 => "§3a small kernels trn1",
            Family::SmallKernelsTrn2 => "§3b small kernels trn2",
            Family::Collectives => "§4 collectives",
            Family::Counters => "§5 counters",
            Family::Trn2Profiles => "§6 trn2 profiles",
        }
    }

    /// This family's points with their modelled values (with the target and link tables in
    /// place now, see `nki_core::with_target_specs`), in section order; `trace_dir` receives
    /// a Chrome trace per section-3 kernel.
    pub fn points(self, trace_dir: Option<&Path>) -> Result<Vec<Row>, NkiError> {
        let mut rows = Vec::new();
        match self {
            Family::MatmulTutorial => section1(&mut rows).map(|_| ())?,
            Family::MicroBenchmarks => section2(&mut rows)?,
            Family::SmallKernelsTrn1 => section3_trn1(&mut rows, trace_dir)?,
            Family::SmallKernelsTrn2 => section3_trn2(&mut rows, trace_dir)?,
            Family::Collectives => section4(&mut rows)?,
            Family::Counters => section5(&mut rows)?,
            Family::Trn2Profiles => section6(&mut rows)?,
        }
        Ok(rows)
    }
}

impl Row {
    /// The family of points this row belongs to.
    pub fn family(&self) -> Family {
        match (self.section, self.target) {
            (1, _) => Family::MatmulTutorial,
            (2, _) => Family::MicroBenchmarks,
            (3, Target::Trn1) => Family::SmallKernelsTrn1,
            (3, _) => Family::SmallKernelsTrn2,
            (4, _) => Family::Collectives,
            (5, _) => Family::Counters,
            _ => Family::Trn2Profiles,
        }
    }
}

/// Every public calibration point with its modelled value, in section order, and the wall
/// and CPU time (s) the four full-size tutorial matmul estimates took. `trace_dir` receives a
/// Chrome trace per section-3 kernel.
pub fn points(trace_dir: Option<&Path>) -> Result<(Vec<Row>, (f64, f64)), NkiError> {
    let mut rows = Vec::new();
    let tutorial = section1(&mut rows)?;
    for family in &Family::ALL[1..] {
        rows.extend(family.points(trace_dir)?);
    }
    Ok((rows, tutorial))
}

/// CPU time (user + system, all threads) this process has used, in s, where Linux's
/// `/proc/self/stat` tells it (the machine may be shared, which inflates wall times).
pub fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}
