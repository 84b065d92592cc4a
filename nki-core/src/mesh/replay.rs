//! The mesh timeline: a deterministic replay of what every device did, in modelled-time order.
//!
//! While the device threads run (real interleavings, real values), each device hands its
//! [`Step`]s, in program order, to the [`Replayer`] (under the mesh's synchronisation lock):
//! kernel segments (already modelled by the NeuronCore timing model), copies sent, semaphore
//! signals, waits and reads, DMA reductions, collective boundaries. The replayer is a discrete-event
//! simulation that runs as far as the steps handed in allow: the device with the earliest clock
//! takes its next step, and when that step is not known yet (its thread is still running host
//! code), the simulation stops there until it is. Copies are booked on the links in issue-time
//! order ([`Wires::book`]), every semaphore increment carries the time it lands, and a wait for
//! `v` completes at the `v`-th earliest landing (never before its device's clock), as on the
//! hardware, where a semaphore is a counter and a wait returns once `v` increments arrived.
//!
//! The increments a wait consumed — the `v` earliest landings, ties broken by the increments'
//! identities ([`Inc`]) — are handed back to the waiting device thread ([`Replayer::take_decided`]),
//! which consumes exactly those in the happens-before checks ([`super::order`]) and only then
//! returns. So the checks use the edges the timed replay used, and neither depends on how the
//! threads happened to interleave: the simulation's order depends only on the steps, which each
//! device produces in its program order. Stopping never changes the result: the simulation takes
//! the same steps in the same order as it would on the complete logs.
//!
//! A semaphore read (`Semaphore::value`) is answered the same way ([`Replayer::take_read`]):
//! the increments landed by the reading device's clock and not consumed. Steps are taken in
//! time order and an increment lands no earlier than the step that signals it, so every
//! increment landed by then is known when the read is taken.

use super::links::Topology;
use super::report::{DeviceTimeline, MeshSpan};
use super::sem::{Inc, SemKey};
use super::timeline::Wires;
use crate::error::SourceLoc;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};

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
    /// A copy of `bytes` to device `dst`, signalling `send` here and `recv` there (its
    /// increments are `ev`'s 1 and 0).
    Send {
        ev: u64,
        dst: usize,
        bytes: u64,
        send: Option<SemKey>,
        recv: SemKey,
        loc: SourceLoc,
    },
    /// `n` increments of semaphore `key` on device `dst` (`ev`'s `0..n`).
    Signal {
        ev: u64,
        dst: usize,
        key: SemKey,
        n: u32,
    },
    /// A read of the device's semaphore `key` (`Semaphore::value`): the increments landed by
    /// the device's clock and not consumed; the read then occupies the device for `ns`.
    Read {
        key: SemKey,
        ns: f64,
        label: String,
        loc: SourceLoc,
    },
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
    /// Steps handed in and not taken yet.
    pending: VecDeque<Step>,
    next: Option<Step>,
    /// No more steps will come.
    finished: bool,
    t: DeviceTimeline,
    /// The time of the device's valid heap entry (infinite while parked on a wait).
    at: f64,
    begun: HashMap<u32, f64>,
    /// When the fixed cost of each prepared collective ends.
    prepared: HashMap<u32, f64>,
    /// The increments the device's last completed wait consumed, until its thread takes them.
    decided: Option<Vec<Inc>>,
    /// The value the device's last semaphore read returned, until its thread takes it.
    read: Option<usize>,
}

/// Landing times of the increments of each (device, semaphore) not yet consumed.
type Units = HashMap<(usize, SemKey), Vec<(f64, Inc)>>;

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
/// Leaves the increments sorted by landing, then identity: the first `value` are the ones the
/// wait consumes.
fn wait_ready(units: &mut Units, d: usize, c: &Cursor) -> Option<f64> {
    let Some(Step::Wait { key, value, .. }) = &c.next else {
        return None;
    };
    let have = units.entry((d, *key)).or_default();
    if have.len() < *value as usize {
        return None;
    }
    have.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let landed = match *value {
        0 => 0.0,
        v => have[v as usize - 1].0,
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

/// The incremental replay of a mesh launch on a topology.
pub(crate) struct Replayer {
    topo: Topology,
    wires: Wires,
    units: Units,
    collectives: BTreeMap<u32, Vec<(usize, f64, f64)>>,
    devs: Vec<Cursor>,
    heap: Heap,
    /// Devices whose wait or read completed since the last [`Replayer::take_woken`].
    woken: Vec<usize>,
}

impl Replayer {
    /// The replay of `n` devices on `topo`, before any step.
    pub(crate) fn new(n: usize, topo: Topology) -> Replayer {
        let devs = (0..n)
            .map(|d| Cursor {
                pending: VecDeque::new(),
                next: None,
                finished: false,
                t: DeviceTimeline::empty(d),
                at: 0.0,
                begun: HashMap::new(),
                prepared: HashMap::new(),
                decided: None,
                read: None,
            })
            .collect();
        Replayer {
            topo,
            wires: Wires::default(),
            units: HashMap::new(),
            collectives: BTreeMap::new(),
            devs,
            heap: (0..n).map(|d| entry(0.0, d)).collect(),
            woken: Vec::new(),
        }
    }

    /// Device `d`'s next step, in its program order; the simulation goes as far as it can.
    pub(crate) fn push(&mut self, d: usize, step: Step) {
        self.devs[d].pending.push_back(step);
        self.advance();
    }

    /// Device `d` will hand in no more steps.
    pub(crate) fn finish(&mut self, d: usize) {
        self.devs[d].finished = true;
        self.advance();
    }

    /// The increments device `d`'s last wait consumed, once the simulation completed it.
    pub(crate) fn take_decided(&mut self, d: usize) -> Option<Vec<Inc>> {
        self.devs[d].decided.take()
    }

    /// The value device `d`'s last semaphore read returned, once the simulation took it.
    pub(crate) fn take_read(&mut self, d: usize) -> Option<usize> {
        self.devs[d].read.take()
    }

    /// The devices whose wait or read completed since the last call (their threads can go on).
    pub(crate) fn take_woken(&mut self) -> Vec<usize> {
        std::mem::take(&mut self.woken)
    }

    /// Runs the simulation until it needs a step not handed in yet, or every device is done
    /// or parked on a wait.
    fn advance(&mut self) {
        while let Some(&Reverse((bits, d))) = self.heap.peek() {
            let now = f64::from_bits(bits);
            let c = &mut self.devs[d];
            if now != c.at {
                self.heap.pop(); // stale entry
                continue;
            }
            if c.next.is_none() {
                c.next = c.pending.pop_front();
            }
            if c.next.is_none() {
                if c.finished {
                    self.heap.pop();
                    continue;
                }
                return; // the device's next step is not known yet
            }
            self.heap.pop();
            if matches!(c.next, Some(Step::Wait { .. })) {
                match wait_ready(&mut self.units, d, c) {
                    None => {
                        c.at = f64::INFINITY;
                        continue;
                    }
                    Some(ready) if ready > now => {
                        c.at = ready;
                        self.heap.push(entry(ready, d));
                        continue;
                    }
                    Some(_) => {}
                }
            }
            let woken = self.take_step(d, now);
            let c = &mut self.devs[d];
            c.at = c.t.end_ns;
            self.heap.push(entry(c.at, d));
            if let Some(w) = woken {
                wake(&mut self.heap, &mut self.units, &mut self.devs, w);
            }
        }
    }

    /// Takes device `d`'s next step at `now`; returns the device it signalled.
    fn take_step(&mut self, d: usize, now: f64) -> Option<usize> {
        let topo = &self.topo;
        let links = topo.spec();
        let c = &mut self.devs[d];
        let step = c.next.take().expect("checked by the caller");
        let mut woken = None;
        match step {
            Step::Compute {
                dur,
                dma_fraction,
                instructions,
                spans,
            } => {
                let t0 = c.t.end_ns;
                let stolen = self.wires.dma_share(d, t0, t0 + dur);
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
                ev,
                dst,
                bytes,
                send,
                recv,
                loc,
            } => {
                let collective = matches!(recv, SemKey::Collective { .. });
                let tr = self
                    .wires
                    .book(topo, (d, dst), bytes, c.t.end_ns, collective);
                c.t.bytes_sent += bytes;
                c.t.spans.push(MeshSpan::transfer(&tr, dst, bytes, loc));
                let inc = |i| Inc { from: d, ev, i };
                let units = &mut self.units;
                units
                    .entry((dst, recv))
                    .or_default()
                    .push((tr.landed_ns, inc(0)));
                if let Some(s) = send {
                    units.entry((d, s)).or_default().push((tr.sent_ns, inc(1)));
                }
                woken = Some(dst);
            }
            Step::Signal { ev, dst, key, n } => {
                let lat = if dst == d {
                    0.0
                } else {
                    topo.route(d, dst).latency_ns
                };
                let at = c.t.end_ns + lat;
                self.units
                    .entry((dst, key))
                    .or_default()
                    .extend((0..n).map(|i| (at, Inc { from: d, ev, i })));
                woken = Some(dst);
            }
            Step::Read {
                key,
                ns,
                label,
                loc,
            } => {
                // Every increment landing by `now` is known: the steps that signal it were
                // taken at or before its landing, and the simulation takes steps in time order.
                let landed = self
                    .units
                    .get(&(d, key))
                    .map_or(0, |have| have.iter().filter(|u| u.0 <= c.t.end_ns).count());
                c.read = Some(landed);
                c.t.spans
                    .push(MeshSpan::read(c.t.end_ns, ns, landed, &label, loc));
                c.t.end_ns += ns;
                c.t.compute_ns += ns;
                self.woken.push(d);
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
                // Sorted by `wait_ready`: the earliest landings.
                let have = self.units.entry((d, key)).or_default();
                c.decided = Some(have.drain(..value as usize).map(|u| u.1).collect());
                self.woken.push(d);
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
                self.collectives
                    .entry(seq)
                    .or_default()
                    .push((d, start, c.t.end_ns));
            }
        }
        woken
    }

    /// The replayed timelines once every device finished; every device then pays the
    /// launch's pre/postamble `overhead_ns` once, after its last step.
    pub(crate) fn result(&mut self, overhead_ns: f64) -> Replay {
        for d in 0..self.devs.len() {
            self.devs[d].finished = true;
        }
        self.advance();
        let devices = std::mem::take(&mut self.devs)
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
            collectives: std::mem::take(&mut self.collectives),
        }
    }
}
