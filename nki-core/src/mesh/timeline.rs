//! The link timing model: when a transfer of `bytes` issued at modelled time `t` from device
//! `src` lands on device `dst`.
//!
//! A transfer waits the DMA fixed cost, then streams its bytes at the bottleneck bandwidth of
//! its route ([`super::links::LinkSpec::route`]) while holding every resource on the route
//! (each chip-to-chip link or the EFA share, and its rate's share of the sender's DMA
//! bandwidth): it starts at the first time all of them have room for its whole duration, and
//! lands after the per-hop latency. A link carries one transfer at a time; the sender's DMA
//! engines carry several at once as long as their rates add up to at most its DMA bandwidth
//! (16 engines, each serving its own transfer, hardware.md §2.7), so a direct collective's
//! sends to peers on different links stream side by side.
//! Transfers therefore contend for links and DMA engines exactly when their intervals
//! overlap. A kernel segment that runs while its device's DMA engines carry transfers is
//! stretched by the DMA time those transfers take (`Wires::dma_share`).

use super::links::{Resource, Route, Topology};
use std::collections::HashMap;

/// When a transfer streamed and landed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Transfer {
    /// Modelled time the bytes start to move, in ns.
    pub start_ns: f64,
    /// Time the last byte leaves the sender, in ns.
    pub sent_ns: f64,
    /// Time the last byte lands at the receiver, in ns.
    pub landed_ns: f64,
    /// Chip-to-chip hops crossed.
    pub hops: usize,
}

/// Busy intervals of every link resource of a mesh launch.
#[derive(Debug, Default)]
pub(crate) struct Wires {
    /// Per resource: (start, end, rate in bytes/ns) of the transfers booked on it.
    busy: HashMap<Resource, Vec<(f64, f64, f64)>>,
    /// Per sending device: (start, end, fraction of its DMA bandwidth the transfer used).
    dma: HashMap<usize, Vec<(f64, f64, f64)>>,
}

impl Wires {
    /// Books a transfer of `bytes` from `src` to `dst` issued at `t`; a `collective`'s
    /// transfer streams on the collective DMA rings, at most
    /// [`LinkSpec::collective_dma_fraction`](super::links::LinkSpec::collective_dma_fraction)
    /// of the DMA bandwidth.
    pub(crate) fn book(
        &mut self,
        topo: &Topology,
        (src, dst): (usize, usize),
        bytes: u64,
        t: f64,
        collective: bool,
    ) -> Transfer {
        let spec = topo.spec();
        let mut route: Route = topo.route(src, dst);
        if collective {
            route.gbps = route.gbps.min(spec.dma_gbps * spec.collective_dma_fraction);
        }
        let dur = bytes as f64 / route.gbps;
        let ready = t + spec.dma_fixed_ns;
        let start = self.first_free(&route.resources, ready, dur, route.gbps, spec.dma_gbps);
        if dur > 0.0 {
            for r in &route.resources {
                let booked = (start, start + dur, route.gbps);
                self.busy.entry(*r).or_default().push(booked);
            }
            self.dma
                .entry(src)
                .or_default()
                .push((start, start + dur, route.gbps / spec.dma_gbps));
        }
        Transfer {
            start_ns: start,
            sent_ns: start + dur,
            landed_ns: start + dur + (route.latency_ns - spec.dma_fixed_ns),
            hops: route.hops,
        }
    }

    /// The first time at or after `t` when every resource has room for `dur` at `rate`:
    /// links and EFA shares are free, and the DMA bookings overlapping the interval leave
    /// `rate` of `dma_gbps` (their rates summed over the whole interval: conservative).
    fn first_free(
        &self,
        resources: &[Resource],
        t: f64,
        dur: f64,
        rate: f64,
        dma_gbps: f64,
    ) -> f64 {
        let mut t = t;
        if dur <= 0.0 {
            return t;
        }
        loop {
            let mut moved = false;
            for r in resources {
                let booked = self.busy.get(r).map_or(&[][..], |v| v.as_slice());
                let overlapping = booked.iter().filter(|&&(s, e, _)| s < t + dur && t < e);
                let blocked = match r {
                    Resource::Dma(_) => {
                        let used: f64 = overlapping.clone().map(|b| b.2).sum();
                        used + rate > dma_gbps * (1.0 + 1e-9)
                    }
                    _ => overlapping.clone().next().is_some(),
                };
                if blocked {
                    // Retry when the first overlapping booking ends.
                    if let Some(e) = overlapping.map(|b| b.1).min_by(f64::total_cmp) {
                        t = e;
                        moved = true;
                    }
                }
            }
            if !moved {
                return t;
            }
        }
    }

    /// DMA time of `device`'s transfers inside `[a, b)`: overlap times the share of the DMA
    /// bandwidth each used.
    pub(crate) fn dma_share(&self, device: usize, a: f64, b: f64) -> f64 {
        self.dma.get(&device).map_or(0.0, |v| {
            v.iter()
                .map(|&(s, e, f)| (e.min(b) - s.max(a)).max(0.0) * f)
                .sum()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::Target;

    #[test]
    fn transfers_on_a_shared_link_serialise() {
        let topo = Topology::of(Target::Trn2);
        let spec = topo.spec();
        let mut w = Wires::default();
        // Chip 0 -> chip 1 from two devices of chip 0: same +x link, different DMA engines.
        let a = w.book(&topo, (0, 4), 256_000, 0.0, false);
        let b = w.book(&topo, (1, 5), 256_000, 0.0, false);
        assert_eq!(a.start_ns, spec.dma_fixed_ns);
        assert_eq!(a.sent_ns, spec.dma_fixed_ns + 1000.0);
        assert_eq!(a.landed_ns, a.sent_ns + spec.hop_ns);
        assert_eq!(b.start_ns, a.sent_ns);
        // Opposite direction: its own link.
        let c = w.book(&topo, (4, 0), 256_000, 0.0, false);
        assert_eq!(c.start_ns, spec.dma_fixed_ns);
        assert!((w.dma_share(0, 0.0, 1e9) - 1000.0 * 256.0 / 368.0).abs() < 1e-6);
        // A collective's transfer on one chip streams on the collective rings' share.
        let d = w.book(&topo, (2, 3), 368_000, 0.0, true);
        let cc = spec.dma_gbps * spec.collective_dma_fraction;
        assert!((d.sent_ns - d.start_ns - 368_000.0 / cc).abs() < 1e-6);
    }

    #[test]
    fn a_placement_moves_devices_onto_other_chips() {
        let t = Topology::of(Target::Trn2).placement(vec![0, 4, 8, 12]);
        assert_eq!(t.route(0, 1).hops, 1);
        assert_eq!(t.route(0, 3).hops, 1); // chip 0 -> chip 3 wraps around the x ring
        assert_eq!(Topology::of(Target::Trn2).route(0, 1).hops, 0);
        assert!(t.check(4).is_ok());
        assert!(t.check(3).is_err());
        let twice = Topology::of(Target::Trn2).placement(vec![0, 0]);
        assert!(twice.check(2).unwrap_err().to_string().contains("slot 0"));
        assert!(Topology::of(Target::Trn1).link_gbps(0.0).check(2).is_err());
    }
}
