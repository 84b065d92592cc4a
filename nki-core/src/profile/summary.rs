//! The summary of a modelled timeline, in the terms `neuron-profile` uses
//! (docs/reference/hardware.md §4): latency (total and active, with the pre/postamble),
//! what bounds the kernel, per-engine active time, HFU/MFU, DMA traffic, SBUF/PSUM peak,
//! instruction counts and the source lines that cost the most time. A profile also keeps the
//! timeline itself ([`Profile::spans`]), which [`super::trace`] writes out.

use super::units::{human_bytes, human_ns};
use crate::dtype::DType;
use crate::error::SourceLoc;
use crate::memory::MemoryPeak;
use crate::record::{Engine, Opcode};
use crate::target::Target;
use std::fmt;

/// Activity of one engine (summed over NeuronCores in [`Profile::engines`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct EngineStat {
    /// Profiler-style engine name ("TensorE", "VectorE", ..., "DMA").
    pub engine: String,
    /// Instructions executed.
    pub instructions: usize,
    /// Time with at least one instruction of the engine in flight, in ns (summed over cores).
    pub active_ns: f64,
    /// `active_ns` over the latency (times the number of cores), in percent.
    pub active_percent: f64,
}

/// DMA traffic of a launch.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct DmaStats {
    /// DMA instructions.
    pub count: usize,
    /// Bytes moved by all DMAs.
    pub bytes: u64,
    /// Average bytes per DMA instruction.
    pub average_bytes: f64,
    /// Bytes read from HBM.
    pub hbm_read_bytes: u64,
    /// Bytes written to HBM.
    pub hbm_write_bytes: u64,
    /// Achieved HBM bandwidth: (read + write bytes) / latency, in GB/s.
    pub hbm_gbps: f64,
}

/// Summary of one logical NeuronCore.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CoreProfile {
    /// NeuronCore index.
    pub nc: usize,
    /// Program instances run on it.
    pub instances: usize,
    /// Time its last instruction ends, in ns.
    pub latency_ns: f64,
    /// Per-engine activity on this core.
    pub engines: Vec<EngineStat>,
    /// Hardware FLOPs of its TensorE instructions.
    pub hardware_flops: u64,
    /// Hardware FLOPs utilisation of its TensorE over the launch latency, in percent.
    pub hfu_percent: f64,
    /// DMA bytes it moved.
    pub dma_bytes: u64,
    /// Time of this core's critical path (its last instruction back to the start) spent in
    /// other cores' instructions reached through an engine they share with it: a DMA engine or
    /// queue still busy with another core's transfer, in ns (0 for a one-core launch).
    pub waits_on_shared_engines_ns: f64,
    /// Time of this core's critical path spent waiting for other cores' results (collectives,
    /// semaphores, data they write), in ns.
    pub waits_on_other_cores_ns: f64,
    /// This core's own critical path (from its last instruction back) split as
    /// [`Profile::bounds`] is, in percent of this core's latency (empty for a one-core
    /// launch).
    pub bounds: Vec<BoundShare>,
}

/// Time spent by one kernel source line on one engine: its share of the critical path (what
/// the line costs the kernel's latency; the shares of all lines sum to at most 100 %), its
/// engines' busy time and, for DMAs, the bytes it moves and the DMA-engine time they take.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LineStat {
    /// `file:line:column` of the NKI call.
    pub location: String,
    /// The NKI call (`nl.load`, ...).
    pub api: &'static str,
    /// Engine it runs on.
    pub engine: &'static str,
    /// Instructions it issued.
    pub instructions: usize,
    /// Time the critical path spends in the line's instructions, in ns (the path's stretches
    /// are disjoint, so the lines' times sum to at most the latency).
    pub time_ns: f64,
    /// `time_ns` over the latency, in percent.
    pub percent: f64,
    /// Summed instruction durations, in ns (overlapping instructions, e.g. queued DMAs, add
    /// up: this can exceed the latency). DMAs: trigger-ready to completion.
    pub busy_ns: f64,
    /// Bytes moved by the line's DMAs (0 for compute lines).
    pub bytes: u64,
    /// DMA lines: summed DMA-engine time, each DMA's longest engine share (its bytes at the
    /// engine bandwidth, at least the per-DMA engine minimum), in ns; 0 for compute lines.
    pub dma_engine_ns: f64,
}

/// What a traced instruction was (one per record; spans point here).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct OpInfo {
    /// Engine.
    pub engine: Engine,
    /// Opcode.
    pub opcode: Opcode,
    /// NKI call.
    pub api: &'static str,
    /// Partitions processed.
    pub partitions: u32,
    /// Free elements per partition.
    pub free: u32,
    /// Input dtype.
    pub in_dtype: DType,
    /// Output dtype.
    pub out_dtype: DType,
    /// Bytes moved (DMA) or 0.
    pub bytes: u64,
    /// TensorE `[K, M, N]` (matmul / transpose).
    pub kmn: Option<[u32; 3]>,
    /// Kernel source line.
    pub loc: SourceLoc,
    /// NeuronCore.
    pub nc: u16,
    /// Index into [`Profile::program_ids`].
    pub instance: u32,
    /// The instruction's name (NKI `name=`, [`crate::nisa::named`]), if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<crate::names::InstrName>,
}

/// What a stretch of the critical path was spent on (see [`Profile::bounds`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Bound {
    /// An engine computing (TensorE, VectorE, ScalarE, GpSimdE, SyncE).
    Engine(Engine),
    /// DMA engines moving bytes at their bandwidth (or the HBM stack's).
    DmaBandwidth,
    /// DMA fixed costs: trigger latency, the per-DMA engine minimum, the small-transfer floor:
    /// the time of DMAs whose bytes take less than their fixed costs (small DMAs; the lever
    /// is fewer, larger ones). Printed "DMA fixed cost".
    DmaLatency,
    /// An engine idle, waiting for a result it depends on (semaphore wait and pipeline drain).
    DependencyStall,
    /// The kernel's fixed pre- and postamble.
    LaunchOverhead,
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bound::Engine(e) => f.write_str(e.name()),
            Bound::DmaBandwidth => f.write_str("DMA bandwidth"),
            Bound::DmaLatency => f.write_str("DMA fixed cost"),
            Bound::DependencyStall => f.write_str("dependency stalls"),
            Bound::LaunchOverhead => f.write_str("pre/postamble"),
        }
    }
}

/// The share of the latency one [`Bound`] takes on the critical path.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct BoundShare {
    /// What the time went to.
    pub bound: Bound,
    /// Time on the critical path, in ns.
    pub ns: f64,
    /// `ns` over the latency, in percent.
    pub percent: f64,
}

impl fmt::Display for BoundShare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:.0}%", self.bound, self.percent)
    }
}

/// A timeline track of one NeuronCore.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum Track {
    /// TensorE LoadStationary (profiler row "TensorE").
    LoadStationary,
    /// TensorE MultiplyMoving (profiler row "TensorMatrixE").
    MultiplyMoving,
    /// VectorE.
    Vector,
    /// ScalarE.
    Scalar,
    /// GpSimdE.
    GpSimd,
    /// Sync engine.
    Sync,
    /// DMA instructions in flight (lanes assigned so that spans on one lane never overlap).
    DmaQueue(u16),
    /// One DMA engine's share of transfers.
    DmaEngine(u8),
    /// Time an engine sat idle waiting for a result its next instruction depends on.
    Stall(Engine),
    /// The kernel's fixed pre- and postamble.
    Launch,
}

impl Track {
    /// Display name of the track.
    pub fn name(self) -> String {
        match self {
            Track::LoadStationary => "TensorE (LoadStationary)".into(),
            Track::MultiplyMoving => "TensorMatrixE (MultiplyMoving)".into(),
            Track::Vector => Engine::Vector.name().into(),
            Track::Scalar => Engine::Scalar.name().into(),
            Track::GpSimd => Engine::GpSimd.name().into(),
            Track::Sync => Engine::Sync.name().into(),
            Track::DmaQueue(q) => format!("DMA queue {q}"),
            Track::DmaEngine(e) => format!("DMA engine {e}"),
            Track::Stall(e) => format!("{} stalls", e.name()),
            Track::Launch => "pre/postamble".into(),
        }
    }
}

/// One interval of the timeline.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Span {
    /// Index into [`Profile::ops`].
    pub op: u32,
    /// NeuronCore.
    pub nc: u16,
    /// Track on that core.
    pub track: Track,
    /// Start in ns.
    pub start_ns: f64,
    /// Duration in ns.
    pub dur_ns: f64,
    /// Stall spans: the instruction (index into [`Profile::ops`]) that `op` waited for.
    pub cause: Option<u32>,
}

/// Builds a timeline's spans (what a [`Spans`] holds until its first use).
type SpanBuilder = dyn Fn() -> Vec<Span> + Send + Sync;

/// The timeline of a profile: a list of [`Span`]s, built on first use from the modelled
/// schedule (the trace writer and the tests read it; estimating and summarising do not), so
/// a sweep of many estimates does not build millions of intervals nobody looks at. Reads as
/// a `Vec<Span>` (`p.spans.iter()`, `p.spans.len()`, `for s in &p.spans`).
#[derive(Clone, Default)]
pub struct Spans {
    built: std::sync::OnceLock<Vec<Span>>,
    builder: Option<std::sync::Arc<SpanBuilder>>,
}

impl Spans {
    /// Spans that `build` makes when they are first read.
    pub(crate) fn deferred(build: impl Fn() -> Vec<Span> + Send + Sync + 'static) -> Spans {
        Spans {
            built: std::sync::OnceLock::new(),
            builder: Some(std::sync::Arc::new(build)),
        }
    }

    /// The spans, built now if they were not yet.
    pub fn get(&self) -> &Vec<Span> {
        self.built
            .get_or_init(|| self.builder.as_ref().map(|b| b()).unwrap_or_default())
    }
}

impl From<Vec<Span>> for Spans {
    fn from(v: Vec<Span>) -> Spans {
        Spans {
            built: std::sync::OnceLock::from(v),
            builder: None,
        }
    }
}

impl std::ops::Deref for Spans {
    type Target = Vec<Span>;
    fn deref(&self) -> &Vec<Span> {
        self.get()
    }
}

impl<'a> IntoIterator for &'a Spans {
    type Item = &'a Span;
    type IntoIter = std::slice::Iter<'a, Span>;
    fn into_iter(self) -> Self::IntoIter {
        self.get().iter()
    }
}

impl fmt::Debug for Spans {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.get().fmt(f)
    }
}

/// The summary of a modelled launch. `{:?}` prints the summary fields and only the sizes of
/// the timeline (`ops`, `spans`); `{}` prints a readable report.
#[derive(Clone, serde::Serialize)]
pub struct Profile {
    /// Target modelled.
    pub target: Target,
    /// Modelled latency in ns: the kernel's whole time on the device, its instructions
    /// ([`Profile::active_ns`]) plus the fixed pre/postamble (neuron-profile `total_time`).
    pub latency_ns: f64,
    /// Time from the launch's first instruction to the end of its last one, in ns
    /// (neuron-profile `total_active_time`).
    pub active_ns: f64,
    /// The fixed pre- and postamble of the launch, in ns (`latency_ns - active_ns`).
    pub launch_overhead_ns: f64,
    /// What bounds the kernel: the critical path through the timeline split into engines,
    /// DMA bandwidth, DMA fixed cost, dependency stalls and the pre/postamble, with the
    /// share of the latency each takes, largest first.
    pub bounds: Vec<BoundShare>,
    /// Instructions recorded.
    pub instructions: usize,
    /// Instructions per engine (TensorE, VectorE, ScalarE, GpSimdE, SyncE, DMA).
    pub instruction_counts: Vec<(String, usize)>,
    /// Activity per engine, summed over cores.
    pub engines: Vec<EngineStat>,
    /// Per-NeuronCore summaries.
    pub cores: Vec<CoreProfile>,
    /// Hardware FLOPs: `sum 2 * K * M * N` over TensorE instructions (transposes included).
    pub hardware_flops: u64,
    /// FLOPs of TensorE transposes.
    pub transpose_flops: u64,
    /// Hardware FLOPs utilisation in percent:
    /// `hardware_flops / (2 * 128 * 128 * tensor clock * latency * cores)` \[S15\].
    pub hfu_percent: f64,
    /// Model FLOPs utilisation in percent: as HFU with `hardware_flops - transpose_flops`
    /// (`mfu_inst_estimated_percent` of the profiler) \[S15\].
    pub mfu_percent: f64,
    /// DMA traffic.
    pub dma: DmaStats,
    /// Peak on-chip usage (SBUF bytes per partition, PSUM bytes and banks).
    pub memory: MemoryPeak,
    /// Source lines that take the most critical-path time (then engine time), most first (at
    /// most 10).
    pub top_lines: Vec<LineStat>,
    /// The kernel's device loops (`nl::fori_loop`, `nl::while_loop`): iterations, time per
    /// iteration and the loop's own overhead (empty for a kernel without device loops, and
    /// then left out of the JSON).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub device_loops: Vec<LoopStat>,
    /// What the compiler's capacity resolution added when the kernel's SBUF tiles did not all
    /// fit: kernel-input reloads, spill saves and reloads, per line (empty, and left out of
    /// the JSON, when every tile fit).
    #[serde(skip_serializing_if = "crate::profile::spills::SpillStats::is_empty")]
    pub spills: crate::profile::spills::SpillStats,
    /// What the `compiler` stage did to the program before it was costed (duplicates
    /// removed, loads hoisted, tiles multi-buffered), per line (empty, and left out of the
    /// JSON, when the stage was off or changed nothing; see [`crate::Launch::compiler`]).
    #[serde(skip_serializing_if = "crate::profile::compiler::CompilerStats::is_empty")]
    pub compiler: crate::profile::compiler::CompilerStats,
    /// The record-only facts behind [`Profile::bounds()`] (TensorE time issued, adjusted
    /// FLOPs, HBM use, per-line findings).
    #[serde(skip)]
    pub(crate) bound_facts: crate::profile::findings::BoundFacts,
    /// The launch's instruction records, when kept for [`Profile::ir`].
    #[serde(skip)]
    pub(crate) kept_records: crate::profile::kept::KeptRecords,
    /// Program id of each instance, per core: `program_ids[nc][i]`.
    #[serde(skip)]
    pub program_ids: Vec<Vec<Vec<usize>>>,
    /// Every instruction, in global record order (core 0's stream first).
    #[serde(skip)]
    pub ops: Vec<OpInfo>,
    /// The timeline: every interval of every track (built on first use: a profile that is
    /// only summarised never pays for it).
    #[serde(skip)]
    pub spans: Spans,
}

impl Profile {
    /// The summary as pretty-printed JSON, with the performance bounds
    /// ([`Profile::bounds()`]) under `performance_bounds` (the timeline itself is left out;
    /// see [`Profile::write_chrome_trace`]).
    pub fn to_json(&self) -> String {
        let json = serde_json::to_value(self).and_then(|mut v| {
            if let serde_json::Value::Object(m) = &mut v {
                m.insert(
                    "performance_bounds".into(),
                    serde_json::to_value(self.bounds())?,
                );
            }
            serde_json::to_string_pretty(&v)
        });
        json.unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// Latency in µs.
    pub fn latency_us(&self) -> f64 {
        self.latency_ns / 1e3
    }

    /// Latency in ms.
    pub fn latency_ms(&self) -> f64 {
        self.latency_ns / 1e6
    }

    /// The largest share of [`Profile::bounds`]: what bounds the kernel.
    pub fn bottleneck(&self) -> Option<&BoundShare> {
        self.bounds.first()
    }

    /// Activity of engine `name` ("TensorE", "VectorE", "ScalarE", "GpSimdE", "SyncE", "DMA").
    pub fn engine(&self, name: &str) -> Option<&EngineStat> {
        self.engines.iter().find(|e| e.engine == name)
    }

    /// True when the kernel ran anything on TensorE (matmuls, transposes): HFU and MFU, which
    /// measure TensorE, mean something only then.
    pub fn uses_tensor_engine(&self) -> bool {
        self.hardware_flops > 0
            || self.transpose_flops > 0
            || self
                .engine(Engine::Tensor.name())
                .is_some_and(|e| e.instructions > 0)
    }
}

impl fmt::Debug for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Profile")
            .field("target", &self.target)
            .field("latency_ns", &self.latency_ns)
            .field("active_ns", &self.active_ns)
            .field("launch_overhead_ns", &self.launch_overhead_ns)
            .field("bounds", &self.bounds)
            .field("instructions", &self.instructions)
            .field("instruction_counts", &self.instruction_counts)
            .field("engines", &self.engines)
            .field("cores", &self.cores)
            .field("hardware_flops", &self.hardware_flops)
            .field("transpose_flops", &self.transpose_flops)
            .field("hfu_percent", &self.hfu_percent)
            .field("mfu_percent", &self.mfu_percent)
            .field("dma", &self.dma)
            .field("memory", &self.memory)
            .field("top_lines", &self.top_lines)
            .field("ops", &format_args!("[{} ops]", self.ops.len()))
            .field("spans", &format_args!("[{} spans]", self.spans.len()))
            .finish()
    }
}

/// Writes the first 10 of `lines`, one a line, and how many more there are.
fn write_first_lines<L: fmt::Display>(f: &mut fmt::Formatter<'_>, lines: &[L]) -> fmt::Result {
    for l in lines.iter().take(10) {
        writeln!(f, "    {l}")?;
    }
    if lines.len() > 10 {
        writeln!(f, "    ... and {} more", lines.len() - 10)?;
    }
    Ok(())
}

impl Profile {
    /// What the launch's cores are, for the per-core lines: the two physical cores of one
    /// logical NeuronCore (LNC=2) where two cores share an HBM stack, as NKI 0.7's `kernel[2]`
    /// (or a Beta-1 `nc(2)` grid) runs on them; otherwise the NeuronCores.
    fn cores_heading(&self) -> String {
        let n = self.cores.len();
        if n == 2 && self.target.spec().ncs_per_hbm_stack == 2 {
            "the 2 physical cores of one logical NeuronCore (LNC=2)".to_string()
        } else {
            format!("the {n} NeuronCores")
        }
    }
}

/// A program id as NKI prints it: `0`, or `(1, 3)` for a grid of several dimensions.
fn program_id(id: &[usize]) -> String {
    match id {
        [one] => one.to_string(),
        _ => {
            let parts: Vec<String> = id.iter().map(usize::to_string).collect();
            format!("({})", parts.join(", "))
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "modelled on {} ({} NeuronCore{}): latency {} (active {} + pre/postamble {})",
            self.target,
            self.cores.len(),
            if self.cores.len() == 1 { "" } else { "s" },
            human_ns(self.latency_ns),
            human_ns(self.active_ns),
            human_ns(self.launch_overhead_ns)
        )?;
        if !self.bounds.is_empty() {
            let parts: Vec<String> = self.bounds.iter().map(|b| b.to_string()).collect();
            writeln!(f, "  bound by: {}", parts.join(", "))?;
        }
        // TensorE's utilisation, and the engines, only as far as the kernel used them.
        if self.uses_tensor_engine() {
            writeln!(
                f,
                "  HFU {:.2}%  MFU {:.2}%  ({:.3} GFLOP on TensorE, {:.3} GFLOP transposes)",
                self.hfu_percent,
                self.mfu_percent,
                self.hardware_flops as f64 / 1e9,
                self.transpose_flops as f64 / 1e9
            )?;
        }
        writeln!(f, "  engine            instrs      active   active%")?;
        for e in self.engines.iter().filter(|e| e.instructions > 0) {
            writeln!(
                f,
                "  {:<14} {:>9} {:>11} {:>8.1}%",
                e.engine,
                e.instructions,
                human_ns(e.active_ns),
                e.active_percent
            )?;
        }
        writeln!(
            f,
            "  DMA: {} transfers, {} ({} avg), HBM read {} write {}, achieved {:.1} GB/s",
            self.dma.count,
            human_bytes(self.dma.bytes as f64),
            human_bytes(self.dma.average_bytes),
            human_bytes(self.dma.hbm_read_bytes as f64),
            human_bytes(self.dma.hbm_write_bytes as f64),
            self.dma.hbm_gbps
        )?;
        let spec = self.target.spec();
        writeln!(
            f,
            "  SBUF peak {} of {} B/partition, PSUM peak {} B/partition ({} of {} banks)",
            self.memory.sbuf_bytes_per_partition,
            spec.sbuf_bytes_per_partition,
            self.memory.psum_bytes_per_partition,
            self.memory.psum_banks,
            spec.psum_banks
        )?;
        write!(f, "{}", self.bounds())?;
        if self.cores.len() > 1 {
            let tensor = self.uses_tensor_engine();
            writeln!(f, "  {}:", self.cores_heading())?;
            for (i, c) in self.cores.iter().enumerate() {
                let ran = match self.program_ids.get(i).map(Vec::as_slice) {
                    Some([id]) => format!("program_id {}", program_id(id)),
                    _ if c.instances == 1 => "1 program instance".to_string(),
                    _ => format!("{} program instances, one after another", c.instances),
                };
                write!(
                    f,
                    "    nc{}: {ran}, latency {}, ",
                    c.nc,
                    human_ns(c.latency_ns)
                )?;
                if tensor {
                    write!(f, "HFU {:.2}%, ", c.hfu_percent)?;
                }
                write!(f, "DMA {}", human_bytes(c.dma_bytes as f64))?;
                if c.waits_on_shared_engines_ns > 0.0 {
                    let w = human_ns(c.waits_on_shared_engines_ns);
                    write!(f, ", {w} waiting for shared DMA engines")?;
                }
                if c.waits_on_other_cores_ns > 0.0 {
                    let w = human_ns(c.waits_on_other_cores_ns);
                    write!(f, ", {w} waiting for other cores' results")?;
                }
                writeln!(f)?;
            }
        }
        let advice = self.advice();
        if !advice.is_empty() {
            writeln!(f, "  next steps:")?;
            for a in &advice {
                writeln!(f, "    - {a}")?;
            }
        }
        for l in &self.device_loops {
            writeln!(f, "  device loop {l}")?;
        }
        if !self.spills.is_empty() {
            let s = &self.spills;
            writeln!(
                f,
                "  SBUF over-committed, resolved as the compiler does: {} resident at most; input reloads {}, spill save {}, spill reload {}",
                s.resident_peak_bytes,
                human_bytes(s.input_reload_bytes as f64),
                human_bytes(s.save_bytes as f64),
                human_bytes(s.reload_bytes as f64)
            )?;
            write_first_lines(f, &s.lines)?;
        }
        if !self.compiler.is_empty() {
            let c = &self.compiler;
            let hbm = human_bytes(c.removed_hbm_bytes as f64);
            let (removed, renamed) = (c.removed, c.renamed_tiles);
            writeln!(f, "  compiler stage: {removed} instructions removed ({hbm} of HBM reads), {renamed} tiles multi-buffered")?;
            write_first_lines(f, &c.lines)?;
        }
        if !self.top_lines.is_empty() {
            writeln!(
                f,
                "  top source lines: critical path   busy   instrs api              engine   DMA bytes (engine time)"
            )?;
            for l in &self.top_lines {
                let dma = if l.bytes > 0 {
                    format!(
                        "{} ({})",
                        human_bytes(l.bytes as f64),
                        human_ns(l.dma_engine_ns)
                    )
                } else {
                    String::new()
                };
                writeln!(
                    f,
                    "    {:>11} {:>5.1}% {:>11} {:>7}x {:<16} {:<8} {:<22} {}",
                    human_ns(l.time_ns),
                    l.percent,
                    human_ns(l.busy_ns),
                    l.instructions,
                    l.api,
                    l.engine,
                    dma,
                    l.location
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    fn span(op: u32) -> Span {
        Span {
            op,
            nc: 0,
            track: Track::Vector,
            start_ns: op as f64,
            dur_ns: 1.0,
            cause: None,
        }
    }

    #[test]
    fn deferred_spans_are_built_once_on_first_read() {
        let builds = Arc::new(AtomicUsize::new(0));
        let b = builds.clone();
        let spans = Spans::deferred(move || {
            b.fetch_add(1, Ordering::Relaxed);
            vec![span(0), span(1)]
        });
        let copy = spans.clone();
        assert_eq!(builds.load(Ordering::Relaxed), 0, "nothing read yet");
        assert_eq!(spans.len(), 2);
        assert_eq!(
            (&spans).into_iter().map(|s| s.op).collect::<Vec<_>>(),
            [0, 1]
        );
        assert_eq!(builds.load(Ordering::Relaxed), 1, "built once");
        assert_eq!(copy[1], span(1));
        assert_eq!(Spans::from(vec![span(7)]).first(), Some(&span(7)));
        assert!(Spans::default().is_empty());
    }
}

/// A device loop of the kernel, summed over every time it ran on one NeuronCore.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LoopStat {
    /// `nl.fori_loop` or `nl.while_loop`.
    pub api: &'static str,
    /// The loop's line in the kernel source.
    pub loc: SourceLoc,
    /// The NeuronCore it ran on.
    pub nc: usize,
    /// How many times the loop was entered (a loop inside another device loop or run by
    /// several instances is entered many times).
    pub runs: usize,
    /// Iterations, summed over its runs.
    pub iterations: u64,
    /// Modelled time of its runs (each from its first iteration's first start to its last
    /// iteration's last end), summed, in ns.
    pub time_ns: f64,
    /// `time_ns / iterations`.
    pub ns_per_iteration: f64,
    /// The loop's own cost per iteration: the longest of each iteration's compare-and-branch
    /// records (one per engine the iteration used; one `MIN_II` of that engine's clock each,
    /// an assumption: see `timing::cost`), averaged over the iterations, in ns.
    pub overhead_ns_per_iteration: f64,
}

impl fmt::Display for LoopStat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at line {} (nc{}): {} run{}, {} iterations, {:.1} ns/iteration \
             (loop overhead {:.1} ns/iteration)",
            self.api,
            self.loc.line,
            self.nc,
            self.runs,
            if self.runs == 1 { "" } else { "s" },
            self.iterations,
            self.ns_per_iteration,
            self.overhead_ns_per_iteration
        )
    }
}
