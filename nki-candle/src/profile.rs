//! Modelled device time inside a candle graph: a [`Profiler`] given to ops with
//! [`KernelOp::profiled`](crate::KernelOp::profiled) makes every call of those ops run in
//! simulate mode on the profiler's target (values and modelled timeline from one launch) and
//! keeps, per op, the number of calls, the modelled latency and the engine that bounds it.

use nki_core::prelude::*;
use std::fmt;
use std::sync::{Arc, Mutex};

/// Modelled-time statistics of one op (its forward, or its backward as `"<name>.bwd"`).
#[derive(Clone, Debug)]
pub struct OpStats {
    /// Op name.
    pub op: String,
    /// Calls recorded.
    pub calls: usize,
    /// Summed modelled latency of all calls, in ns.
    pub total_ns: f64,
    /// Modelled latency of the last call, in ns.
    pub last_ns: f64,
    /// Per engine (profiler names: "TensorE", "VectorE", ..., "DMA"): active time summed over
    /// calls, in ns (each call's engine activity summed over its NeuronCores).
    pub engine_active_ns: Vec<(String, f64)>,
    /// The last call's full profile (timeline, source lines, DMA traffic).
    pub last_profile: Profile,
}

impl OpStats {
    fn new(op: &str, p: &Profile) -> OpStats {
        OpStats {
            op: op.to_string(),
            calls: 0,
            total_ns: 0.0,
            last_ns: 0.0,
            engine_active_ns: Vec::new(),
            last_profile: p.clone(),
        }
    }

    fn add(&mut self, p: &Profile) {
        self.calls += 1;
        self.total_ns += p.latency_ns;
        self.last_ns = p.latency_ns;
        for e in &p.engines {
            match self
                .engine_active_ns
                .iter_mut()
                .find(|(n, _)| *n == e.engine)
            {
                Some((_, ns)) => *ns += e.active_ns,
                None => self.engine_active_ns.push((e.engine.clone(), e.active_ns)),
            }
        }
        self.last_profile = p.clone();
    }

    /// Mean modelled latency per call, in ns.
    pub fn mean_ns(&self) -> f64 {
        self.total_ns / self.calls.max(1) as f64
    }

    /// The engine busiest over all calls (the bottleneck) and its active time as a percentage
    /// of the summed latency; `None` before any instruction ran.
    pub fn bottleneck(&self) -> Option<(&str, f64)> {
        let (name, ns) = self
            .engine_active_ns
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))?;
        let cores = self.last_profile.cores.len().max(1) as f64;
        Some((
            name.as_str(),
            100.0 * ns / (self.total_ns * cores).max(f64::MIN_POSITIVE),
        ))
    }
}

/// Collects modelled device time of the ops it is given to. Cloning shares the collection.
#[derive(Clone, Debug)]
pub struct Profiler {
    target: Target,
    stats: Arc<Mutex<Vec<OpStats>>>,
}

impl Profiler {
    /// A profiler modelling `target` (trn1, trn2, trn3).
    pub fn new(target: Target) -> Profiler {
        Profiler {
            target,
            stats: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// The target the ops are modelled on.
    pub fn target(&self) -> Target {
        self.target
    }

    /// Statistics of every op seen so far, in order of first call.
    pub fn stats(&self) -> Vec<OpStats> {
        self.lock().clone()
    }

    /// Statistics of op `name` (`"<name>.bwd"` for its backward kernel).
    pub fn op(&self, name: &str) -> Option<OpStats> {
        self.lock().iter().find(|s| s.op == name).cloned()
    }

    /// Forgets all statistics.
    pub fn reset(&self) {
        self.lock().clear();
    }

    /// Adds one call of op `name` with its modelled profile.
    pub(crate) fn record(&self, name: &str, p: &Profile) {
        let mut stats = self.lock();
        let index = match stats.iter().position(|s| s.op == name) {
            Some(i) => i,
            None => {
                stats.push(OpStats::new(name, p));
                stats.len() - 1
            }
        };
        stats[index].add(p);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<OpStats>> {
        self.stats.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl fmt::Display for Profiler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stats = self.stats();
        writeln!(f, "modelled device time on {}", self.target)?;
        writeln!(
            f,
            "  {:<24} {:>6} {:>12} {:>12}  bottleneck",
            "op", "calls", "mean", "total"
        )?;
        for s in &stats {
            let bound = s
                .bottleneck()
                .map(|(e, pct)| format!("{e} ({pct:.0}% active)"))
                .unwrap_or_else(|| "-".into());
            writeln!(
                f,
                "  {:<24} {:>6} {:>9.2} us {:>9.2} us  {bound}",
                s.op,
                s.calls,
                s.mean_ns() / 1e3,
                s.total_ns / 1e3
            )?;
        }
        Ok(())
    }
}
