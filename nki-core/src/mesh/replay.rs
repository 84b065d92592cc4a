//! The mesh timeline: a deterministic replay of what every device did, in modelled-time order.
//!
//! While the device threads run (real interleavings, real values), each device logs its
//! [`Step`]s in program order: kernel segments (already modelled by the NeuronCore timing
//! model), copies sent, semaphore signals and waits, DMA reductions, collective boundaries.
//! After the launch, this module replays the logs as a discrete-event simulation: the device
//! with the earliest clock takes its next step. Copies are booked on the links in issue-time
//! order ([`Wires::book`]), every semaphore increment carries the time it lands, and a wait for
//! `v` completes at the `v`-th earliest landing (never before its device's clock). The result
//! does not depend on how the threads happened to interleave.

use super::links::Topology;
use super::report::{DeviceTimeline, MeshSpan};
use super::sem::SemKey;
use super::timeline::Wires;
use crate::error::SourceLoc;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

/// One logged step of a device, in program order.
#[derive(Clone, Debug)]
pub(crate) enum Step {
    /// A kernel segment: its modelled latency, the fraction of it its DMA engines were busy,
    /// and its engine spans (relative to the segment start).
    Compute {
        dur: f64,
        dma_fraction: f64,
        instructions: usize,
        spans: Vec<MeshSpan>,
    },
    /// A copy of `bytes` to device `dst`, signalling `send` here and `recv` there.
    Send {
        dst: usize,
        bytes: u64,
        send: Option<SemKey>,
        recv: SemKey,
        loc: SourceLoc,
    },
    /// `n` increments of semaphore `key` on device `dst`.
    Signal { dst: usize, key: SemKey, n: u32 },
    /// A completed wait for `value` on the device's semaphore `key`.
    Wait {
        key: SemKey,
        value: u32,
        label: String,
        loc: SourceLoc,
    },
    /// A DMA reduction of `elems` elements of `elem_bytes` bytes each (the collective's
    /// dtype: the DMA engines reduce in it).
    Reduce {
        elems: usize,
        elem_bytes: usize,
        loc: SourceLoc,
    },
    /// The fixed cost of collective `name` on this device (runtime setup and the ranks'
    /// handshake), in ns.
    Setup {
        ns: f64,
        name: &'static str,
        loc: SourceLoc,
    },
    /// The fixed cost of collective `seq` started ahead by its `_prepare` half: it runs
    /// beside the device's next steps and ends `ns` later.
    Prepare {
        seq: u32,
        ns: f64,
        name: &'static str,
        loc: SourceLoc,
    },
    /// The `_trigger` half of collective `seq`: waits for its prepared fixed cost to end.
    Trigger {
        seq: u32,
        name: &'static str,
        loc: SourceLoc,
    },
    /// Entering collective `seq`.
    Begin { seq: u32 },
    /// Leaving collective `seq`.
    End {
        seq: u32,
        name: &'static str,
        loc: SourceLoc,
    },
}

/// A device during the replay.
struct Cursor {
    steps: std::vec::IntoIter<Step>,
    next: Option<Step>,
    t: DeviceTimeline,
    /// The time of the device's valid heap entry (infinite while parked on a wait).
    at: f64,
    begun: HashMap<u32, f64>,
    /// When the fixed cost of each prepared collective ends.
    prepared: HashMap<u32, f64>,
}

/// Landing times of the increments of each (device, semaphore) not yet consumed.
type Units = HashMap<(usize, SemKey), Vec<f64>>;

/// The replayed timelines, and (device, start, end) of every collective by sequence number.
pub(crate) struct Replay {
    pub(crate) devices: Vec<DeviceTimeline>,
    pub(crate) collectives: BTreeMap<u32, Vec<(usize, f64, f64)>>,
}

type Heap = BinaryHeap<Reverse<(u64, usize)>>;

fn entry(t: f64, d: usize) -> Reverse<(u64, usize)> {
    // Times are non-negative, so their bit patterns order as the values do.
    Reverse((t.to_bits(), d))
}

/// When the wait at the head of `c` can complete: its device's clock or the landing of the
/// `value`-th earliest increment, whichever is later (`None` until enough increments exist).
fn wait_ready(units: &mut Units, d: usize, c: &Cursor) -> Option<f64> {
    let Some(Step::Wait { key, value, .. }) = &c.next else {
        return None;
    };
    let have = units.entry((d, *key)).or_default();
    if have.len() < *value as usize {
        return None;
    }
    have.sort_by(f64::total_cmp);
    let landed = match *value {
        0 => 0.0,
        v => have[v as usize - 1],
    };
    Some(landed.max(c.t.end_ns))
}

/// Re-schedules device `d` if it is parked on a wait: an increment just arrived for it.
fn wake(heap: &mut Heap, units: &mut Units, devs: &mut [Cursor], d: usize) {
    let c = &mut devs[d];
    if let Some(ready) = wait_ready(units, d, c) {
        if ready != c.at {
            c.at = ready;
            heap.push(entry(ready, d));
        }
    }
}

/// Replays every device's log on `topo`; every device then pays the launch's pre/postamble
/// `overhead_ns` once, after its last step.
pub(crate) fn replay(logs: Vec<Vec<Step>>, topo: &Topology, overhead_ns: f64) -> Replay {
    let links = topo.spec();
    let mut wires = Wires::default();
    let mut units: Units = HashMap::new();
    let mut collectives: BTreeMap<u32, Vec<(usize, f64, f64)>> = BTreeMap::new();
    let mut devs: Vec<Cursor> = logs
        .into_iter()
        .enumerate()
        .map(|(d, log)| {
            let mut steps = log.into_iter();
            Cursor {
                next: steps.next(),
                steps,
                t: DeviceTimeline::empty(d),
                at: 0.0,
                begun: HashMap::new(),
                prepared: HashMap::new(),
            }
        })
        .collect();
    let mut heap: Heap = (0..devs.len()).map(|d| entry(0.0, d)).collect();
    while let Some(Reverse((bits, d))) = heap.pop() {
        let now = f64::from_bits(bits);
        if now != devs[d].at || devs[d].next.is_none() {
            continue; // stale entry
        }
        if matches!(devs[d].next, Some(Step::Wait { .. })) {
            match wait_ready(&mut units, d, &devs[d]) {
                None => {
                    devs[d].at = f64::INFINITY;
                    continue;
                }
                Some(ready) if ready > now => {
                    devs[d].at = ready;
                    heap.push(entry(ready, d));
                    continue;
                }
                Some(_) => {}
            }
        }
        let c = &mut devs[d];
        let step = c.next.take().expect("checked above");
        let mut woken = None;
        match step {
            Step::Compute {
                dur,
                dma_fraction,
                instructions,
                spans,
            } => {
                let t0 = c.t.end_ns;
                let stolen = wires.dma_share(d, t0, t0 + dur);
                let total = dur + stolen * dma_fraction;
                c.t.spans.extend(spans.into_iter().map(|mut s| {
                    s.start_ns += t0;
                    s
                }));
                c.t.spans.push(MeshSpan::kernel(t0, total, instructions));
                c.t.end_ns += total;
                c.t.compute_ns += total;
            }
            Step::Send {
                dst,
                bytes,
                send,
                recv,
                loc,
            } => {
                let collective = matches!(recv, SemKey::Collective { .. });
                let tr = wires.book(topo, (d, dst), bytes, c.t.end_ns, collective);
                c.t.bytes_sent += bytes;
                c.t.spans.push(MeshSpan::transfer(&tr, dst, bytes, loc));
                units.entry((dst, recv)).or_default().push(tr.landed_ns);
                if let Some(s) = send {
                    units.entry((d, s)).or_default().push(tr.sent_ns);
                }
                woken = Some(dst);
            }
            Step::Signal { dst, key, n } => {
                let lat = if dst == d {
                    0.0
                } else {
                    topo.route(d, dst).latency_ns
                };
                let at = c.t.end_ns + lat;
                units
                    .entry((dst, key))
                    .or_default()
                    .extend((0..n).map(|_| at));
                woken = Some(dst);
            }
            Step::Wait {
                key,
                value,
                label,
                loc,
            } => {
                if now > c.t.end_ns {
                    c.t.spans
                        .push(MeshSpan::wait(c.t.end_ns, now - c.t.end_ns, &label, loc));
                    c.t.wait_ns += now - c.t.end_ns;
                    c.t.end_ns = now;
                }
                units.entry((d, key)).or_default().drain(..value as usize);
            }
            Step::Reduce {
                elems,
                elem_bytes,
                loc,
            } => {
                let gbps = links.dma_gbps * links.collective_dma_fraction * links.reduce_fraction;
                let ns = (elems * elem_bytes) as f64 / gbps;
                c.t.spans
                    .push(MeshSpan::reduce(c.t.end_ns, ns, elems, elem_bytes, loc));
                c.t.end_ns += ns;
            }
            Step::Setup { ns, name, loc } => {
                c.t.spans.push(MeshSpan::setup(c.t.end_ns, ns, name, loc));
                c.t.end_ns += ns;
            }
            Step::Prepare { seq, ns, name, loc } => {
                c.t.spans.push(MeshSpan::setup(c.t.end_ns, ns, name, loc));
                c.prepared.insert(seq, c.t.end_ns + ns);
            }
            Step::Trigger { seq, name, loc } => {
                let ready = c.prepared.remove(&seq).unwrap_or(c.t.end_ns);
                if ready > c.t.end_ns {
                    let label = format!("{name} setup");
                    c.t.spans
                        .push(MeshSpan::wait(c.t.end_ns, ready - c.t.end_ns, &label, loc));
                    c.t.wait_ns += ready - c.t.end_ns;
                    c.t.end_ns = ready;
                }
            }
            Step::Begin { seq } => {
                c.begun.insert(seq, c.t.end_ns);
            }
            Step::End { seq, name, loc } => {
                let start = c.begun.remove(&seq).unwrap_or(c.t.end_ns);
                c.t.spans
                    .push(MeshSpan::collective(start, c.t.end_ns - start, name, loc));
                collectives
                    .entry(seq)
                    .or_default()
                    .push((d, start, c.t.end_ns));
            }
        }
        c.next = c.steps.next();
        if c.next.is_some() {
            c.at = c.t.end_ns;
            heap.push(entry(c.at, d));
        }
        if let Some(w) = woken {
            wake(&mut heap, &mut units, &mut devs, w);
        }
    }
    let devices = devs
        .into_iter()
        .map(|c| {
            let mut t = c.t;
            if overhead_ns > 0.0 {
                t.spans.push(MeshSpan::launch(t.end_ns, overhead_ns));
                t.end_ns += overhead_ns;
            }
            t
        })
        .collect();
    Replay {
        devices,
        collectives,
    }
}
