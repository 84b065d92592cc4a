//! Parameter sweeps on modelled time: estimate a kernel at every point of a parameter grid on
//! all host cores and pick the fastest configuration.
//!
//! A [`ParamGrid`] names the tunable parameters (tile sizes, block counts, buffer counts, ...)
//! and their candidate values; [`Sweep::run`] calls a closure once per point (the closure
//! usually runs `my_kernel::estimate(...)` on `Hbm::shape_only` tensors and returns its
//! [`Profile`]). Points the kernel or the hardware rules reject (an SBUF/PSUM capacity
//! overflow, a tile over 128 partitions or one PSUM bank, a shape that does not divide, a
//! panic in the closure) do not stop the sweep: they are listed in the [`SweepReport`] with
//! their [`ErrorKind`] and the first line of the error message. The report gives the best
//! configuration, a readable table, CSV and JSON.
//!
//! ```
//! use nki_core::prelude::*;
//! use nki_core::sweep::{ParamGrid, Sweep};
//!
//! // A user kernel with a tunable free-dimension chunk.
//! #[nki_kernel]
//! fn scale(a: &Hbm<f32>, out: &mut Hbm<f32>, chunk: usize) {
//!     let rows = nl::program_id(0) * 128;
//!     for j in nl::affine_range(a.shape()[1] / chunk) {
//!         let cols = j * chunk..(j + 1) * chunk;
//!         let x = nl::load(a.slice((rows..rows + 128, cols.clone())));
//!         nl::store(out.slice((rows..rows + 128, cols)), &(&x * 2.0));
//!     }
//! }
//!
//! let a = Hbm::<f32>::shape_only([256, 4096]);
//! let grid = ParamGrid::new().axis("chunk", [256, 512, 1024, 2048]);
//! let report = Sweep::new(grid).progress(false).run(|p| {
//!     let mut out = Hbm::<f32>::shape_only([256, 4096]);
//!     scale::estimate(2, Target::Trn2, &a, &mut out, p["chunk"])
//! });
//! let best = report.best().expect("some chunk fits");
//! println!("{report}");
//! assert!(report.to_csv().starts_with("chunk,status,latency_ns"));
//! assert!(best.latency_ns().unwrap() > 0.0);
//! ```
//!
//! With the `criterion` feature, `ModelledTime` is a criterion measurement whose values are
//! modelled device nanoseconds, so `cargo bench` reports modelled latency per configuration
//! (see `bench_grid`).

use crate::error::{ErrorKind, NkiError};
use crate::profile::units::human_ns;
use crate::profile::Profile;
use std::fmt;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

mod estimated;
mod grid;
pub use estimated::IntoProfile;
use grid::first_line;
pub use grid::{ParamGrid, Params};

/// What a point's estimate gave: the figures a sweep compares (the full [`Profile`] is not kept:
/// re-run the best point to get it).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Estimate {
    /// Modelled latency in ns.
    pub latency_ns: f64,
    /// What bounds the kernel (the largest critical-path share), e.g. "TensorE 61%".
    pub bottleneck: String,
    /// Instruction records.
    pub instructions: usize,
    /// Model FLOPs utilisation in percent.
    pub mfu_percent: f64,
    /// Bytes moved by DMAs.
    pub dma_bytes: u64,
    /// Peak SBUF bytes per partition.
    pub sbuf_bytes_per_partition: usize,
}

impl Estimate {
    /// The figures of `p`.
    pub fn of(p: &Profile) -> Estimate {
        Estimate {
            latency_ns: p.latency_ns,
            bottleneck: p.bottleneck().map(|b| b.to_string()).unwrap_or_default(),
            instructions: p.instructions,
            mfu_percent: p.mfu_percent,
            dma_bytes: p.dma.bytes,
            sbuf_bytes_per_partition: p.memory.sbuf_bytes_per_partition,
        }
    }
}

/// Why a point was rejected.
#[derive(Clone, Debug, PartialEq)]
pub struct Rejection {
    /// The error kind ([`ErrorKind::ClosurePanic`] for a panic in the estimate closure or a
    /// rule; `None` only for a point that was never estimated).
    pub kind: Option<ErrorKind>,
    /// The first line of the error (or panic) message.
    pub reason: String,
}

impl Rejection {
    /// "capacity" for SBUF/PSUM capacity, "shape" for the tile- and shape-limit kinds (and
    /// invalid arguments or grids), "error" for anything else (a race, a read of an unwritten
    /// tile, a panic: most likely a bug in the kernel rather than a bad configuration).
    pub fn category(&self) -> &'static str {
        match self.kind {
            Some(ErrorKind::Capacity) => "capacity",
            Some(
                ErrorKind::PartitionLimit
                | ErrorKind::PsumBankLimit
                | ErrorKind::MatmulLimit
                | ErrorKind::ShapeMismatch
                | ErrorKind::PartitionMismatch
                | ErrorKind::ContractionMismatch
                | ErrorKind::OutOfBounds
                | ErrorKind::PartitionOffset
                | ErrorKind::InvalidArgument
                | ErrorKind::InvalidGrid,
            ) => "shape",
            _ => "error",
        }
    }

    fn of_error(e: &NkiError) -> Rejection {
        Rejection {
            kind: Some(e.kind()),
            reason: first_line(&e.to_string()),
        }
    }
}

/// One point of a sweep and what it gave.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepPoint {
    /// The parameters.
    pub params: Params,
    /// The estimate, or why the point was rejected.
    pub outcome: Result<Estimate, Rejection>,
}

impl SweepPoint {
    /// The modelled latency, when the point was estimated.
    pub fn latency_ns(&self) -> Option<f64> {
        self.outcome.as_ref().ok().map(|e| e.latency_ns)
    }
}

/// A sweep over a [`ParamGrid`]: see the [module docs](self).
pub struct Sweep {
    grid: ParamGrid,
    threads: usize,
    progress: Option<bool>,
    reject: Vec<Box<RejectRule>>,
}

/// A rule that rejects a point before it is estimated (see [`Sweep::reject_if`]).
type RejectRule = dyn Fn(&Params) -> Option<String> + Send + Sync;

impl Sweep {
    /// A sweep of every point of `grid`, on all host cores, with a progress bar when standard
    /// error is a terminal.
    pub fn new(grid: ParamGrid) -> Sweep {
        Sweep {
            grid,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            progress: None,
            reject: Vec::new(),
        }
    }

    /// Caps the host threads that estimate points at once (at least 1). The report is the
    /// same for any count.
    pub fn threads(mut self, n: usize) -> Sweep {
        self.threads = n.max(1);
        self
    }

    /// Forces the progress bar on or off (by default it is drawn when standard error is a
    /// terminal).
    pub fn progress(mut self, on: bool) -> Sweep {
        self.progress = Some(on);
        self
    }

    /// Rejects, without estimating them, the points for which `rule` gives a reason (e.g. a
    /// block size that does not divide the tensor). They are listed in the report as
    /// "shape" rejections with that reason.
    pub fn reject_if(
        mut self,
        rule: impl Fn(&Params) -> Option<String> + Send + Sync + 'static,
    ) -> Sweep {
        self.reject.push(Box::new(rule));
        self
    }

    /// The rejection of `p` by the first [`Sweep::reject_if`] rule that gives a reason, or
    /// that panics (an [`ErrorKind::ClosurePanic`] rejection naming the rule and its message).
    fn rejection(&self, p: &Params) -> Option<Rejection> {
        self.reject.iter().enumerate().find_map(|(i, rule)| {
            let role = format!("the sweep's reject_if rule #{}", i + 1);
            match crate::abort::user_closure(&role, || rule(p)) {
                Ok(reason) => reason.map(|reason| Rejection {
                    kind: Some(ErrorKind::InvalidArgument),
                    reason,
                }),
                Err(e) => Some(Rejection::of_error(&e)),
            }
        })
    }

    /// Estimates every point with `estimate` (usually a kernel's `::estimate` on shape-only
    /// tensors, as it comes: a returning kernel's `(outputs, profile)` too, see
    /// [`IntoProfile`]) and collects the report. Errors and panics of `estimate` reject their
    /// point; they never stop the sweep.
    pub fn run<F, R>(self, estimate: F) -> SweepReport
    where
        F: Fn(&Params) -> R + Sync,
        R: IntoProfile,
    {
        let points = self.grid.points();
        let n = points.len();
        let t0 = Instant::now();
        let next = AtomicUsize::new(0);
        let done = AtomicUsize::new(0);
        let outcomes: Mutex<Vec<Option<Result<Estimate, Rejection>>>> = Mutex::new(vec![None; n]);
        let bar = Progress::new(
            n,
            self.progress
                .unwrap_or_else(|| std::io::stderr().is_terminal()),
        );
        let threads = self.threads.min(n.max(1));
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(p) = points.get(i) else { break };
                    let outcome = match self.rejection(p) {
                        Some(rejection) => Err(rejection),
                        None => estimate_one(&estimate, p),
                    };
                    let lat = outcome.as_ref().ok().map(|e| e.latency_ns);
                    outcomes.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(outcome);
                    let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                    bar.tick(d, lat);
                });
            }
        });
        bar.finish();
        let outcomes = outcomes.into_inner().unwrap_or_else(|e| e.into_inner());
        SweepReport {
            names: self.grid.names.clone(),
            points: points
                .into_iter()
                .zip(outcomes)
                .map(|(params, o)| SweepPoint {
                    params,
                    outcome: o.unwrap_or_else(|| {
                        Err(Rejection {
                            kind: None,
                            reason: "not estimated".into(),
                        })
                    }),
                })
                .collect(),
            wall_s: t0.elapsed().as_secs_f64(),
            threads,
        }
    }
}

/// Runs `estimate` on `p`, turning an error or a panic into a rejection.
fn estimate_one<F, R>(estimate: &F, p: &Params) -> Result<Estimate, Rejection>
where
    F: Fn(&Params) -> R + Sync,
    R: IntoProfile,
{
    match crate::abort::user_closure("the sweep's estimate closure", || {
        estimate(p).into_profile()
    }) {
        Ok(Ok(profile)) => Ok(Estimate::of(&profile)),
        Ok(Err(e)) | Err(e) => Err(Rejection::of_error(&e)),
    }
}

/// A one-line progress bar on standard error (drawn only when enabled).
struct Progress {
    total: usize,
    on: bool,
    state: Mutex<(f64, Instant)>,
}

impl Progress {
    fn new(total: usize, on: bool) -> Progress {
        Progress {
            total,
            on,
            state: Mutex::new((f64::INFINITY, Instant::now())),
        }
    }

    fn tick(&self, done: usize, latency_ns: Option<f64>) {
        if !self.on {
            return;
        }
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = latency_ns {
            st.0 = st.0.min(l);
        }
        // Redraw at most every 50 ms (and at the end).
        if done < self.total && st.1.elapsed().as_millis() < 50 {
            return;
        }
        st.1 = Instant::now();
        const WIDTH: usize = 30;
        let filled = WIDTH * done / self.total.max(1);
        let best = if st.0.is_finite() {
            format!("best {}", human_ns(st.0))
        } else {
            String::new()
        };
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r[{}{}] {done}/{} {best}   ",
            "#".repeat(filled),
            "-".repeat(WIDTH - filled),
            self.total
        );
        let _ = err.flush();
    }

    fn finish(&self) {
        if self.on {
            let _ = writeln!(std::io::stderr());
        }
    }
}

/// The result of a [`Sweep`]: every point in grid order with its estimate or rejection.
/// `{}` prints the table, the rejections and the best point.
#[derive(Clone, Debug)]
pub struct SweepReport {
    names: Vec<String>,
    /// Every point, in grid order.
    pub points: Vec<SweepPoint>,
    /// Wall-clock seconds the sweep took on the host.
    pub wall_s: f64,
    /// Host threads that estimated points.
    pub threads: usize,
}

impl SweepReport {
    /// The parameter names.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The point with the lowest modelled latency (ties: fewer instructions, then the earlier
    /// point), if any point was estimated.
    pub fn best(&self) -> Option<&SweepPoint> {
        self.estimated().min_by(|a, b| {
            let (ea, eb) = (a.outcome.as_ref().ok(), b.outcome.as_ref().ok());
            let (ea, eb) = (ea.expect("estimated"), eb.expect("estimated"));
            ea.latency_ns
                .total_cmp(&eb.latency_ns)
                .then(ea.instructions.cmp(&eb.instructions))
        })
    }

    /// The points that were estimated, in grid order.
    pub fn estimated(&self) -> impl Iterator<Item = &SweepPoint> {
        self.points.iter().filter(|p| p.outcome.is_ok())
    }

    /// The rejected points with their reasons, in grid order.
    pub fn rejected(&self) -> impl Iterator<Item = (&Params, &Rejection)> {
        self.points
            .iter()
            .filter_map(|p| p.outcome.as_ref().err().map(|r| (&p.params, r)))
    }

    /// The report as a table: one row per point (parameters, modelled latency, its ratio to
    /// the best, bottleneck, instructions, MFU, or the rejection category; the reasons are in
    /// [`SweepReport::rejected`] and the `Display` output).
    pub fn table(&self) -> String {
        let best = self.best().and_then(|b| b.latency_ns());
        let mut rows: Vec<Vec<String>> = Vec::with_capacity(self.points.len() + 1);
        let mut head: Vec<String> = self.names.clone();
        head.extend(
            [
                "latency", "vs best", "bound by", "instrs", "MFU", "rejected",
            ]
            .map(String::from),
        );
        rows.push(head);
        for p in &self.points {
            let mut r: Vec<String> = p.params.values.iter().map(|v| v.to_string()).collect();
            match &p.outcome {
                Ok(e) => r.extend([
                    human_ns(e.latency_ns),
                    best.map_or(String::new(), |b| format!("{:.2}x", e.latency_ns / b)),
                    e.bottleneck.clone(),
                    e.instructions.to_string(),
                    format!("{:.1}%", e.mfu_percent),
                    String::new(),
                ]),
                Err(j) => r.extend([
                    "-".into(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    j.category().to_string(),
                ]),
            }
            rows.push(r);
        }
        let cols = rows[0].len();
        let width: Vec<usize> = (0..cols)
            .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
            .collect();
        let mut out = String::new();
        for r in &rows {
            let mut line = String::new();
            for (c, cell) in r.iter().enumerate() {
                if c + 1 == cols {
                    line.push_str(cell);
                } else {
                    line.push_str(&format!("{cell:>w$}  ", w = width[c]));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    /// The report as CSV: the parameter columns, then `status` (`ok`, `capacity`, `shape`
    /// or `error`), `latency_ns`, `bottleneck`, `instructions`, `mfu_percent`, `dma_bytes`,
    /// `sbuf_bytes_per_partition`, `reason`.
    pub fn to_csv(&self) -> String {
        let mut out = self.names.join(",");
        if !out.is_empty() {
            out.push(',');
        }
        out.push_str("status,latency_ns,bottleneck,instructions,mfu_percent,dma_bytes,sbuf_bytes_per_partition,reason\n");
        for p in &self.points {
            for v in &p.params.values {
                out.push_str(&format!("{v},"));
            }
            match &p.outcome {
                Ok(e) => out.push_str(&format!(
                    "ok,{},{},{},{},{},{},\n",
                    e.latency_ns,
                    csv_field(&e.bottleneck),
                    e.instructions,
                    e.mfu_percent,
                    e.dma_bytes,
                    e.sbuf_bytes_per_partition
                )),
                Err(j) => out.push_str(&format!(
                    "{},,,,,,,{}\n",
                    j.category(),
                    csv_field(&j.reason)
                )),
            }
        }
        out
    }

    /// The report as pretty-printed JSON: `{"parameters": [...], "wall_s", "threads",
    /// "best": {...} | null, "points": [{"params": {name: value}, "status", "estimate" |
    /// "reason"}]}`.
    pub fn to_json(&self) -> String {
        let point = |p: &SweepPoint| {
            let params: serde_json::Map<String, serde_json::Value> = self
                .names
                .iter()
                .zip(&p.params.values)
                .map(|(n, v)| (n.clone(), serde_json::json!(v)))
                .collect();
            match &p.outcome {
                Ok(e) => serde_json::json!({"params": params, "status": "ok", "estimate": e}),
                Err(j) => serde_json::json!({
                    "params": params,
                    "status": j.category(),
                    "kind": j.kind.map(|k| format!("{k:?}")),
                    "reason": j.reason,
                }),
            }
        };
        let v = serde_json::json!({
            "parameters": self.names,
            "wall_s": self.wall_s,
            "threads": self.threads,
            "best": self.best().map(point),
            "points": self.points.iter().map(point).collect::<Vec<_>>(),
        });
        serde_json::to_string_pretty(&v).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// Writes [`SweepReport::to_csv`] to `path`.
    pub fn write_csv(&self, path: impl AsRef<std::path::Path>) -> Result<(), NkiError> {
        Ok(crate::files::write(
            path.as_ref(),
            "the sweep CSV",
            self.to_csv(),
        )?)
    }

    /// Writes [`SweepReport::to_json`] to `path`.
    pub fn write_json(&self, path: impl AsRef<std::path::Path>) -> Result<(), NkiError> {
        Ok(crate::files::write(
            path.as_ref(),
            "the sweep JSON",
            self.to_json(),
        )?)
    }
}

/// Quotes a CSV field when it holds a comma, a quote or a line break.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

impl fmt::Display for SweepReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let est = self.estimated().count();
        writeln!(
            f,
            "sweep of {} points: {} estimated, {} rejected ({:.2} s on {} host thread{})",
            self.points.len(),
            est,
            self.points.len() - est,
            self.wall_s,
            self.threads,
            if self.threads == 1 { "" } else { "s" }
        )?;
        f.write_str(&self.table())?;
        let mut rejected = self.rejected().peekable();
        if rejected.peek().is_some() {
            writeln!(f, "rejected:")?;
            for (p, r) in rejected {
                writeln!(f, "  {p}: {}: {}", r.category(), r.reason)?;
            }
        }
        if let Some(b) = self.best() {
            if let Ok(e) = &b.outcome {
                writeln!(
                    f,
                    "best: {} at {} modelled ({})",
                    b.params,
                    human_ns(e.latency_ns),
                    e.bottleneck
                )?;
            }
        } else {
            writeln!(f, "best: none (every point was rejected)")?;
        }
        Ok(())
    }
}

#[cfg(feature = "criterion")]
mod measurement;
#[cfg(feature = "criterion")]
pub use measurement::{bench_grid, ModelledTime, ModelledTimeFormatter};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_points_are_the_product_first_axis_slowest() {
        let g = ParamGrid::new().axis("a", [1, 2]).axis("b", [10, 20, 30]);
        assert_eq!(g.len(), 6);
        let pts = g.points();
        let v: Vec<(usize, usize)> = pts.iter().map(|p| (p["a"], p["b"])).collect();
        assert_eq!(v, [(1, 10), (1, 20), (1, 30), (2, 10), (2, 20), (2, 30)]);
        assert_eq!(pts[4].to_string(), "a=2 b=20");
        assert_eq!(pts[0].get("c"), None);
        assert!(ParamGrid::new().axis("a", []).points().is_empty());
        assert_eq!(ParamGrid::new().points().len(), 1);
    }

    /// `out = in + 1` through a PSUM tile `chunk` fp32 wide: over 512 it breaks the bank limit.
    #[crate::nki_kernel]
    fn bump(a: &crate::hbm::Hbm<f32>, out: &mut crate::hbm::Hbm<f32>, chunk: usize) {
        use crate::lang as nl;
        for j in nl::affine_range(a.shape()[1] / chunk) {
            let cols = j * chunk..(j + 1) * chunk;
            let x = nl::load(a.slice((0..128, cols.clone())));
            let p = nl::zeros(&[128, chunk], crate::dtype::DType::F32, nl::PSUM);
            nl::assign(&p, &(&x + 1.0));
            nl::store(out.slice((0..128, cols)), &nl::copy(&p, None));
        }
    }

    fn sweep_bump(threads: usize) -> SweepReport {
        let a = crate::hbm::Hbm::<f32>::shape_only([128, 2048]);
        let grid = ParamGrid::new().axis("chunk", [128, 256, 512, 1024, 3]);
        Sweep::new(grid)
            .threads(threads)
            .progress(false)
            .reject_if(|p| (p["chunk"] == 3).then(|| "3 does not divide 2048".to_string()))
            .run(|p| {
                if p["chunk"] == 256 && threads == 99 {
                    panic!("a bug in the sweep closure");
                }
                let mut out = crate::hbm::Hbm::<f32>::shape_only([128, 2048]);
                bump::estimate(1, crate::target::Target::Trn2, &a, &mut out, p["chunk"])
            })
    }

    #[test]
    fn a_sweep_lists_rejections_with_reasons_and_picks_the_fastest_point() {
        let r = sweep_bump(2);
        assert_eq!(r.points.len(), 5);
        assert_eq!(r.estimated().count(), 3);
        let rejected: Vec<(usize, &str, String)> = r
            .rejected()
            .map(|(p, j)| (p["chunk"], j.category(), j.reason.clone()))
            .collect();
        assert_eq!(rejected.len(), 2);
        assert_eq!((rejected[0].0, rejected[0].1), (1024, "shape"));
        assert!(rejected[0].2.contains("PSUM"), "{}", rejected[0].2);
        assert_eq!(
            (rejected[1].0, rejected[1].1, rejected[1].2.as_str()),
            (3, "shape", "3 does not divide 2048")
        );
        // The best point is the estimated one with the lowest latency.
        let best = r.best().unwrap();
        let min = r
            .estimated()
            .map(|p| p.latency_ns().unwrap())
            .fold(f64::INFINITY, f64::min);
        assert_eq!(best.latency_ns(), Some(min));
        // The same report on one thread (the model is deterministic).
        let one = sweep_bump(1);
        assert_eq!(one.points, r.points);
        // CSV: a header and a row per point; JSON parses and names the best point.
        let csv = r.to_csv();
        assert_eq!(csv.lines().count(), 6);
        assert!(csv.lines().nth(4).unwrap().starts_with("1024,shape,"));
        let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(json["best"]["params"]["chunk"], best.params["chunk"]);
        assert_eq!(json["points"][3]["status"], "shape");
        let text = r.to_string();
        assert!(text.contains("best: chunk="), "{text}");
        assert!(text.contains("chunk=1024: shape:"), "{text}");
    }

    #[test]
    fn a_panic_in_the_sweep_closure_rejects_its_point_only() {
        let r = sweep_bump(99);
        let (p, j) = r.rejected().next().unwrap();
        assert_eq!(p["chunk"], 256);
        assert_eq!(j.category(), "error");
        assert!(
            j.reason.contains("a bug in the sweep closure"),
            "{}",
            j.reason
        );
        assert_eq!(r.estimated().count(), 2);
    }

    #[test]
    fn csv_fields_with_commas_are_quoted() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"x\""), "\"say \"\"x\"\"\"");
        assert_eq!(csv_field("plain"), "plain");
    }
}
