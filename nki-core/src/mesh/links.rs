//! Device-to-device link constants per target, each with its source key in
//! docs/reference/hardware.md (§1, §2.7, §5), and the placement of mesh devices on chips and
//! nodes that decides which links a transfer crosses.
//!
//! A mesh device is a logical NeuronCore. Devices fill chips in order (`devices_per_chip`),
//! chips fill nodes (`chips_per_node`). Within a node, trn1 and trn2 chips sit on a 4x4 2D
//! torus of NeuronLinks and a transfer crosses the links of a dimension-ordered (x then y)
//! shortest route; trn3 chips hang off a switched PCIe fabric (one uplink, one downlink).
//! Between nodes a transfer goes over EFA.

use crate::target::{StandIns, Target};

/// How chips of one node are connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fabric {
    /// A 2D torus of `(w, h)` chips with one link per direction per neighbour.
    Torus(usize, usize),
    /// A switch: every chip has one uplink and one downlink.
    Switched,
}

/// The link and placement constants of one target. Bandwidths in bytes per ns (= GB/s).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkSpec {
    /// Target name.
    pub name: &'static str,
    /// Logical NeuronCores (mesh devices) per chip.
    pub devices_per_chip: usize,
    /// Chips per node (instance).
    pub chips_per_node: usize,
    /// How the chips of a node are connected.
    pub fabric: Fabric,
    /// Bandwidth of one chip-to-chip link, one direction.
    pub link_gbps: f64,
    /// Latency added per chip-to-chip hop, in ns.
    pub hop_ns: f64,
    /// DMA bandwidth of one device (all its DMA engines), which every transfer it sends uses.
    pub dma_gbps: f64,
    /// Fixed cost of a DMA: descriptor setup and semaphore-to-start latency, in ns.
    pub dma_fixed_ns: f64,
    /// DMA throughput while reducing (DMA collective compute), as a fraction of `dma_gbps`.
    pub reduce_fraction: f64,
    /// Inter-node (EFA) bandwidth per device.
    pub node_gbps: f64,
    /// Inter-node point-to-point latency, in ns.
    pub node_ns: f64,
    /// Share of the device's DMA bandwidth a collective's DMA rings move (and reduce) at.
    pub collective_dma_fraction: f64,
    /// Fixed cost of a collective that moves data without reducing it (all_gather,
    /// all_to_all, collective_permute, barrier): runtime setup and the ranks' handshake, in ns.
    pub collective_fixed_ns: f64,
    /// Fixed cost of a reducing collective (all_reduce, reduce_scatter), in ns.
    pub reduction_fixed_ns: f64,
    /// Where each of this target's own constants comes from (hardware.md source keys and
    /// derivations); [`LinkSpec::all_sources`] adds the ones every target shares.
    pub sources: &'static [(&'static str, &'static str)],
}

/// EFA figures: trn2's are the only public per-rank numbers; used for every target.
const EFA_SOURCES: [(&str, &str); 2] = [
    (
        "node_gbps",
        "[E S18] trn2 16 x 200 Gbps EFA = 50 Gbps per rank at LNC=2 = 6.25 GB/s (used for all targets: gap)",
    ),
    ("node_ns", "[A S18] ~15 us per inter-node hop (ib_write_lat)"),
];

/// Share of the DMA bandwidth a collective moves at. Fit [F calibration.md §4]: the 2-rank
/// fp32 all-reduce at 1 GiB (52.8 GiB/s algorithm bandwidth, the large-message asymptote) on
/// trn1, whose two ranks share a chip: the ring moves S/2 each way and reduces S/2 at half
/// rate, 2·S/(f·272 GB/s) = 18.88 ms after the fixed cost, so f = 0.418. The other targets
/// have no published figure and take trn1's share (gap).
const CC_DMA_FRACTION: f64 = 0.418;
/// Fixed cost of a non-reducing collective. Fit [F calibration.md §4]: the 8-rank fp32
/// all-gather of 1 KiB (10 µs p50) less what the link model gives its direct algorithm (the
/// local copy, then the sends to every peer: two DMA starts and two chip hops, 5.6 µs); the
/// 524 KiB all-gather of the same table then lands within 10 % with no further parameter.
/// trn1 figures, taken for every target (gap).
const CC_FIXED_NS: f64 = 4_400.0;
/// Fixed cost of a reducing collective. Fit [F calibration.md §4]: the flat ~58 µs floor of
/// 2-rank fp32 all-reduces up to 64 KiB less the link model's direct step (1.3 µs at 8 B to
/// 3.0 µs at 64 KiB: their mean, 2.2 µs). trn1 figures, taken for every target (gap).
const CC_REDUCTION_FIXED_NS: f64 = 55_800.0;

/// Sources of the collective constants (the same on every target).
const CC_SOURCES: [(&str, &str); 3] = [
    (
        "collective_dma_fraction",
        "[F calibration.md §4] 2-rank fp32 all-reduce 1 GiB on trn1 (52.8 GiB/s): 0.418 of 272 GB/s; other targets: gap",
    ),
    (
        "collective_fixed_ns",
        "[F calibration.md §4] 8-rank fp32 all-gather 1 KiB p50 10 us less the modelled direct step",
    ),
    (
        "reduction_fixed_ns",
        "[F calibration.md §4] 2-rank fp32 all-reduce floor ~58 us less the modelled direct step",
    ),
];

/// Sources shared by several targets' tables.
const HOP_SOURCE: (&str, &str) = ("hop_ns", "[A S18] one Ring hop ~1-2 us: midpoint 1.5 us");
const DMA_FIXED_SOURCE: (&str, &str) = (
    "dma_fixed_ns",
    "[A S5] ~1300 ns descriptor + semaphore-to-start latency",
);
const REDUCE_HALF_SOURCE: (&str, &str) = (
    "reduce_fraction",
    "[E S3] DMA reductions at 50% of DMA throughput before NC-v4",
);

const TRN1: LinkSpec = LinkSpec {
    name: "trn1",
    devices_per_chip: 2,
    chips_per_node: 16,
    fabric: Fabric::Torus(4, 4),
    link_gbps: 96.0,
    hop_ns: 1500.0,
    dma_gbps: 16.0 * 17.0,
    dma_fixed_ns: 1300.0,
    reduce_fraction: 0.5,
    node_gbps: 6.25,
    node_ns: 15_000.0,
    collective_dma_fraction: CC_DMA_FRACTION,
    collective_fixed_ns: CC_FIXED_NS,
    reduction_fixed_ns: CC_REDUCTION_FIXED_NS,
    sources: &[
        (
            "devices_per_chip",
            "[E S1,S8] 2 NeuronCore-v2 per Trainium chip (LNC=1)",
        ),
        ("chips_per_node", "[E S9] trn1.32xl: 16 chips"),
        ("fabric", "[E S9 image] 4x4 2D torus, 4 links per chip"),
        (
            "link_gbps",
            "[D S9] 384 GB/s per chip / 4 links = 96 GB/s per link",
        ),
        HOP_SOURCE,
        ("dma_gbps", "[E S5,S6] 16 DMA engines x 17 B/ns"),
        DMA_FIXED_SOURCE,
        REDUCE_HALF_SOURCE,
    ],
};

/// trn2: trn1's table but for its own figures (the shared ones have the same sources).
const TRN2: LinkSpec = LinkSpec {
    name: "trn2",
    devices_per_chip: 4,
    link_gbps: 256.0,
    dma_gbps: 16.0 * 23.0,
    sources: &[
        (
            "devices_per_chip",
            "[E S10,S12] 8 NC-v3 per chip, LNC=2 default: 4 logical cores",
        ),
        ("chips_per_node", "[E S10] trn2.48xl: 16 chips"),
        ("fabric", "[E S10] 4x4 2D torus"),
        (
            "link_gbps",
            "[D S10] 1,024 GB/s per chip intra-instance / 4 torus links = 256 GB/s",
        ),
        HOP_SOURCE,
        ("dma_gbps", "[E S5,S6] 16 DMA engines x 23 B/ns = 368 GB/s"),
        DMA_FIXED_SOURCE,
        REDUCE_HALF_SOURCE,
    ],
    ..TRN1
};

/// trn3: trn2's table but for its own figures.
const TRN3: LinkSpec = LinkSpec {
    name: "trn3",
    fabric: Fabric::Switched,
    dma_gbps: 16.0 * 33.0,
    reduce_fraction: 1.0,
    sources: &[
        (
            "devices_per_chip",
            "[D S11,S12] 8 NC-v4 per chip, taken as LNC=2 like trn2: 4",
        ),
        (
            "chips_per_node",
            "[D] 16 chips per switch domain, as trn2 (no public trn3 figure)",
        ),
        ("fabric", "[E S11] PCIe Gen6 switched fabric"),
        (
            "link_gbps",
            "[E S11] 256 GB/s per chip intra-server (4 x Gen6 x8)",
        ),
        (
            "hop_ns",
            "[A S18] ~1-2 us per hop: midpoint 1.5 us (trn2 figure)",
        ),
        ("dma_gbps", "[E S5,S6] 16 DMA engines x 33 B/ns"),
        DMA_FIXED_SOURCE,
        (
            "reduce_fraction",
            "[E S3] NC-v4 lifts the 50% DMA-reduction limit",
        ),
    ],
    ..TRN2
};

impl LinkSpec {
    /// Where every constant comes from: the target's own ([`LinkSpec::sources`]), then the
    /// inter-node (EFA) and collective figures every target shares.
    pub fn all_sources(&self) -> impl Iterator<Item = &(&'static str, &'static str)> {
        self.sources.iter().chain(&EFA_SOURCES).chain(&CC_SOURCES)
    }
}

/// The link constants of `target`: its built-in table, or the one standing in for it while
/// a [`with_link_specs`] call runs.
pub fn link_spec(target: Target) -> &'static LinkSpec {
    LINK_STAND_INS.get(target).unwrap_or(match target {
        Target::Trn1 => &TRN1,
        Target::Trn2 => &TRN2,
        Target::Trn3 => &TRN3,
    })
}

/// The tables standing in for the built-in [`LinkSpec`]s.
static LINK_STAND_INS: StandIns<LinkSpec> = StandIns::new();

/// Runs `f` with each `(target, spec)` pair's link constants standing in for that target's
/// built-in ones: every [`link_spec`] call of the process (so every mesh launch without its
/// own [`Topology`]) sees them until `f` returns or unwinds. As
/// [`with_target_specs`](crate::with_target_specs), whose scope it shares: for calibration
/// studies, process-wide, calls from different threads taking turns; a mesh launch that
/// needs other constants for itself alone takes a [`Topology`].
///
/// ```
/// use nki_core::mesh::{link_spec, with_link_specs};
/// use nki_core::Target;
/// let cheap = nki_core::mesh::LinkSpec { collective_fixed_ns: 0.0, ..*link_spec(Target::Trn1) };
/// let seen = with_link_specs(&[(Target::Trn1, cheap)], || link_spec(Target::Trn1).collective_fixed_ns);
/// assert_eq!(seen, 0.0);
/// assert!(link_spec(Target::Trn1).collective_fixed_ns > 0.0);
/// ```
pub fn with_link_specs<R>(specs: &[(Target, LinkSpec)], f: impl FnOnce() -> R) -> R {
    LINK_STAND_INS.with(specs, f)
}

/// The physical layout a mesh launch is timed on, for what-if studies: a target's link
/// constants ([`link_spec`]), any of them overridden, and the placement of the mesh's devices
/// on NeuronCore slots (slot `s` is on chip `s / devices_per_chip`; without a placement,
/// device `d` sits on slot `d`, as ranks fill chips in order).
///
/// ```
/// use nki_core::mesh::Topology;
/// use nki_core::Target;
/// // trn2 with twice the link bandwidth and the four devices spread over four chips.
/// let t = Topology::of(Target::Trn2)
///     .link_gbps(512.0)
///     .placement(vec![0, 4, 8, 12]);
/// assert_eq!(t.route(0, 1).hops, 1);
/// assert_eq!(t.route(0, 1).gbps, 368.0_f64.min(512.0));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Topology {
    spec: LinkSpec,
    placement: Vec<usize>,
}

/// `name(v)` setters of [`Topology`] that write `v` into the link spec's field `name`.
macro_rules! spec_setters {
    ($($(#[$doc:meta])* $field:ident: $ty:ty;)*) => {$(
        $(#[$doc])*
        pub fn $field(mut self, value: $ty) -> Topology {
            self.spec.$field = value;
            self
        }
    )*};
}

impl Topology {
    /// The target's own layout: its link constants, ranks filling chips in order.
    pub fn of(target: Target) -> Topology {
        Topology {
            spec: *link_spec(target),
            placement: Vec::new(),
        }
    }

    /// The link constants in use.
    pub fn spec(&self) -> &LinkSpec {
        &self.spec
    }

    /// Places device `d` on NeuronCore slot `slots[d]` (slots must be distinct).
    pub fn placement(mut self, slots: Vec<usize>) -> Topology {
        self.placement = slots;
        self
    }

    /// Sets the logical NeuronCores per chip.
    pub fn devices_per_chip(mut self, n: usize) -> Topology {
        self.spec.devices_per_chip = n.max(1);
        self
    }

    /// Sets the chips per node.
    pub fn chips_per_node(mut self, n: usize) -> Topology {
        self.spec.chips_per_node = n.max(1);
        self
    }

    spec_setters! {
        /// Sets the chip-to-chip link bandwidth, one direction, in GB/s.
        link_gbps: f64;
        /// Sets the latency per chip-to-chip hop, in ns.
        hop_ns: f64;
        /// Sets a device's DMA bandwidth (all its engines), in GB/s.
        dma_gbps: f64;
        /// Sets the fixed cost of a DMA, in ns.
        dma_fixed_ns: f64;
    }

    /// Sets the inter-node bandwidth per device (GB/s) and latency (ns).
    pub fn inter_node(mut self, gbps: f64, ns: f64) -> Topology {
        self.spec.node_gbps = gbps;
        self.spec.node_ns = ns;
        self
    }

    /// Sets the collectives' fixed costs (non-reducing, reducing), in ns.
    pub fn collective_fixed_ns(mut self, plain: f64, reducing: f64) -> Topology {
        self.spec.collective_fixed_ns = plain;
        self.spec.reduction_fixed_ns = reducing;
        self
    }

    /// The NeuronCore slot of device `d`.
    pub fn slot(&self, d: usize) -> usize {
        self.placement.get(d).copied().unwrap_or(d)
    }

    /// The chip of device `d`.
    pub fn chip(&self, d: usize) -> usize {
        self.spec.chip(self.slot(d))
    }

    /// The route from device `src` to device `dst` (through their slots).
    pub fn route(&self, src: usize, dst: usize) -> Route {
        let (a, b) = (self.slot(src), self.slot(dst));
        let mut r = self.spec.route(a, b);
        // Resources are named by device (DMA engines, EFA share) and by chip (links).
        for res in &mut r.resources {
            match res {
                Resource::Dma(x) | Resource::Efa(x) if *x == a => *x = src,
                _ => {}
            }
        }
        r
    }

    /// Checks the layout for a mesh of `devices` devices: a placement names one distinct
    /// slot per device, and every figure is positive.
    pub fn check(&self, devices: usize) -> crate::error::Result<()> {
        let bad = |m: String| {
            Err(crate::error::NkiError::new(
                crate::error::ErrorKind::InvalidArgument,
                "MeshLaunch::topology",
                m,
            ))
        };
        if !self.placement.is_empty() {
            if self.placement.len() != devices {
                return bad(format!(
                    "the placement names {} slots for a mesh of {devices} devices",
                    self.placement.len()
                ));
            }
            let mut seen = self.placement.clone();
            seen.sort_unstable();
            if let Some(w) = seen.windows(2).find(|w| w[0] == w[1]) {
                return bad(format!(
                    "the placement {:?} puts two devices on slot {}",
                    self.placement, w[0]
                ));
            }
        }
        let s = &self.spec;
        // (field, value, whether zero is allowed)
        for (name, v, zero_ok) in [
            ("link_gbps", s.link_gbps, false),
            ("dma_gbps", s.dma_gbps, false),
            ("node_gbps", s.node_gbps, false),
            ("collective_dma_fraction", s.collective_dma_fraction, false),
            ("reduce_fraction", s.reduce_fraction, false),
            ("hop_ns", s.hop_ns, true),
            ("dma_fixed_ns", s.dma_fixed_ns, true),
            ("node_ns", s.node_ns, true),
            ("collective_fixed_ns", s.collective_fixed_ns, true),
            ("reduction_fixed_ns", s.reduction_fixed_ns, true),
        ] {
            if !(v.is_finite() && (v > 0.0 || (zero_ok && v == 0.0))) {
                let what = if zero_ok { "non-negative" } else { "positive" };
                return bad(format!("{name} must be {what} and finite, got {v}"));
            }
        }
        Ok(())
    }
}

/// A resource a transfer occupies for its duration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    /// The DMA engines of a device (shared with its kernels' DMAs).
    Dma(usize),
    /// The link leaving chip `.0` (global chip index) in direction `.1` (0..4: +x, -x, +y, -y;
    /// 4: switch uplink, 5: switch downlink into the chip).
    Link(usize, u8),
    /// The EFA share of a device.
    Efa(usize),
}

/// The path of one transfer: the resources it holds, its bandwidth and its latency.
#[derive(Clone, Debug, PartialEq)]
pub struct Route {
    /// Resources held while the bytes stream.
    pub resources: Vec<Resource>,
    /// Bottleneck bandwidth in bytes per ns.
    pub gbps: f64,
    /// Fixed latency (DMA start, hops), in ns.
    pub latency_ns: f64,
    /// Chip-to-chip hops crossed.
    pub hops: usize,
    /// Whether the transfer leaves its node.
    pub inter_node: bool,
}

impl LinkSpec {
    /// The chip of a device.
    pub fn chip(&self, device: usize) -> usize {
        device / self.devices_per_chip
    }

    /// The route from device `src` to device `dst`.
    pub fn route(&self, src: usize, dst: usize) -> Route {
        let (ca, cb) = (self.chip(src), self.chip(dst));
        let (na, nb) = (ca / self.chips_per_node, cb / self.chips_per_node);
        let mut r = Route {
            resources: vec![Resource::Dma(src)],
            gbps: self.dma_gbps,
            latency_ns: self.dma_fixed_ns,
            hops: 0,
            inter_node: false,
        };
        if na != nb {
            r.resources.push(Resource::Efa(src));
            r.gbps = r.gbps.min(self.node_gbps);
            r.latency_ns += self.node_ns;
            r.inter_node = true;
            return r;
        }
        if ca == cb {
            return r;
        }
        r.gbps = r.gbps.min(self.link_gbps);
        match self.fabric {
            Fabric::Switched => {
                r.resources.push(Resource::Link(ca, 4));
                r.resources.push(Resource::Link(cb, 5));
                r.hops = 1;
            }
            Fabric::Torus(w, h) => {
                let base = na * self.chips_per_node;
                let (mut x, mut y) = ((ca - base) % w, (ca - base) / w);
                let (tx, ty) = ((cb - base) % w, (cb - base) / w);
                // Half-way round a ring both ways are as short: even chips go forward, odd
                // chips backward, so the traffic of an all-to-all pattern spreads over both
                // directions of the ring's links.
                let step = |from: usize, to: usize, n: usize| -> Option<(bool, usize)> {
                    if from == to {
                        return None;
                    }
                    let fwd = (to + n - from) % n;
                    if fwd < n - fwd || (fwd == n - fwd && ca % 2 == 0) {
                        Some((true, (from + 1) % n))
                    } else {
                        Some((false, (from + n - 1) % n))
                    }
                };
                while let Some((fwd, nx)) = step(x, tx, w) {
                    r.resources
                        .push(Resource::Link(base + y * w + x, if fwd { 0 } else { 1 }));
                    x = nx;
                    r.hops += 1;
                }
                while let Some((fwd, ny)) = step(y, ty, h) {
                    r.resources
                        .push(Resource::Link(base + y * w + x, if fwd { 2 } else { 3 }));
                    y = ny;
                    r.hops += 1;
                }
            }
        }
        r.latency_ns += r.hops as f64 * self.hop_ns;
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_cross_the_torus_the_short_way() {
        let s = link_spec(Target::Trn2);
        // Devices 0..4 share chip 0: DMA only.
        assert_eq!(s.route(0, 3).hops, 0);
        assert_eq!(s.route(0, 3).gbps, 368.0);
        // Chip 0 -> chip 3 wraps around the x ring: one hop.
        let r = s.route(0, 12);
        assert_eq!(r.hops, 1);
        assert_eq!(r.resources[1], Resource::Link(0, 1));
        assert_eq!(r.gbps, 256.0);
        // Chip 0 -> chip 5 (x=1, y=1): two hops.
        assert_eq!(s.route(0, 20).hops, 2);
        // Beyond 16 chips: another node over EFA.
        assert!(s.route(0, 64).inter_node);
        assert_eq!(link_spec(Target::Trn3).route(0, 60).hops, 1);
        for (k, v) in s.all_sources() {
            assert!(v.starts_with('['), "{k} has no source key");
        }
    }
}
