//! What to try next, read off a profile: for each kind of time that takes a large share of
//! the critical path ([`Profile::bounds`](super::summary::Profile) split), the lever that
//! shortens it, with the findings and figures behind it; and why the cores of a launch end at
//! different times. [`Profile::advice`] assembles it; `Display` of a profile prints it.

use super::findings::FindingKind;
use super::summary::{Bound, CoreProfile, Profile};
use super::units::{human_bytes, human_ns};
use crate::record::Engine;
use std::fmt;

/// A share of the latency (in percent) from which a kind of time gets its advice.
const NOTABLE_PERCENT: f64 = 20.0;

/// The pre/postamble's share of the latency (in percent) from which it gets its advice: it
/// is fixed per launch, so only a large share is worth a sentence.
const OVERHEAD_PERCENT: f64 = 40.0;

/// A core that ends this much later than the first core to end (as a fraction of that
/// core's latency) gets its difference explained.
const CORE_SPREAD: f64 = 0.05;

/// What a piece of [`Advice`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum AdviceKind {
    /// DMA fixed costs take much of the critical path: DMAs too small or too many.
    DmaFixedCost,
    /// DMA bandwidth takes much of the critical path.
    DmaBandwidth,
    /// An engine's computing takes much of the critical path.
    EngineBusy,
    /// Engines wait for each other's results.
    DependencyStalls,
    /// The launch's fixed pre/postamble is much of its latency.
    LaunchOverhead,
    /// A core ends later than another.
    CoreImbalance,
}

/// One next step: what takes the time, why, and the lever that shortens it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Advice {
    /// What the advice is about.
    pub kind: AdviceKind,
    /// The advice in words, with the figures behind it.
    pub message: String,
}

impl fmt::Display for Advice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl Profile {
    /// What to try next: one piece of advice for each kind of time with a large share of the
    /// critical path (DMA fixed cost, DMA bandwidth, an engine, dependency stalls: 20 % or
    /// more; the pre/postamble: 40 % or more), largest first, then one for each core that
    /// ends more than 5 % after the first (what its critical path waited for). Empty for a
    /// kernel with nothing notable.
    ///
    /// ```
    /// use nki_core::prelude::*;
    /// use nki_core::AdviceKind;
    ///
    /// #[nki_kernel(nki = "0.7")]
    /// fn double(x: &Hbm<f32>) -> Hbm<f32> {
    ///     let out = nl::ndarray(x.shape(), x.dtype(), nl::shared_hbm);
    ///     for i in nl::affine_range(x.shape()[0] / 128) {
    ///         let rows = i * 128..i * 128 + 128;
    ///         let t = nl::ndarray(&[128, 256], x.dtype(), nl::sbuf);
    ///         let y = nl::ndarray(&[128, 256], x.dtype(), nl::sbuf);
    ///         nisa::dma_copy(&t, x.slice((rows.clone(), 0..256)), None);
    ///         nisa::tensor_tensor(&y, &t, &t, nl::AluOp::Add, None);
    ///         nisa::dma_copy(out.slice((rows, 0..256)), &y, None);
    ///     }
    ///     out
    /// }
    ///
    /// let x = Hbm::<f32>::shape_only([4096, 256]);
    /// let (_, profile) = double::estimate(1, Target::Trn2, &x).unwrap();
    /// // Rows of 1 KiB: each DMA pays its fixed cost for little data.
    /// let advice = profile.advice();
    /// assert!(advice.iter().any(|a| a.kind == AdviceKind::DmaFixedCost), "{profile}");
    /// ```
    pub fn advice(&self) -> Vec<Advice> {
        let mut out = Vec::new();
        for share in &self.bounds {
            let notable = match share.bound {
                Bound::LaunchOverhead => share.percent >= OVERHEAD_PERCENT,
                _ => share.percent >= NOTABLE_PERCENT,
            };
            if !notable {
                continue;
            }
            let pct = share.percent;
            let advice = match share.bound {
                Bound::DmaLatency => self.dma_fixed_cost_advice(pct),
                Bound::DmaBandwidth => self.dma_bandwidth_advice(pct),
                Bound::Engine(e) => self.engine_advice(e, pct),
                Bound::DependencyStall => Advice {
                    kind: AdviceKind::DependencyStalls,
                    message: format!(
                        "{pct:.0}% of the latency is engines waiting for each other's results: \
                         let the next tile's loads overlap this tile's compute (tiles allocated \
                         inside an affine_range loop get a buffer per iteration), and split long \
                         chains of dependent instructions"
                    ),
                },
                Bound::LaunchOverhead => Advice {
                    kind: AdviceKind::LaunchOverhead,
                    message: format!(
                        "{pct:.0}% of the latency is the launch's fixed pre/postamble ({}): more \
                         work per launch amortises it",
                        human_ns(self.launch_overhead_ns)
                    ),
                },
            };
            out.push(advice);
        }
        out.extend(self.core_advice());
        out
    }

    /// DMA fixed costs: the DMAs' sizes and descriptors, and the lever (fewer, larger DMAs).
    fn dma_fixed_cost_advice(&self, pct: f64) -> Advice {
        let bounds = self.bounds();
        let small: Vec<_> = bounds
            .findings
            .iter()
            .filter(|f| f.kind == FindingKind::SmallDescriptors)
            .collect();
        let spec = self.target.spec();
        let mut message = format!(
            "{pct:.0}% of the latency is DMA fixed cost: {} DMAs move {} each on average, and \
             each pays a fixed cost (at least {} on the DMA engines) whatever its size",
            self.dma.count,
            human_bytes(self.dma.average_bytes),
            human_ns(spec.dma_min_transfer_ns)
        );
        if let Some(worst) = small.first() {
            let n: usize = small.iter().map(|f| f.count).sum();
            message += &format!(
                "; {n} of them move rows under {} KiB per partition ({} {}: {})",
                super::findings::EFFICIENT_DESCRIPTOR_BYTES / 1024,
                worst.location,
                worst.api,
                worst.detail
            );
        }
        message += ". Fewer, larger DMAs amortise it: wider tiles (rows of 4 KiB or more per \
                    partition) or more rows per transfer";
        Advice {
            kind: AdviceKind::DmaFixedCost,
            message,
        }
    }

    /// DMA bandwidth: bytes moved against the bytes the kernel must move.
    fn dma_bandwidth_advice(&self, pct: f64) -> Advice {
        let b = self.bounds();
        let extra = b.bytes_moved.saturating_sub(b.bytes_ideal);
        let message = if b.bytes_moved > 0 && extra as f64 > 0.2 * b.bytes_moved as f64 {
            let reload = b
                .findings
                .iter()
                .find(|f| matches!(f.kind, FindingKind::Reloaded | FindingKind::Spilled));
            let mut m = format!(
                "{pct:.0}% of the latency is DMA bandwidth, and {} of the {} moved is more \
                 than the kernel must move ({} read and written once): keep tiles on chip \
                 across iterations instead of loading them again",
                human_bytes(extra as f64),
                human_bytes(b.bytes_moved as f64),
                human_bytes(b.bytes_ideal as f64)
            );
            if let Some(f) = reload {
                m += &format!(" (most at {} {}: {})", f.location, f.api, f.detail);
            }
            m
        } else {
            format!(
                "{pct:.0}% of the latency is DMA bandwidth, and the kernel moves about what it \
                 must ({} at {:.0} GB/s; the peak is {:.0} GB/s): it is memory-bound, and only \
                 moving less (narrower dtypes, fusing with the kernels around it) makes it faster",
                human_bytes(b.bytes_moved as f64),
                self.dma.hbm_gbps,
                b.dma_peak_gbps
            )
        };
        Advice {
            kind: AdviceKind::DmaBandwidth,
            message,
        }
    }

    /// An engine computing: its busiest line, and for TensorE the reduced tiles.
    fn engine_advice(&self, e: Engine, pct: f64) -> Advice {
        let mut message = format!("{pct:.0}% of the latency is {} computing", e.name());
        if let Some(l) = self.top_lines.iter().find(|l| l.engine == e.name()) {
            message += &format!(
                "; its line with the most critical-path time is {} {}",
                l.location, l.api
            );
        }
        if e == Engine::Tensor {
            let b = self.bounds();
            if let Some(f) = b
                .findings
                .iter()
                .find(|f| f.kind == FindingKind::ReducedTensorTile)
            {
                message += &format!(
                    ". {} matmuls at {} use reduced tiles ({}): a reduced tile costs nearly a \
                     full one, so contractions and stationary widths of 128 do more per \
                     instruction",
                    f.count, f.location, f.detail
                );
            } else {
                message += &format!(
                    " at {:.1}% MFU: TensorE is the bottleneck, as a matmul-heavy kernel's \
                     should be",
                    self.mfu_percent
                );
            }
        } else {
            message += ": move work to an idle engine, or use the 16-bit dtypes that run it \
                        faster";
        }
        Advice {
            kind: AdviceKind::EngineBusy,
            message,
        }
    }

    /// Each core that ends more than [`CORE_SPREAD`] after the first: what its critical path
    /// waited for.
    fn core_advice(&self) -> Vec<Advice> {
        let Some(first) = self
            .cores
            .iter()
            .filter(|c| c.instances > 0)
            .min_by(|a, b| a.latency_ns.total_cmp(&b.latency_ns))
        else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for c in &self.cores {
            let late = c.latency_ns - first.latency_ns;
            if c.nc == first.nc || late <= CORE_SPREAD * first.latency_ns {
                continue;
            }
            let mut message = format!(
                "nc{} ends {} after nc{} ({} against {})",
                c.nc,
                human_ns(late),
                first.nc,
                human_ns(c.latency_ns),
                human_ns(first.latency_ns)
            );
            let (shared, other) = (c.waits_on_shared_engines_ns, c.waits_on_other_cores_ns);
            if shared + other > 0.0 {
                if shared > 0.0 {
                    message += &format!(
                        ": {} of its critical path waits for other cores' transfers on DMA \
                         engines both use",
                        human_ns(shared)
                    );
                }
                if other > 0.0 {
                    message += &format!(
                        "{} {} waits for other cores' results",
                        if shared > 0.0 { ", and" } else { ":" },
                        human_ns(other)
                    );
                }
            } else if c.instances != first.instances {
                message += &format!(
                    ": it runs {} instances against {}",
                    c.instances, first.instances
                );
            } else if let Some((bound, more, mine, theirs)) = largest_growth(first, c) {
                message += &format!(
                    ": its critical path spends {} more in {bound} ({} against {})",
                    human_ns(more),
                    human_ns(mine),
                    human_ns(theirs)
                );
                if c.nc / self.target.spec().ncs_per_hbm_stack.max(1)
                    == first.nc / self.target.spec().ncs_per_hbm_stack.max(1)
                    && matches!(bound, Bound::DmaLatency | Bound::DmaBandwidth)
                {
                    message += &format!(
                        "; nc{} and nc{} share one HBM stack, whose bandwidth goes to the \
                         transfers in the order they are ready, the lower core first on a tie",
                        first.nc, c.nc
                    );
                }
            }
            out.push(Advice {
                kind: AdviceKind::CoreImbalance,
                message,
            });
        }
        out
    }
}

/// The [`Bound`] whose time on `late`'s critical path exceeds its time on `early`'s the most:
/// the bound, the difference, and the two times (ns).
fn largest_growth(early: &CoreProfile, late: &CoreProfile) -> Option<(Bound, f64, f64, f64)> {
    let time =
        |c: &CoreProfile, b: Bound| c.bounds.iter().find(|s| s.bound == b).map_or(0.0, |s| s.ns);
    late.bounds
        .iter()
        .map(|s| {
            (
                s.bound,
                s.ns - time(early, s.bound),
                s.ns,
                time(early, s.bound),
            )
        })
        .filter(|g| g.1 > 0.0)
        .max_by(|a, b| a.1.total_cmp(&b.1))
}
