//! Profiles of modelled launches: the summary ([`summary`]: latency, bottleneck shares,
//! engine activity, DMA traffic, ...), the performance bounds in AWS's vocabulary
//! ([`bounds`], with the per-line [`findings`]) and its Chrome-trace writer ([`trace`]). The writer
//! depends on the summary types, never the other way round; so does the self-contained HTML
//! page ([`html`]).

pub mod advice;
pub mod bounds;
pub mod compiler;
pub mod findings;
pub mod html;
pub mod ir;
pub(crate) mod kept;
pub(crate) mod loops;
pub mod spills;
pub mod summary;
pub mod trace;
pub(crate) mod units;

pub use advice::{Advice, AdviceKind};
pub use bounds::{BoundRow, PerformanceBounds};
pub use compiler::{CompilerKind, CompilerLine, CompilerStats};
pub use findings::{Finding, FindingKind};
pub use ir::IrDump;
pub use spills::{SpillKind, SpillLine, SpillStats};
pub use summary::{
    Bound, BoundShare, CoreProfile, DmaStats, EngineStat, LineStat, LoopStat, OpInfo, Profile,
    Span, Spans, Track,
};
