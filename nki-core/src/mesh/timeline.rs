//! The link timing model: when a transfer of `bytes` issued at modelled time `t` from device
//! `src` lands on device `dst`.
//!
//! A transfer waits the DMA fixed cost, then streams its bytes at the bottleneck bandwidth of
//! its route ([`super::links::LinkSpec::route`]) while holding every resource on the route
//! (the sender's DMA engines, each chip-to-chip link, or the EFA share): it starts at the first
//! time all of them are free for its whole duration, and lands after the per-hop latency.
//! Transfers therefore contend for links and DMA engines exactly when their intervals
//! overlap. A kernel segment that runs while its device's DMA engines carry transfers is
//! stretched by the DMA time those transfers take (`Wires::dma_share`).

use super::links::{LinkSpec, Resource, Route};
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
    busy: HashMap<Resource, Vec<(f64, f64)>>,
    /// Per sending device: (start, end, fraction of its DMA bandwidth the transfer used).
    dma: HashMap<usize, Vec<(f64, f64, f64)>>,
}

impl Wires {
    /// Books a transfer of `bytes` from `src` to `dst` issued at `t`.
    pub(crate) fn book(
        &mut self,
        spec: &LinkSpec,
        src: usize,
        dst: usize,
        bytes: u64,
        t: f64,
    ) -> Transfer {
        let route: Route = spec.route(src, dst);
        let dur = bytes as f64 / route.gbps;
        let ready = t + spec.dma_fixed_ns;
        let start = self.first_free(&route.resources, ready, dur);
        if dur > 0.0 {
            for r in &route.resources {
                self.busy.entry(*r).or_default().push((start, start + dur));
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

    /// The first time at or after `t` when every resource is free for `dur`.
    fn first_free(&self, resources: &[Resource], t: f64, dur: f64) -> f64 {
        let mut t = t;
        if dur <= 0.0 {
            return t;
        }
        loop {
            let mut moved = false;
            for r in resources {
                for &(s, e) in self.busy.get(r).map_or(&[][..], |v| v.as_slice()) {
                    if s < t + dur && t < e {
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
    use crate::mesh::links::link_spec;
    use crate::target::Target;

    #[test]
    fn transfers_on_a_shared_link_serialise() {
        let spec = link_spec(Target::Trn2);
        let mut w = Wires::default();
        // Chip 0 -> chip 1 from two devices of chip 0: same +x link, different DMA engines.
        let a = w.book(spec, 0, 4, 256_000, 0.0);
        let b = w.book(spec, 1, 5, 256_000, 0.0);
        assert_eq!(a.start_ns, spec.dma_fixed_ns);
        assert_eq!(a.sent_ns, spec.dma_fixed_ns + 1000.0);
        assert_eq!(a.landed_ns, a.sent_ns + spec.hop_ns);
        assert_eq!(b.start_ns, a.sent_ns);
        // Opposite direction: its own link.
        let c = w.book(spec, 4, 0, 256_000, 0.0);
        assert_eq!(c.start_ns, spec.dma_fixed_ns);
        assert!((w.dma_share(0, 0.0, 1e9) - 1000.0 * 256.0 / 368.0).abs() < 1e-6);
    }
}
