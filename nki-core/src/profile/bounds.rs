//! A kernel's performance bounds in the vocabulary of AWS's profile analysis
//! (aws-neuron/neuron-agentic-development, `references/performance-bounds.md`): the memory
//! bound (bytes moved at the target's DMA peak), the ideal memory bound (each input read once,
//! each output written once), the compute bound (TensorE time of the instructions issued),
//! the ideal compute bound (useful FLOPs at TensorE's peak, fp32 and fp8 adjusted as the
//! profiler's `adjusted_flops`), the perfect-pipeline bound (the larger of memory and
//! compute), the kernel's latency against each, and per-line findings (small DMA
//! descriptors, re-loaded and spilled bytes, matmuls on reduced TensorE tiles, transposes that
//! recur). [`Profile::bounds`] assembles them; the record-only facts behind them are gathered
//! with the profile's rows (`timing::rows`).

use super::findings::{Finding, FindingKind};
use super::summary::Profile;
use super::units::{human_bytes, human_ns};
use crate::target::TargetSpec;
use std::fmt;

/// The target's DMA peak for `cores` NeuronCores, in bytes per ns (= GB/s): each core's DMA
/// engines at their bandwidth (`dma_engines * dma_engine_bytes_per_ns`), capped by the HBM
/// stacks the cores sit on (`ncs_per_hbm_stack` cores share one stack's `hbm_bytes_per_ns`).
/// On trn2 that is 16 x 23 = 368 GB/s for one core; the profiler's metadata quotes 435 GB/s
/// (`dma_ddr_bandwidth`), which the model's DMA engines never reach, so the model's own peak
/// is the bound its latencies are held against.
pub fn dma_peak_bytes_per_ns(spec: &TargetSpec, cores: usize) -> f64 {
    let cores = cores.max(1);
    let engines = cores as f64 * spec.dma_engines as f64 * spec.dma_engine_bytes_per_ns;
    let stacks = cores.div_ceil(spec.ncs_per_hbm_stack.max(1)) as f64;
    engines.min(stacks * spec.hbm_bytes_per_ns)
}

/// One bound of [`PerformanceBounds::table`]: its name, its time and the kernel's latency
/// against it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct BoundRow {
    /// AWS's name (`memory_bound`, `memory_bound_ideal`, `compute_bound`,
    /// `compute_bound_ideal`, `perfect_pipeline`).
    pub name: &'static str,
    /// The bound, in ns.
    pub ns: f64,
    /// The bound over the kernel's active time, in percent (100 % = the kernel runs at the
    /// bound).
    pub percent_of_active: f64,
}

/// A kernel's performance bounds (see the module docs): what the latency could at best be
/// given the bytes it moves and the matmuls it issues, and given only what it must read,
/// write and compute.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PerformanceBounds {
    /// The kernel's active time (first instruction to last; the pre/postamble is not part of
    /// any bound), in ns.
    pub active_ns: f64,
    /// DMA peak of the launch's NeuronCores, in GB/s (`dma_peak_bytes_per_ns`).
    pub dma_peak_gbps: f64,
    /// Bytes all DMAs move.
    pub bytes_moved: u64,
    /// Bytes an ideal kernel moves: the distinct bytes read of each HBM tensor it reads before
    /// writing, plus the distinct bytes written of each HBM tensor it writes and does not read
    /// back (each tensor's span touched, lowest to highest byte, at most the bytes its DMAs
    /// move).
    pub bytes_ideal: u64,
    /// TensorE FLOPs of the matmuls (transposes left out), weighted as the profiler's
    /// `adjusted_flops` (`adjusted_flops_factor`).
    pub useful_flops_adjusted: f64,
    /// TensorE peak of the launch's NeuronCores, in TFLOPS (`2 * rows * cols * clock`).
    pub tensor_peak_tflops: f64,
    /// `bytes_moved` at the DMA peak, in ns: the larger of the busiest core's bytes at one
    /// core's peak and all bytes at the launch's peak (cores on one HBM stack share its
    /// bandwidth), so never below the ideal bound.
    pub memory_bound_ns: f64,
    /// `bytes_ideal` at the launch's DMA peak, in ns.
    pub memory_bound_ideal_ns: f64,
    /// TensorE time of the matmuls and transposes issued (each MultiplyMoving at the cost
    /// model's cycles, no throttling), on the busiest core, in ns.
    pub compute_bound_ns: f64,
    /// `useful_flops_adjusted` at the launch's TensorE peak, in ns.
    pub compute_bound_ideal_ns: f64,
    /// The larger of `memory_bound_ns` and `compute_bound_ns`: the latency of a perfectly
    /// pipelined kernel issuing the same instructions.
    pub perfect_pipeline_ns: f64,
    /// The bounds with the active time against each, in the order above.
    pub table: Vec<BoundRow>,
    /// Per-line findings, by kind, then most bytes / instructions first.
    pub findings: Vec<Finding>,
}

impl PerformanceBounds {
    /// The row named `name` of [`PerformanceBounds::table`].
    pub fn row(&self, name: &str) -> Option<&BoundRow> {
        self.table.iter().find(|r| r.name == name)
    }

    /// The findings of kind `kind`.
    pub fn of_kind(&self, kind: FindingKind) -> impl Iterator<Item = &Finding> + '_ {
        self.findings.iter().filter(move |f| f.kind == kind)
    }
}

impl fmt::Display for PerformanceBounds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The compute rows only for a kernel that issued TensorE work: for any other they
        // are zero and say nothing (the JSON keeps them).
        let computes = self.compute_bound_ns > 0.0 || self.useful_flops_adjusted > 0.0;
        write!(
            f,
            "  bounds (active {}; DMA peak {:.0} GB/s",
            human_ns(self.active_ns),
            self.dma_peak_gbps
        )?;
        if computes {
            write!(f, ", TensorE peak {:.1} TFLOPS", self.tensor_peak_tflops)?;
        }
        writeln!(f, "):")?;
        let shown = |r: &&BoundRow| computes || !r.name.starts_with("compute_bound");
        for r in self.table.iter().filter(shown) {
            let what = match r.name {
                "memory_bound" => format!("{} moved", human_bytes(self.bytes_moved as f64)),
                "memory_bound_ideal" => {
                    format!("{} read/written once", human_bytes(self.bytes_ideal as f64))
                }
                "compute_bound" => "TensorE instructions issued".to_string(),
                "compute_bound_ideal" => {
                    format!("{:.3} GFLOP adjusted", self.useful_flops_adjusted / 1e9)
                }
                _ => "max(memory, compute)".to_string(),
            };
            writeln!(
                f,
                "    {:<20} {:>11} {:>6.1}% of active  {what}",
                r.name,
                human_ns(r.ns),
                r.percent_of_active
            )?;
        }
        if !self.findings.is_empty() {
            writeln!(f, "  findings:")?;
            for x in self.findings.iter().take(12) {
                writeln!(f, "    {x}")?;
            }
            if self.findings.len() > 12 {
                writeln!(f, "    ... and {} more", self.findings.len() - 12)?;
            }
        }
        Ok(())
    }
}

impl Profile {
    /// The kernel's performance bounds in AWS's vocabulary (memory bound, ideal memory bound,
    /// compute bound, ideal compute bound, perfect pipeline), its active time against each,
    /// and the per-line findings behind them (see [`PerformanceBounds`]). Not to be confused
    /// with the field [`Profile::bounds`], which splits the latency's critical path by what it
    /// was spent on.
    pub fn bounds(&self) -> PerformanceBounds {
        let spec = self.target.spec();
        let facts = &self.bound_facts;
        let cores = self.cores.len().max(1);
        let one_core = dma_peak_bytes_per_ns(spec, 1);
        let all = dma_peak_bytes_per_ns(spec, cores);
        let per_core_flops =
            2.0 * spec.pe_array.0 as f64 * spec.pe_array.1 as f64 * spec.tensor_ghz;
        let busiest_bytes = self.cores.iter().map(|c| c.dma_bytes).max().unwrap_or(0);
        let bytes_ideal = facts.ideal_bytes();
        // Each core at its own engines' peak, and all at the launch's (cores on one HBM stack
        // share its bandwidth).
        let memory_bound_ns = (busiest_bytes as f64 / one_core).max(self.dma.bytes as f64 / all);
        let memory_bound_ideal_ns = bytes_ideal as f64 / all;
        let compute_bound_ns = facts.tensor_ns.iter().copied().fold(0.0, f64::max);
        let compute_bound_ideal_ns = facts.useful_flops / (per_core_flops * cores as f64);
        let perfect_pipeline_ns = memory_bound_ns.max(compute_bound_ns);
        let pct = |ns: f64| {
            if self.active_ns > 0.0 {
                100.0 * ns / self.active_ns
            } else {
                0.0
            }
        };
        let table = [
            ("memory_bound", memory_bound_ns),
            ("memory_bound_ideal", memory_bound_ideal_ns),
            ("compute_bound", compute_bound_ns),
            ("compute_bound_ideal", compute_bound_ideal_ns),
            ("perfect_pipeline", perfect_pipeline_ns),
        ]
        .into_iter()
        .map(|(name, ns)| BoundRow {
            name,
            ns,
            percent_of_active: pct(ns),
        })
        .collect();
        let mut findings = facts.findings();
        for s in &self.spills.lines {
            findings.push(Finding {
                kind: FindingKind::Spilled,
                location: s.line.to_string(),
                api: s.kind.name(),
                count: s.count,
                bytes: s.bytes,
                detail: s.tile.clone(),
            });
        }
        findings.sort_by(|a, b| {
            a.kind
                .cmp(&b.kind)
                .then(b.bytes.cmp(&a.bytes))
                .then(b.count.cmp(&a.count))
                .then(a.location.cmp(&b.location))
        });
        PerformanceBounds {
            active_ns: self.active_ns,
            dma_peak_gbps: all,
            bytes_moved: self.dma.bytes,
            bytes_ideal,
            useful_flops_adjusted: facts.useful_flops,
            tensor_peak_tflops: per_core_flops * cores as f64 / 1e3,
            memory_bound_ns,
            memory_bound_ideal_ns,
            compute_bound_ns,
            compute_bound_ideal_ns,
            perfect_pipeline_ns,
            table,
            findings,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dma_peak_is_the_engines_capped_by_the_shared_stack() {
        let trn2 = crate::target::Target::Trn2.spec();
        assert_eq!(dma_peak_bytes_per_ns(trn2, 1), 368.0);
        // Two trn2 cores share one stack's 725 GB/s.
        assert_eq!(dma_peak_bytes_per_ns(trn2, 2), 725.0);
    }
}
