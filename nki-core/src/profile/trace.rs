//! Chrome-trace JSON writer for a [`Profile`]'s timeline (loads in Perfetto and
//! chrome://tracing): one process per NeuronCore, one thread per track (TensorE LoadStationary,
//! TensorMatrixE MultiplyMoving, VectorE, ScalarE, GpSimdE, SyncE, each DMA engine and each DMA
//! queue lane), one complete event (`"ph": "X"`, times in µs) per span, with the instruction's
//! opcode, NKI call, shapes, dtypes, program id and source line in `args`.

use super::summary::{OpInfo, Profile, Track};
use crate::record::Engine;
use std::collections::BTreeSet;
use std::io::{self, Write};
use std::path::Path;

/// The trace's tracks in display order, one row per kind of track with how many threads the
/// kind has: a track's thread id is the number of threads of the rows before its row plus its
/// index within the row, so every track has its own id (no id is numbered by hand).
const TRACK_ROWS: [u32; 10] = [
    1,                    // TensorE LoadStationary
    1,                    // TensorMatrixE MultiplyMoving
    1,                    // VectorE
    1,                    // ScalarE
    1,                    // GpSimdE
    1,                    // SyncE
    1,                    // pre/postamble
    Engine::COUNT as u32, // "<engine> stalls", by engine index
    1 << u8::BITS,        // DMA engines (a u8 index)
    1 << u16::BITS,       // DMA queue lanes (a u16 index)
];

/// Row of [`TRACK_ROWS`] of a track and its index within the row.
fn track_row(t: Track) -> (usize, u32) {
    match t {
        Track::LoadStationary => (0, 0),
        Track::MultiplyMoving => (1, 0),
        Track::Vector => (2, 0),
        Track::Scalar => (3, 0),
        Track::GpSimd => (4, 0),
        Track::Sync => (5, 0),
        Track::Launch => (6, 0),
        Track::Stall(e) => (7, e.index() as u32),
        Track::DmaEngine(e) => (8, e as u32),
        Track::DmaQueue(q) => (9, q as u32),
    }
}

/// Thread id of a track: its place in `TRACK_ROWS` (engines, the pre/postamble, the stall
/// tracks, then DMA engines and DMA queue lanes).
pub fn track_tid(t: Track) -> u32 {
    let (row, k) = track_row(t);
    TRACK_ROWS[..row].iter().sum::<u32>() + k
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"?\"".into())
}

/// Rounds ns to the µs value written (0.1 ns resolution), so that rounding never creates
/// overlaps between spans that touch.
fn us(ns: f64) -> f64 {
    (ns * 10.0).round() / 1e4
}

fn args(p: &Profile, op: &OpInfo) -> String {
    let mut a = format!(
        "\"opcode\":{},\"api\":{},\"shape\":\"[{}, {}]\",\"dtype\":\"{}->{}\",\"source\":{}",
        json_str(op.opcode.name()),
        json_str(op.api),
        op.partitions,
        op.free,
        op.in_dtype,
        op.out_dtype,
        json_str(&op.loc.to_string())
    );
    if let Some([k, m, n]) = op.kmn {
        a.push_str(&format!(",\"kmn\":[{k},{m},{n}]"));
    }
    if op.bytes > 0 {
        a.push_str(&format!(",\"bytes\":{}", op.bytes));
    }
    if let Some(n) = op.name {
        a.push_str(&format!(",\"name\":{}", json_str(n.as_str())));
    }
    if let Some(pid) = p
        .program_ids
        .get(op.nc as usize)
        .and_then(|v| v.get(op.instance as usize))
    {
        a.push_str(&format!(",\"program_id\":{pid:?}"));
    }
    a
}

impl Profile {
    /// Writes the timeline as Chrome-trace JSON (loadable in Perfetto / chrome://tracing): one
    /// process per NeuronCore, one thread per engine, DMA queue lane and DMA engine, one
    /// complete event per instruction with opcode, api, shapes and source line in its args;
    /// stall spans (engine idle, waiting for a dependency) on a "`<engine>` stalls" thread, and
    /// the pre/postamble on its own thread.
    pub fn write_chrome_trace(&self, path: impl AsRef<Path>) -> io::Result<()> {
        crate::files::stream(path.as_ref(), "the Chrome trace", |w| {
            write_chrome_trace(self, w)
        })
    }
}

/// Writes `p`'s timeline as Chrome-trace JSON to `w`.
pub fn write_chrome_trace<W: Write>(p: &Profile, w: &mut W) -> io::Result<()> {
    writeln!(w, "{{\"displayTimeUnit\":\"ns\",\"traceEvents\":[")?;
    let mut first = true;
    let mut sep = |w: &mut W| -> io::Result<()> {
        if !first {
            writeln!(w, ",")?;
        }
        first = false;
        Ok(())
    };
    let tracks: BTreeSet<(u16, Track)> = p.spans.iter().map(|s| (s.nc, s.track)).collect();
    let cores: BTreeSet<u16> = tracks.iter().map(|t| t.0).collect();
    for nc in &cores {
        sep(w)?;
        write!(
            w,
            "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{nc},\"args\":{{\"name\":\"NeuronCore {nc} ({})\"}}}}",
            p.target
        )?;
        sep(w)?;
        write!(
            w,
            "{{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":{nc},\"args\":{{\"sort_index\":{nc}}}}}"
        )?;
    }
    for (nc, t) in &tracks {
        let tid = track_tid(*t);
        sep(w)?;
        write!(
            w,
            "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{nc},\"tid\":{tid},\"args\":{{\"name\":{}}}}}",
            json_str(&t.name())
        )?;
        sep(w)?;
        write!(
            w,
            "{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":{nc},\"tid\":{tid},\"args\":{{\"sort_index\":{tid}}}}}"
        )?;
    }
    for s in &p.spans {
        let ts = us(s.start_ns);
        let dur = (us(s.start_ns + s.dur_ns) - ts).max(0.0);
        if s.track == Track::Launch {
            sep(w)?;
            write!(
                w,
                "{{\"name\":\"pre/postamble\",\"cat\":\"launch\",\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":{ts:.4},\"dur\":{dur:.4},\"args\":{{}}}}",
                s.nc,
                track_tid(s.track)
            )?;
            continue;
        }
        let Some(op) = p.ops.get(s.op as usize) else {
            continue;
        };
        sep(w)?;
        if let (Track::Stall(_), Some(c)) = (s.track, s.cause.and_then(|c| p.ops.get(c as usize))) {
            write!(
                w,
                "{{\"name\":\"stall\",\"cat\":\"stall\",\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":{ts:.4},\"dur\":{dur:.4},\"args\":{{\"waiting\":{},\"for\":{},\"for_source\":{},{}}}}}",
                s.nc,
                track_tid(s.track),
                json_str(op.opcode.name()),
                json_str(c.opcode.name()),
                json_str(&c.loc.to_string()),
                args(p, op)
            )?;
            continue;
        }
        // A named instruction's event shows its name (NKI `name=`), as the profiler does.
        let name = match (s.track, op.name) {
            (Track::LoadStationary, _) => "LoadStationary",
            (_, Some(n)) => n.as_str(),
            _ => op.opcode.name(),
        };
        write!(
            w,
            "{{\"name\":{},\"cat\":\"{}\",\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":{ts:.4},\"dur\":{dur:.4},\"args\":{{{}}}}}",
            json_str(name),
            op.engine.name(),
            s.nc,
            track_tid(s.track),
            args(p, op)
        )?;
    }
    writeln!(w, "\n]}}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_track_has_its_own_thread_id_in_display_order() {
        let mut tracks = vec![
            Track::LoadStationary,
            Track::MultiplyMoving,
            Track::Vector,
            Track::Scalar,
            Track::GpSimd,
            Track::Sync,
            Track::Launch,
        ];
        tracks.extend(Engine::ALL.iter().map(|&e| Track::Stall(e)));
        tracks.extend((0..=u8::MAX).map(Track::DmaEngine));
        tracks.extend((0..=u16::MAX).map(Track::DmaQueue));
        let tids: Vec<u32> = tracks.iter().map(|&t| track_tid(t)).collect();
        // Consecutive from 0 in this order: distinct, none skipped.
        assert_eq!(tids, (0..tracks.len() as u32).collect::<Vec<_>>());
        // The stall tracks no longer share an id with the pre/postamble.
        assert_ne!(
            track_tid(Track::Stall(Engine::GpSimd)),
            track_tid(Track::Launch)
        );
    }
}
