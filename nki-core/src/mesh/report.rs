//! The report of a mesh launch: per-device modelled timelines, the collectives with their
//! algorithm and bus bandwidth as nccom-test reports them (busbw = algbw x factor [E S20]),
//! and one Perfetto / Chrome trace with a process per device.

use super::collectives::kind::CollectiveEntry;
use super::timeline::Transfer;
use super::topology::Mesh;
use crate::context::Mode;
use crate::error::SourceLoc;
use crate::profile::{Profile, Track};
use crate::target::Target;
use serde_json::json;
use std::fmt;
use std::io::{self, Write};
use std::path::Path;

/// The mesh tracks of a device's trace, after the engine tracks: trace thread id and track
/// name, from one table.
#[derive(Clone, Copy)]
enum MeshTrack {
    /// The kernel segments between communication ops.
    Kernel,
    /// The copies a device sends.
    Send,
    /// Semaphore waits.
    Wait,
    /// DMA reductions of collectives.
    Reduce,
    /// Whole collectives.
    Collective,
    /// The collectives' fixed costs.
    Setup,
    /// The launch's pre/postamble.
    Launch,
}

impl MeshTrack {
    /// Trace thread id (1000 and up: clear of the engine tracks) and track name.
    fn tid_and_name(self) -> (u32, &'static str) {
        match self {
            MeshTrack::Kernel => (1000, "kernel segments"),
            MeshTrack::Send => (1001, "copies sent"),
            MeshTrack::Wait => (1002, "semaphore waits"),
            MeshTrack::Reduce => (1003, "DMA reductions"),
            MeshTrack::Collective => (1004, "collectives"),
            MeshTrack::Setup => (1005, "collective setup"),
            MeshTrack::Launch => (1006, "pre/postamble"),
        }
    }
}

/// One span of a device's timeline.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct MeshSpan {
    /// Trace thread id (engines as in single-core traces; 1000 and up for mesh tracks).
    pub tid: u32,
    /// Track name.
    pub track: String,
    /// Span name.
    pub name: String,
    /// Start, in modelled ns.
    pub start_ns: f64,
    /// Duration, in ns.
    pub dur_ns: f64,
    /// What it is and where it comes from.
    pub detail: String,
}

impl MeshSpan {
    /// A span on mesh track `on`.
    fn on(on: MeshTrack, name: String, start: f64, dur: f64, detail: String) -> MeshSpan {
        let (tid, track) = on.tid_and_name();
        MeshSpan {
            tid,
            track: track.into(),
            name,
            start_ns: start,
            dur_ns: dur,
            detail,
        }
    }

    /// A kernel segment of `instructions` records.
    pub(crate) fn kernel(start: f64, dur: f64, instructions: usize) -> MeshSpan {
        let detail = format!("{instructions} instructions");
        MeshSpan::on(MeshTrack::Kernel, "kernel".into(), start, dur, detail)
    }

    /// A copy streaming to `to`.
    pub(crate) fn transfer(t: &Transfer, to: usize, bytes: u64, loc: SourceLoc) -> MeshSpan {
        let name = format!("send -> device {to}");
        let detail = format!("{bytes} bytes, {} hops, at {loc}", t.hops);
        let dur = t.landed_ns - t.start_ns;
        MeshSpan::on(MeshTrack::Send, name, t.start_ns, dur, detail)
    }

    /// A read of semaphore `sem` that returned `value`.
    pub(crate) fn read(start: f64, dur: f64, value: usize, sem: &str, loc: SourceLoc) -> MeshSpan {
        let name = format!("read {sem}");
        let detail = format!("value {value}, at {loc}");
        MeshSpan::on(MeshTrack::Kernel, name, start, dur, detail)
    }

    /// A blocked wait.
    pub(crate) fn wait(start: f64, dur: f64, sem: &str, loc: SourceLoc) -> MeshSpan {
        let name = format!("wait {sem}");
        MeshSpan::on(MeshTrack::Wait, name, start, dur, format!("at {loc}"))
    }

    /// A DMA reduction of `elems` elements of `elem_bytes` bytes.
    pub(crate) fn reduce(
        start: f64,
        dur: f64,
        elems: usize,
        elem_bytes: usize,
        loc: SourceLoc,
    ) -> MeshSpan {
        let detail = format!("{elems} elements of {elem_bytes} bytes, at {loc}");
        MeshSpan::on(MeshTrack::Reduce, "reduce".into(), start, dur, detail)
    }

    /// The fixed cost of collective `name` (runtime setup, the ranks' handshake).
    pub(crate) fn setup(start: f64, dur: f64, name: &str, loc: SourceLoc) -> MeshSpan {
        let detail = format!("fixed cost of the collective, at {loc}");
        MeshSpan::on(
            MeshTrack::Setup,
            format!("{name} setup"),
            start,
            dur,
            detail,
        )
    }

    /// The launch's pre/postamble, paid once per launch.
    pub(crate) fn launch(start: f64, dur: f64) -> MeshSpan {
        let detail = "the launch's fixed cost, once per launch".into();
        MeshSpan::on(
            MeshTrack::Launch,
            "pre/postamble".into(),
            start,
            dur,
            detail,
        )
    }

    /// A whole collective on one device.
    pub(crate) fn collective(start: f64, dur: f64, name: &str, loc: SourceLoc) -> MeshSpan {
        let detail = format!("at {loc}");
        MeshSpan::on(MeshTrack::Collective, name.into(), start, dur, detail)
    }
}

/// The engine spans of a kernel segment's profile, shifted to start at `t0`.
pub(crate) fn segment_spans(p: &Profile, t0: f64) -> impl Iterator<Item = MeshSpan> + '_ {
    p.spans.iter().filter_map(move |s| {
        let op = p.ops.get(s.op as usize)?;
        Some(MeshSpan {
            tid: crate::profile::trace::track_tid(s.track),
            track: s.track.name(),
            name: match s.track {
                Track::LoadStationary => "LoadStationary".into(),
                _ => op.opcode.name().into(),
            },
            start_ns: t0 + s.start_ns,
            dur_ns: s.dur_ns,
            detail: format!("{} at {}", op.api, op.loc),
        })
    })
}

/// The modelled timeline of one device.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct DeviceTimeline {
    /// Logical device id.
    pub device: usize,
    /// Time its kernel ends, in ns.
    pub end_ns: f64,
    /// Time in kernel segments (including DMA contention with its own transfers), in ns.
    pub compute_ns: f64,
    /// Time blocked on semaphores, in ns.
    pub wait_ns: f64,
    /// Bytes it sent with copies.
    pub bytes_sent: u64,
    /// Its spans, in issue order.
    pub spans: Vec<MeshSpan>,
}

impl DeviceTimeline {
    /// The timeline of `device` before it did anything.
    pub(crate) fn empty(device: usize) -> DeviceTimeline {
        DeviceTimeline {
            device,
            end_ns: 0.0,
            compute_ns: 0.0,
            wait_ns: 0.0,
            bytes_sent: 0,
            spans: Vec::new(),
        }
    }
}

/// One collective of the launch (all groups that ran it), in nccom-test terms.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CollectiveStat {
    /// Position in every device's collective sequence.
    pub seq: u32,
    /// `all_gather`, `reduce_scatter`, ...
    pub name: &'static str,
    /// The algorithm, if it has a choice.
    pub algorithm: Option<String>,
    /// Ranks per group.
    pub ranks: usize,
    /// Bytes per rank: max(input, output) [E S15].
    pub bytes: u64,
    /// From the first device entering to the last leaving, in ns.
    pub time_ns: f64,
    /// bytes / time, in GiB/s [E S20].
    pub algbw_gib_s: f64,
    /// busbw / algbw for this collective and rank count [E S20].
    pub bus_factor: f64,
    /// algbw x factor, in GiB/s.
    pub busbw_gib_s: f64,
}

impl CollectiveStat {
    /// The statistics of collective `seq` from its registry entry and the (device, start,
    /// end) of every device that ran it.
    pub(crate) fn from_entry(
        seq: u32,
        e: &CollectiveEntry,
        spans: &[(usize, f64, f64)],
    ) -> CollectiveStat {
        let start = spans.iter().map(|s| s.1).fold(f64::INFINITY, f64::min);
        let end = spans.iter().map(|s| s.2).fold(0.0f64, f64::max);
        let time_ns = if end > start { end - start } else { 0.0 };
        let algbw = if time_ns > 0.0 {
            e.bytes as f64 / time_ns * 1e9 / (1u64 << 30) as f64
        } else {
            0.0
        };
        let factor = e.kind.bus_factor(e.ranks);
        CollectiveStat {
            seq,
            name: e.kind.name(),
            algorithm: e.algorithm.map(|a| a.to_string()),
            ranks: e.ranks,
            bytes: e.bytes,
            time_ns,
            algbw_gib_s: algbw,
            bus_factor: factor,
            busbw_gib_s: algbw * factor,
        }
    }
}

/// The outcome of a mesh launch.
#[derive(Clone, Debug)]
pub struct MeshReport {
    /// The mesh.
    pub mesh: Mesh,
    /// The target modelled.
    pub target: Target,
    /// The launch mode (times are only modelled in simulate and estimate modes).
    pub mode: Mode,
    /// Every device's timeline, by device id.
    pub devices: Vec<DeviceTimeline>,
    /// Every collective, in call order.
    pub collectives: Vec<CollectiveStat>,
    /// Modelled latency: the latest device end, in ns.
    pub latency_ns: f64,
}

impl MeshReport {
    pub(crate) fn new(
        mesh: Mesh,
        target: Target,
        mode: Mode,
        devices: Vec<DeviceTimeline>,
        collectives: Vec<CollectiveStat>,
    ) -> MeshReport {
        let latency_ns = devices.iter().map(|d| d.end_ns).fold(0.0, f64::max);
        MeshReport {
            mesh,
            target,
            mode,
            devices,
            collectives,
            latency_ns,
        }
    }

    /// The modelled latency in µs.
    pub fn latency_us(&self) -> f64 {
        self.latency_ns / 1e3
    }

    /// Writes the timelines as Chrome-trace JSON (open in Perfetto): one process per device,
    /// one thread per engine and per mesh track (kernel segments, copies sent, waits,
    /// reductions, collectives).
    pub fn write_chrome_trace(&self, path: impl AsRef<Path>) -> io::Result<()> {
        crate::files::stream(path.as_ref(), "the mesh Chrome trace", |w| {
            self.write_trace(w)
        })
    }

    /// Writes the Chrome-trace JSON to `w`.
    pub fn write_trace<W: Write>(&self, w: &mut W) -> io::Result<()> {
        writeln!(w, "{{\"displayTimeUnit\":\"ns\",\"traceEvents\":[")?;
        let mut first = true;
        let mut emit = |w: &mut W, v: serde_json::Value| -> io::Result<()> {
            if !first {
                writeln!(w, ",")?;
            }
            first = false;
            write!(w, "{v}")
        };
        let chip = |d: usize| super::links::link_spec(self.target).chip(d);
        for d in &self.devices {
            let pid = d.device;
            let name = format!(
                "{} chip {} ({})",
                self.mesh.describe_device(pid),
                chip(pid),
                self.target
            );
            emit(
                w,
                json!({"name":"process_name","ph":"M","pid":pid,"args":{"name":name}}),
            )?;
            emit(
                w,
                json!({"name":"process_sort_index","ph":"M","pid":pid,"args":{"sort_index":pid}}),
            )?;
            let mut tracks: Vec<(u32, &str)> =
                d.spans.iter().map(|s| (s.tid, s.track.as_str())).collect();
            tracks.sort();
            tracks.dedup_by_key(|t| t.0);
            for (tid, track) in tracks {
                emit(
                    w,
                    json!({"name":"thread_name","ph":"M","pid":pid,"tid":tid,"args":{"name":track}}),
                )?;
                emit(
                    w,
                    json!({"name":"thread_sort_index","ph":"M","pid":pid,"tid":tid,"args":{"sort_index":tid}}),
                )?;
            }
            for s in &d.spans {
                emit(
                    w,
                    json!({"name":s.name,"ph":"X","pid":pid,"tid":s.tid,
                        "ts":s.start_ns / 1e3,"dur":s.dur_ns / 1e3,"args":{"detail":s.detail}}),
                )?;
            }
        }
        writeln!(w, "\n]}}")
    }
}

impl fmt::Display for MeshReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} on {}: {} devices, modelled latency {:.2} us ({:?} mode)",
            self.mesh,
            self.target,
            self.devices.len(),
            self.latency_us(),
            self.mode
        )?;
        writeln!(
            f,
            "  {:<22} {:>10} {:>11} {:>9} {:>10}",
            "device", "end us", "compute us", "wait us", "sent KiB"
        )?;
        for d in &self.devices {
            writeln!(
                f,
                "  {:<22} {:>10.2} {:>11.2} {:>9.2} {:>10.1}",
                self.mesh.describe_device(d.device),
                d.end_ns / 1e3,
                d.compute_ns / 1e3,
                d.wait_ns / 1e3,
                d.bytes_sent as f64 / 1024.0
            )?;
        }
        if !self.collectives.is_empty() {
            writeln!(
                f,
                "  {:<4} {:<20} {:<19} {:>5} {:>12} {:>10} {:>12} {:>12}",
                "#",
                "collective",
                "algorithm",
                "ranks",
                "bytes",
                "time us",
                "algbw GiB/s",
                "busbw GiB/s"
            )?;
            for c in &self.collectives {
                writeln!(
                    f,
                    "  {:<4} {:<20} {:<19} {:>5} {:>12} {:>10.2} {:>12.2} {:>12.2}",
                    c.seq,
                    c.name,
                    c.algorithm.as_deref().unwrap_or("-"),
                    c.ranks,
                    c.bytes,
                    c.time_ns / 1e3,
                    c.algbw_gib_s,
                    c.busbw_gib_s
                )?;
            }
        }
        Ok(())
    }
}
