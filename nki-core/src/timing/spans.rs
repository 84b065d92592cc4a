//! The timeline of a modelled launch as trace spans: one interval per instruction and track
//! (TensorE LoadStationary / MultiplyMoving, the compute engines, DMA queue lanes and DMA
//! engines), the stalls and the pre/postamble. A [`Timeline`] keeps what the spans are made
//! of (moved out of the schedule) and builds them only when a profile's spans are first read.

use super::critical;
use super::schedule::{Cause, Piece, Schedule};
use crate::profile::{OpInfo, Span, Track};
use crate::record::Engine;
use std::collections::BinaryHeap;

/// The modelled times of every record of a launch (global record order), owned.
pub(crate) struct Timeline {
    /// NeuronCore index (position in the launch's streams) of each record.
    core: Vec<u16>,
    /// Logical NeuronCore (as in [`OpInfo::nc`]) of each core index.
    core_nc: Vec<u16>,
    engine: Vec<Engine>,
    start: Vec<f64>,
    end: Vec<f64>,
    ls_end: Vec<f64>,
    mm_start: Vec<f64>,
    cause: Vec<Cause>,
    pieces: Vec<Piece>,
    /// End of the last record (where the postamble starts).
    active: f64,
    /// The launch's pre/postamble.
    overhead: f64,
}

impl Timeline {
    /// The timeline of `sch`, whose records run on `engine` and are described by `ops`; the
    /// launch's last record ends at `active` and it pays `overhead` of pre/postamble.
    pub(crate) fn new(
        sch: Schedule<'_>,
        engine: Vec<Engine>,
        ops: &[OpInfo],
        active: f64,
        overhead: f64,
    ) -> Timeline {
        // Records are grouped by core, in core order: each core's first record tells its nc.
        let cores = sch.core.last().map_or(0, |&c| c as usize + 1);
        let core_nc = (0..cores)
            .map(|c| {
                let first = sch.core.partition_point(|&x| (x as usize) < c);
                ops.get(first).map_or(c as u16, |o| o.nc)
            })
            .collect();
        Timeline {
            core: sch.core,
            core_nc,
            engine,
            start: sch.start,
            end: sch.end,
            ls_end: sch.ls_end,
            mm_start: sch.mm_start,
            cause: sch.cause,
            pieces: sch.pieces,
            active,
            overhead,
        }
    }

    /// Every span: per record in record order its engine's span(s) (DMAs excepted), then the
    /// DMA queue lanes, the stalls, the pre/postamble and the DMA engines' shares.
    pub(crate) fn spans(&self) -> Vec<Span> {
        let n = self.start.len();
        let shares: usize = self.pieces.iter().map(|p| p.engines as usize).sum();
        let mut spans: Vec<Span> = Vec::with_capacity(n + shares);
        let span = |op: usize, track, start_ns: f64, end_ns: f64| Span {
            op: op as u32,
            nc: self.core_nc[self.core[op] as usize],
            track,
            start_ns,
            dur_ns: end_ns - start_ns,
            cause: None,
        };
        let mut dma_spans: Vec<(f64, f64, u32, u16)> = Vec::new();
        for i in 0..n {
            let (s, e) = (self.start[i], self.end[i]);
            match self.engine[i] {
                Engine::Tensor => {
                    spans.push(span(i, Track::LoadStationary, s, self.ls_end[i]));
                    spans.push(span(i, Track::MultiplyMoving, self.mm_start[i], e));
                }
                Engine::Dma => {
                    dma_spans.push((s, e, i as u32, self.core_nc[self.core[i] as usize]))
                }
                eng => {
                    let track = match eng {
                        Engine::Vector => Track::Vector,
                        Engine::Scalar => Track::Scalar,
                        Engine::GpSimd => Track::GpSimd,
                        _ => Track::Sync,
                    };
                    spans.push(span(i, track, s, e));
                }
            }
        }
        // DMA queue lanes: greedy interval colouring per core (no two spans of a lane overlap).
        dma_spans.sort_by(|a, b| a.3.cmp(&b.3).then(a.0.total_cmp(&b.0)));
        let mut lanes: BinaryHeap<std::cmp::Reverse<(OrdF64, u16)>> = BinaryHeap::new();
        let mut nlanes = 0u16;
        let mut cur_core = u16::MAX;
        for &(s, e, op, nc) in &dma_spans {
            if nc != cur_core {
                lanes.clear();
                nlanes = 0;
                cur_core = nc;
            }
            let lane = match lanes.peek() {
                Some(std::cmp::Reverse((OrdF64(end), l))) if *end <= s => {
                    let l = *l;
                    lanes.pop();
                    l
                }
                _ => {
                    nlanes = nlanes.saturating_add(1);
                    nlanes - 1
                }
            };
            lanes.push(std::cmp::Reverse((OrdF64(e), lane)));
            spans.push(span(op as usize, Track::DmaQueue(lane), s, e));
        }
        let stalls = critical::stalls(
            &self.core,
            &self.engine,
            &self.start,
            &self.end,
            &self.cause,
        );
        for (op, cause, start, end) in stalls {
            spans.push(Span {
                cause: Some(cause),
                ..span(
                    op as usize,
                    Track::Stall(self.engine[op as usize]),
                    start,
                    end,
                )
            });
        }
        if self.overhead > 0.0 {
            spans.push(Span {
                op: u32::MAX,
                nc: self.core_nc.first().copied().unwrap_or(0),
                track: Track::Launch,
                start_ns: self.active,
                dur_ns: self.overhead,
                cause: None,
            });
        }
        for p in &self.pieces {
            for e in p.engine..p.engine + p.engines {
                let track = Track::DmaEngine(e as u8);
                spans.push(span(p.rec as usize, track, p.start, p.end));
            }
        }
        spans
    }
}

/// Totally ordered f64 (finite times).
#[derive(Clone, Copy, PartialEq, Debug)]
struct OrdF64(f64);

impl Eq for OrdF64 {}

impl PartialOrd for OrdF64 {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for OrdF64 {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0)
    }
}
