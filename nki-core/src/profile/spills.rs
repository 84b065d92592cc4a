//! What the capacity resolution (`compiler::spill`) added to a kernel whose SBUF tiles do not all
//! fit: kernel-input reloads, spill saves and spill reloads, by source line.

use crate::error::SourceLoc;

/// The kind of traffic the compiler adds to fit a kernel in SBUF.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum SpillKind {
    /// A tile holding a kernel input left SBUF; its reads re-load it from the input in HBM.
    InputReload,
    /// A computed tile saved to HBM scratch (when it left SBUF, or after a write while out).
    Save,
    /// A read of a saved tile, re-loaded from HBM scratch.
    Reload,
    /// A read of a tile holding only a constant fill (`nl.zeros`, a memset) that left SBUF
    /// unsaved: the fill runs again on chip (rematerialised), no HBM traffic.
    Refill,
}

impl SpillKind {
    /// The name the profile and the records use.
    pub fn name(self) -> &'static str {
        match self {
            SpillKind::InputReload => "input reload",
            SpillKind::Save => "spill save",
            SpillKind::Reload => "spill reload",
            SpillKind::Refill => "spill refill",
        }
    }

    /// The kind of spill traffic whose records carry API name `api` ([`SpillKind::name`]),
    /// if they are spill traffic (a string match: lengths are compared first, so the API
    /// names of instructions are told apart quickly).
    pub(crate) fn of_api(api: &str) -> Option<SpillKind> {
        let kind = match api {
            "input reload" => SpillKind::InputReload,
            "spill save" => SpillKind::Save,
            "spill reload" => SpillKind::Reload,
            "spill refill" => SpillKind::Refill,
            _ => return None,
        };
        debug_assert_eq!(kind.name(), api);
        Some(kind)
    }
}

/// One kind of added traffic of one tile, at one source line.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SpillLine {
    /// What was added.
    pub kind: SpillKind,
    /// The kernel line of the instruction that needed it (the reader of a reloaded tile, the
    /// instruction whose tiles pushed a saved one out).
    pub line: SourceLoc,
    /// The tile moved: its name if it has one, its dtype and shape, and where it was
    /// allocated.
    pub tile: String,
    /// Instructions added (DMAs; on-chip fills for [`SpillKind::Refill`]).
    pub count: usize,
    /// Bytes moved between SBUF and HBM.
    pub bytes: u64,
}

impl std::fmt::Display for SpillLine {
    /// `line 42: spill save of float32[128, 512] (allocated at k.rs:30:9), 3 DMAs, 768.0 KiB`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.kind {
            SpillKind::Refill => "fill",
            _ => "DMA",
        };
        write!(
            f,
            "{}: {} of {}, {} {what}{}, {} B",
            self.line,
            self.kind.name(),
            self.tile,
            self.count,
            if self.count == 1 { "" } else { "s" },
            self.bytes
        )
    }
}

/// The traffic the capacity resolution added to a launch (all zero and empty when every
/// instance's SBUF tiles fit).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct SpillStats {
    /// Bytes re-loaded from kernel inputs in HBM.
    pub input_reload_bytes: u64,
    /// Bytes saved to HBM scratch (the profiler's spill save counter).
    pub save_bytes: u64,
    /// Bytes re-loaded from HBM scratch (the profiler's spill reload counter).
    pub reload_bytes: u64,
    /// Peak SBUF bytes per partition actually resident after the resolution (the profile's
    /// `memory` holds what was allocated).
    pub resident_peak_bytes: usize,
    /// Per tile and line, most bytes first.
    pub lines: Vec<SpillLine>,
}

impl SpillStats {
    /// True when nothing was added.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Adds `bytes` moved by `count` DMAs of `kind` for `tile` at `line`.
    pub(crate) fn add(
        &mut self,
        kind: SpillKind,
        line: SourceLoc,
        tile: &str,
        count: usize,
        bytes: u64,
    ) {
        match kind {
            SpillKind::InputReload => self.input_reload_bytes += bytes,
            SpillKind::Save => self.save_bytes += bytes,
            SpillKind::Reload => self.reload_bytes += bytes,
            SpillKind::Refill => {}
        }
        match self
            .lines
            .iter_mut()
            .find(|l| l.kind == kind && l.line == line && l.tile == tile)
        {
            Some(l) => {
                l.count += count;
                l.bytes += bytes;
            }
            None => self.lines.push(SpillLine {
                kind,
                line,
                tile: tile.to_string(),
                count,
                bytes,
            }),
        }
    }

    /// Adds another instance's stats (the launch's sum; the resident peak is the maximum).
    pub(crate) fn merge(&mut self, o: SpillStats) {
        for l in o.lines {
            self.add(l.kind, l.line, &l.tile, l.count, l.bytes);
        }
        self.resident_peak_bytes = self.resident_peak_bytes.max(o.resident_peak_bytes);
    }

    /// Sorts the lines, most bytes first.
    pub(crate) fn sort(&mut self) {
        self.lines
            .sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.kind.cmp(&b.kind)));
    }
}
