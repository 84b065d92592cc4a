//! Which ready instruction goes first under a [`SchedulingHeuristic`] (NKI 0.8
//! `CompileConfig.scheduling_heuristic`, "how the new scheduling selects the next instruction
//! from the ready instructions"), where the placement has a choice: on the DMA queues, and on
//! the engines that look ahead past records of other `affine_range` iterations (VectorE,
//! ScalarE, GpSimdE, Sync; TensorE keeps program order under every heuristic, see
//! [`tensor`](super::tensor)).
//!
//! - **ASAP** (the default, "select the instruction that can start first"): the DMA queued
//!   first; compute engines place each record at its earliest start, looking ahead
//!   ([`WINDOW`](super::order::WINDOW)) past records it is independent of.
//! - **TRIVIAL** ("keep the program order of the kernel"): no engine looks ahead, and each
//!   DMA of a core starts no earlier than the one before it in program order
//!   ([`program_order_edges`]).
//! - **DMA_PREFETCH** ("prefer a DMA to an instruction that is not a DMA"): on an engine
//!   queue, the instruction that starts a DMA (the descriptor generation of a software- or
//!   hardware-DGE transfer) goes before compute instructions ready by the time the engine
//!   could start the first of them; among the DMAs ready by the time the DMA engines could
//!   start the first queued one, a load into on-chip memory goes before stores and other
//!   copies (the documentation does not order DMAs among themselves: the model's reading of
//!   "prefetch").
//! - **CRITICAL_PATH** ("prefer the instruction on the longest path to the kernel's
//!   outputs"): on the DMA queues and the engine queues alike, among the records ready by the
//!   time the engine could start the first of them, the one with the longest chain of work
//!   after it (its own time plus the longest path through the records that depend on it:
//!   [`bottom_levels`]).
//!
//! At most [`WINDOW`](super::order::WINDOW) ready records of one queue are weighed at a time.

use super::order::{Edge, Kind};
use crate::compiler::config::SchedulingHeuristic;
use crate::record::{CoreStream, Engine, MemKind, Opcode};

/// The priority of DMA record `r` under `heuristic` given its bottom level `bottom` (higher
/// first; ties go to the DMA queued first).
pub(super) fn dma_priority(
    heuristic: SchedulingHeuristic,
    r: &crate::record::Instr,
    bottom: f64,
) -> f64 {
    match heuristic {
        SchedulingHeuristic::DmaPrefetch => {
            let load = r
                .dma
                .is_some_and(|d| d.src == MemKind::Hbm && d.dst != MemKind::Hbm);
            if load {
                1.0
            } else {
                0.0
            }
        }
        SchedulingHeuristic::CriticalPath => bottom,
        SchedulingHeuristic::Asap | SchedulingHeuristic::Trivial => 0.0,
    }
}

/// The priority of compute record `r` (on an engine that looks ahead) under `heuristic`
/// given its bottom level `bottom` (higher first; ties go to the record ready first).
pub(super) fn compute_priority(
    heuristic: SchedulingHeuristic,
    r: &crate::record::Instr,
    bottom: f64,
) -> f64 {
    match heuristic {
        SchedulingHeuristic::DmaPrefetch => {
            if r.opcode == Opcode::DmaDescriptors {
                1.0
            } else {
                0.0
            }
        }
        SchedulingHeuristic::CriticalPath => bottom,
        SchedulingHeuristic::Asap | SchedulingHeuristic::Trivial => 0.0,
    }
}

/// True when `heuristic` chooses among the ready records of an engine queue (else each is
/// placed at its earliest start, in the order they became ready).
pub(super) fn weighs_compute(heuristic: SchedulingHeuristic) -> bool {
    weighs_dmas(heuristic)
}

/// True when `heuristic` chooses among the ready DMAs (else the first queued goes).
pub(super) fn weighs_dmas(heuristic: SchedulingHeuristic) -> bool {
    matches!(
        heuristic,
        SchedulingHeuristic::DmaPrefetch | SchedulingHeuristic::CriticalPath
    )
}

/// Each record's bottom level: its own time `dur(i)` plus the longest of the bottom levels
/// of the records depending on it (`succ(i)`, all later in the order), each after the time
/// its edge makes the successor wait beyond the record's end (`wait(i, edge)`: a dependency
/// latency, a DMA's trigger latency), for `n` records.
pub(super) fn bottom_levels<'s, S>(
    n: usize,
    dur: impl Fn(usize) -> f64,
    wait: impl Fn(usize, &Edge) -> f64,
    succ: S,
) -> Vec<f64>
where
    S: Fn(usize) -> &'s [Edge],
{
    let mut b = vec![0.0f64; n];
    for i in (0..n).rev() {
        let after = succ(i)
            .iter()
            .map(|e| wait(i, e) + b[e.succ as usize])
            .fold(0.0f64, f64::max);
        b[i] = dur(i) + after;
    }
    b
}

/// TRIVIAL's DMA order: each DMA of a core's stream starts no earlier than the DMA before it
/// in program order, as `(earlier, later)` global record indices with their edge kind.
pub(super) fn program_order_edges(streams: &[CoreStream]) -> Vec<(u32, Edge)> {
    let mut out = Vec::new();
    let mut at = 0u32;
    for s in streams {
        let mut last = None;
        for (_, rs) in &s.instances {
            for r in rs {
                if r.engine == Engine::Dma {
                    if let Some(p) = last {
                        let e = Edge {
                            succ: at,
                            kind: Kind::Order,
                            late: false,
                        };
                        out.push((p, e));
                    }
                    last = Some(at);
                }
                at += 1;
            }
        }
    }
    out
}
