//! What the `compiler` stage (`compiler::stage`) did to a kernel's program before it was
//! costed: loads and transposes removed as duplicates or hoisted out of affine loops, and
//! tiles renamed per iteration of an affine loop (multi-buffered), PSUM zero fills folded into
//! the first matmul, by source line.

use crate::error::SourceLoc;

/// A transformation of the `compiler` stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum CompilerKind {
    /// An instruction that recomputes what an earlier one of the same loop iteration (or of
    /// straight-line code, or of another loop) already produced was removed; its readers read
    /// the earlier result.
    Duplicate,
    /// An instruction repeated with the same inputs in every iteration of an affine loop runs
    /// once: the copies of the later iterations were removed (the loop-invariant instruction
    /// hoisted out of the loop).
    Hoisted,
    /// A tile reused by every iteration of an affine loop got one buffer per iteration, so an
    /// iteration's writes no longer wait for the previous iteration's reads.
    MultiBuffered,
    /// The zero fill of a PSUM accumulator was dropped: the first matmul into it starts the
    /// accumulation.
    PsumZeroFolded,
    /// A DMA between a tile and the instance's private-HBM scratch, counted as spill save or
    /// reload traffic (the profile's `spills`).
    ScratchSpill,
    /// An affine loop fused into an earlier sibling loop with the same trip count (each
    /// iteration consumes what the same iteration of the earlier loop made).
    Fused,
    /// A computed SBUF tile kept across the iterations of an affine loop whose tiles do not
    /// fit beside it was spilled whole: saved once after its definition, re-loaded whole in
    /// each later iteration that reads it (the profile's `spills` hold the bytes by line).
    SpilledAcrossLoop,
    /// An affine loop whose iterations each run a sequential loop was moved inside it: each
    /// step of the sequential loop runs for every iteration before the next step (so a
    /// computation of the step that is the same in every iteration runs once).
    Interchanged,
}

impl CompilerKind {
    /// The name the profile uses.
    pub fn name(self) -> &'static str {
        match self {
            CompilerKind::Duplicate => "duplicate removed",
            CompilerKind::Hoisted => "hoisted out of the loop",
            CompilerKind::MultiBuffered => "multi-buffered",
            CompilerKind::PsumZeroFolded => "folded into the first matmul",
            CompilerKind::ScratchSpill => "counted as spill traffic (private HBM scratch)",
            CompilerKind::Fused => "fused into the loop",
            CompilerKind::SpilledAcrossLoop => {
                "spilled whole (saved once, re-loaded whole per later iteration)"
            }
            CompilerKind::Interchanged => {
                "moved inside the sequential loop of its body (each step runs for every iteration)"
            }
        }
    }
}

/// One transformation at one source line, summed over the instructions it applied to.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CompilerLine {
    /// What was done.
    pub kind: CompilerKind,
    /// The kernel line of the instructions removed (or of the first write of the renamed
    /// tile).
    pub line: SourceLoc,
    /// The API of those instructions (`nl.load`, `nisa.nc_transpose`, ...).
    pub api: &'static str,
    /// The line of the instruction kept in their place (duplicates and hoisting; for a folded
    /// zero fill, the matmul that starts the accumulation).
    pub kept: Option<SourceLoc>,
    /// The affine loop concerned (hoisting: the loop the instruction left; renaming: the loop
    /// whose iterations got a buffer each), when the stage knows its line.
    pub loop_line: Option<SourceLoc>,
    /// Instructions removed (duplicates, hoisting) or accesses renamed (multi-buffering).
    pub count: usize,
    /// Bytes the removed DMAs would have moved (0 for other instructions and renaming).
    pub bytes: u64,
}

impl std::fmt::Display for CompilerLine {
    /// `k.rs:42:9: nl.load hoisted out of the loop at k.rs:37:14 (kept: k.rs:42:9), 7x, 1835008 B`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} {}", self.line, self.api, self.kind.name())?;
        if let Some(l) = self.loop_line {
            let what = match self.kind {
                CompilerKind::MultiBuffered | CompilerKind::SpilledAcrossLoop => {
                    " across the iterations of the loop at"
                }
                CompilerKind::Interchanged => ", the sequential body starting at",
                _ => " at",
            };
            write!(f, "{what} {l}")?;
        }
        if let Some(k) = self.kept {
            write!(f, " (kept: {k})")?;
        }
        write!(f, ", {}x", self.count)?;
        if self.bytes > 0 {
            write!(f, ", {} B", self.bytes)?;
        }
        Ok(())
    }
}

/// What the `compiler` stage did to a launch (empty, and left out of the JSON, when it was
/// off or found nothing to do).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct CompilerStats {
    /// Instructions removed as duplicates, hoisted out of loops or folded (PSUM zero fills).
    pub removed: usize,
    /// HBM bytes the removed loads would have read.
    pub removed_hbm_bytes: u64,
    /// Tiles given one buffer per affine-loop iteration.
    pub renamed_tiles: usize,
    /// Per transformation and line, most instructions first.
    pub lines: Vec<CompilerLine>,
}

impl CompilerStats {
    /// True when the stage changed nothing.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The lines of transformation `kind`, most instructions first.
    pub fn of_kind(&self, kind: CompilerKind) -> impl Iterator<Item = &CompilerLine> + '_ {
        self.lines.iter().filter(move |l| l.kind == kind)
    }

    /// Counts `count` more applications of `kind` at `line`.
    pub(crate) fn add(&mut self, l: CompilerLine) {
        match self.lines.iter_mut().find(|o| {
            o.kind == l.kind
                && o.line == l.line
                && o.api == l.api
                && o.kept == l.kept
                && o.loop_line == l.loop_line
        }) {
            Some(o) => {
                o.count += l.count;
                o.bytes += l.bytes;
            }
            None => self.lines.push(l),
        }
    }

    /// Adds another instance's stats (the launch's sum).
    pub(crate) fn merge(&mut self, o: CompilerStats) {
        self.removed += o.removed;
        self.removed_hbm_bytes += o.removed_hbm_bytes;
        self.renamed_tiles += o.renamed_tiles;
        for l in o.lines {
            self.add(l);
        }
    }

    /// Sorts the lines, most instructions first.
    pub(crate) fn sort(&mut self) {
        self.lines.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then(a.kind.cmp(&b.kind))
                .then(a.line.line.cmp(&b.line.line))
        });
    }
}
