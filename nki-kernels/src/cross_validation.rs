//! Cross-validation of the timing model's fitted constants: for each family of public
//! calibration points ([`Family`]), every fitted constant is refitted on the other families'
//! points alone, and the left-out family's error under that refit is set beside its error
//! under the refit on every family (in sample).
//!
//! - **What is fitted.** [`CONSTANTS`] lists every constant of the target tables
//!   (`nki_core::TargetSpec`) and link tables (`nki_core::mesh::LinkSpec`) whose source note
//!   says it was fitted on (or derived from) a calibration point, with the family it was
//!   fitted on and its *prior*: the value the model would take without that fit (no such
//!   cost, or the full rate). Every other constant has a published source and stays as it is.
//! - **How a refit runs.** The error of a set of points is the mean of
//!   `|ln(model / published)|` over them. A refit starts from every constant's prior and
//!   runs coordinate descent: each constant in [`CONSTANTS`] order is set to the value of a
//!   fixed grid over its plausible range (its prior included) that minimises the in-sample
//!   error, then refined between its grid neighbours; [`Options::rounds`] passes over all
//!   constants. Ties keep the earlier candidate, so a refit is deterministic. A constant
//!   that moves none of the in-sample points keeps its prior: nothing left in the sample
//!   says anything about it.
//! - **Which points a constant moves** is measured once, before any refit: each family is
//!   modelled with the constant at both ends of its range (the rest as built in); a family
//!   whose modelled figures do not change is not modelled again when that constant moves.
//!   Modelled families are remembered by the values of the constants that move them.
//!
//! The target and link tables are swapped in with `nki_core::with_target_specs` and
//! `nki_core::mesh::with_link_specs`, which act on the whole process: nothing else may
//! launch kernels while [`cross_validate`] runs.

use crate::calibration::{Family, Row};
use nki_core::mesh::{link_spec, with_link_specs, LinkSpec};
use nki_core::{with_target_specs, NkiError, Target, TargetSpec};
use std::collections::HashMap;
use std::fmt;

/// The tables a refit changes: every target's constants and link constants.
#[derive(Clone, Debug, PartialEq)]
pub struct Tables {
    /// Target constants, indexed by `Target as usize`.
    pub specs: [TargetSpec; 3],
    /// Link constants, indexed by `Target as usize`.
    pub links: [LinkSpec; 3],
}

impl Tables {
    /// The built-in tables (as `Target::built_in_spec` and `link_spec` outside any override).
    pub fn built_in() -> Tables {
        Tables {
            specs: Target::ALL.map(|t| t.built_in_spec().clone()),
            links: Target::ALL.map(|t| *link_spec(t)),
        }
    }

    /// Runs `f` with these tables standing in for the built-in ones.
    pub fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        let specs: Vec<(Target, TargetSpec)> = Target::ALL
            .iter()
            .map(|&t| (t, self.specs[t as usize].clone()))
            .collect();
        let links: Vec<(Target, LinkSpec)> = Target::ALL
            .iter()
            .map(|&t| (t, self.links[t as usize]))
            .collect();
        with_target_specs(&specs, || with_link_specs(&links, f))
    }
}

/// The values a refit tries for a constant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Range {
    /// `points` values spaced evenly in log between `lo` and `hi` (rounded to whole numbers
    /// when `whole`), refined between grid neighbours.
    Log {
        /// Smallest value.
        lo: f64,
        /// Largest value.
        hi: f64,
        /// Grid points.
        points: usize,
        /// Whole numbers only (cycle counts).
        whole: bool,
    },
    /// Exactly these values (descriptor lengths: powers of two).
    Values(&'static [f64]),
}

/// One fitted constant: where it lives in the tables, what it was fitted on, its prior.
pub struct Constant {
    /// Field name, with the targets it is set on.
    pub name: &'static str,
    /// The family of points its source note says it was fitted on.
    pub fitted_on: Family,
    /// The value without the fit: no such cost (0) or the full rate (1).
    pub prior: f64,
    /// The values a refit tries.
    pub range: Range,
    /// The targets whose tables it is part of, and whether it is a link constant: the
    /// families modelled on none of them cannot move with it.
    pub targets: &'static [Target],
    /// Whether it lives in the link tables.
    pub link: bool,
    /// Its value in `t`.
    pub get: fn(&Tables) -> f64,
    /// Sets it (on every target that shares it) in `t`.
    pub set: fn(&mut Tables, f64),
}

const ALL_TARGETS: &[Target] = &Target::ALL;
const TRN1: &[Target] = &[Target::Trn1];
const TRN2_UP: &[Target] = &[Target::Trn2, Target::Trn3];
const I_TRN1: usize = Target::Trn1 as usize;
const I_TRN2: usize = Target::Trn2 as usize;
const I_TRN3: usize = Target::Trn3 as usize;
/// Descriptor lengths a short-run bound may take.
const RUN_BYTES: &[f64] = &[256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0];

/// A continuous range of `points` log-spaced values.
const fn log(lo: f64, hi: f64, points: usize) -> Range {
    Range::Log {
        lo,
        hi,
        points,
        whole: false,
    }
}

/// A whole-number range of `points` log-spaced values.
const fn cycles(lo: f64, hi: f64, points: usize) -> Range {
    Range::Log {
        lo,
        hi,
        points,
        whole: true,
    }
}

/// Sets a field of every target's table.
macro_rules! every_spec {
    ($field:ident, $ty:ty) => {
        |t: &mut Tables, v: f64| {
            for s in &mut t.specs {
                s.$field = v as $ty;
            }
        }
    };
}

/// Sets a field of trn2's and trn3's tables (trn3 takes trn2's figure).
macro_rules! trn2_up_spec {
    ($field:ident, $ty:ty) => {
        |t: &mut Tables, v: f64| {
            t.specs[I_TRN2].$field = v as $ty;
            t.specs[I_TRN3].$field = v as $ty;
        }
    };
}

/// Sets a field of every target's link table.
macro_rules! every_link {
    ($field:ident) => {
        |t: &mut Tables, v: f64| {
            for l in &mut t.links {
                l.$field = v;
            }
        }
    };
}

/// trn1's base clock over trn2's: `dma_engine_min_ns` is one count of base-clock cycles
/// (fitted on trn1, taken at trn2's and trn3's clock).
fn trn2_engine_min_scale(t: &Tables) -> f64 {
    t.specs[I_TRN1].base_ghz / t.specs[I_TRN2].base_ghz
}

/// Every fitted constant of the timing model (see each field's source note in
/// `nki_core::TargetSpec` and `nki_core::mesh::LinkSpec`), in the order a refit visits them.
pub const CONSTANTS: &[Constant] = &[
    Constant {
        name: "dependency_latency_cycles (all)",
        fitted_on: Family::MicroBenchmarks,
        prior: 0.0,
        range: cycles(16.0, 800.0, 6),
        targets: ALL_TARGETS,
        link: false,
        get: |t| t.specs[I_TRN1].dependency_latency_cycles as f64,
        set: every_spec!(dependency_latency_cycles, u64),
    },
    Constant {
        name: "dma_min_transfer_ns (all)",
        fitted_on: Family::MicroBenchmarks,
        prior: 0.0,
        range: log(100.0, 4000.0, 6),
        targets: ALL_TARGETS,
        link: false,
        get: |t| t.specs[I_TRN1].dma_min_transfer_ns,
        set: every_spec!(dma_min_transfer_ns, f64),
    },
    Constant {
        name: "launch_overhead_ns (trn1)",
        fitted_on: Family::SmallKernelsTrn1,
        prior: 0.0,
        range: log(1000.0, 60_000.0, 6),
        targets: TRN1,
        link: false,
        get: |t| t.specs[I_TRN1].launch_overhead_ns,
        set: |t, v| t.specs[I_TRN1].launch_overhead_ns = v,
    },
    Constant {
        name: "launch_overhead_ns (trn2, trn3)",
        fitted_on: Family::SmallKernelsTrn2,
        prior: 0.0,
        range: log(1000.0, 60_000.0, 6),
        targets: TRN2_UP,
        link: false,
        get: |t| t.specs[I_TRN2].launch_overhead_ns,
        set: trn2_up_spec!(launch_overhead_ns, f64),
    },
    Constant {
        name: "dma_engine_min_ns (trn1; trn2, trn3 at their clock)",
        fitted_on: Family::SmallKernelsTrn1,
        prior: 0.0,
        range: log(20.0, 1000.0, 6),
        targets: ALL_TARGETS,
        link: false,
        get: |t| t.specs[I_TRN1].dma_engine_min_ns,
        set: |t, v| {
            let trn2 = v * trn2_engine_min_scale(t);
            t.specs[I_TRN1].dma_engine_min_ns = v;
            t.specs[I_TRN2].dma_engine_min_ns = trn2;
            t.specs[I_TRN3].dma_engine_min_ns = trn2;
        },
    },
    Constant {
        name: "dma_partial_write_ns (all)",
        fitted_on: Family::SmallKernelsTrn1,
        prior: 0.0,
        range: log(20.0, 1000.0, 6),
        targets: ALL_TARGETS,
        link: false,
        get: |t| t.specs[I_TRN1].dma_partial_write_ns,
        set: every_spec!(dma_partial_write_ns, f64),
    },
    Constant {
        name: "dma_short_run_efficiency (trn1)",
        fitted_on: Family::MatmulTutorial,
        prior: 1.0,
        range: log(0.1, 1.0, 6),
        targets: TRN1,
        link: false,
        get: |t| t.specs[I_TRN1].dma_short_run_efficiency,
        set: |t, v| t.specs[I_TRN1].dma_short_run_efficiency = v,
    },
    Constant {
        name: "dma_short_run_bytes (trn1)",
        fitted_on: Family::MatmulTutorial,
        prior: 4096.0,
        range: Range::Values(RUN_BYTES),
        targets: TRN1,
        link: false,
        get: |t| t.specs[I_TRN1].dma_short_run_bytes as f64,
        set: |t, v| t.specs[I_TRN1].dma_short_run_bytes = v as u64,
    },
    Constant {
        name: "dma_short_run_efficiency (trn2, trn3)",
        fitted_on: Family::SmallKernelsTrn2,
        prior: 1.0,
        range: log(0.1, 1.0, 6),
        targets: TRN2_UP,
        link: false,
        get: |t| t.specs[I_TRN2].dma_short_run_efficiency,
        set: trn2_up_spec!(dma_short_run_efficiency, f64),
    },
    Constant {
        name: "dma_short_run_bytes (trn2, trn3)",
        fitted_on: Family::SmallKernelsTrn2,
        prior: 1024.0,
        range: Range::Values(&[256.0, 512.0, 1024.0, 2048.0, 4096.0]),
        targets: TRN2_UP,
        link: false,
        get: |t| t.specs[I_TRN2].dma_short_run_bytes as f64,
        set: trn2_up_spec!(dma_short_run_bytes, u64),
    },
    Constant {
        name: "mm_min_cycles (trn2, trn3)",
        fitted_on: Family::Trn2Profiles,
        prior: 0.0,
        range: cycles(32.0, 2048.0, 7),
        targets: TRN2_UP,
        link: false,
        get: |t| t.specs[I_TRN2].mm_min_cycles as f64,
        set: trn2_up_spec!(mm_min_cycles, u64),
    },
    Constant {
        name: "collective_dma_fraction (links)",
        fitted_on: Family::Collectives,
        prior: 1.0,
        range: log(0.1, 1.0, 6),
        targets: ALL_TARGETS,
        link: true,
        get: |t| t.links[I_TRN1].collective_dma_fraction,
        set: every_link!(collective_dma_fraction),
    },
    Constant {
        name: "collective_fixed_ns (links)",
        fitted_on: Family::Collectives,
        prior: 0.0,
        range: log(500.0, 100_000.0, 6),
        targets: ALL_TARGETS,
        link: true,
        get: |t| t.links[I_TRN1].collective_fixed_ns,
        set: every_link!(collective_fixed_ns),
    },
    Constant {
        name: "reduction_fixed_ns (links)",
        fitted_on: Family::Collectives,
        prior: 0.0,
        range: log(2000.0, 200_000.0, 6),
        targets: ALL_TARGETS,
        link: true,
        get: |t| t.links[I_TRN1].reduction_fixed_ns,
        set: every_link!(reduction_fixed_ns),
    },
];

/// The targets whose tables a family is modelled on, and whether it uses the link tables.
fn family_uses(f: Family) -> (&'static [Target], bool) {
    match f {
        Family::MatmulTutorial | Family::SmallKernelsTrn1 | Family::Counters => (TRN1, false),
        Family::MicroBenchmarks => (&[Target::Trn1, Target::Trn2], false),
        Family::SmallKernelsTrn2 | Family::Trn2Profiles => (&[Target::Trn2], false),
        Family::Collectives => (TRN1, true),
    }
}

/// Knobs of [`cross_validate`].
#[derive(Clone, Debug)]
pub struct Options {
    /// The families taking part (each is left out in turn; the others are the sample).
    pub families: Vec<Family>,
    /// Passes of coordinate descent over the constants per refit.
    pub rounds: usize,
    /// Told what is being done as each step starts (the example prints it on stderr).
    pub progress: fn(&str),
}

impl Default for Options {
    /// Every family, two passes, no progress report.
    fn default() -> Options {
        Options {
            families: Family::ALL.to_vec(),
            rounds: 2,
            progress: |_| {},
        }
    }
}

/// The error of one family's points under one set of tables.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FamilyError {
    /// Mean of `|model / published − 1|` over its points, in percent.
    pub mean_percent: f64,
    /// Largest `|model / published − 1|`, in percent.
    pub max_percent: f64,
    /// Points within 20 %.
    pub within_20: usize,
}

impl FamilyError {
    fn of(rows: &[Row]) -> FamilyError {
        let errs: Vec<f64> = rows.iter().map(|r| r.error_percent().abs()).collect();
        FamilyError {
            mean_percent: errs.iter().sum::<f64>() / errs.len().max(1) as f64,
            max_percent: errs.iter().copied().fold(0.0, f64::max),
            within_20: errs.iter().filter(|&&e| e <= 20.0).count(),
        }
    }
}

impl fmt::Display for FamilyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1} / {:.1}", self.mean_percent, self.max_percent)
    }
}

/// One family's line of the cross-validation table.
#[derive(Clone, Debug, PartialEq)]
pub struct FamilyLine {
    /// The family.
    pub family: Family,
    /// Its number of points.
    pub points: usize,
    /// Its error with the built-in tables.
    pub built_in: FamilyError,
    /// Its error with every constant refitted on every family (in sample).
    pub in_sample: FamilyError,
    /// Its error with every constant refitted without it (left out).
    pub left_out: FamilyError,
}

/// One fitted constant's line: its value as built in, refitted on every family, and
/// refitted without the family it was fitted on.
#[derive(Clone, Debug, PartialEq)]
pub struct ConstantLine {
    /// [`Constant::name`].
    pub name: &'static str,
    /// [`Constant::fitted_on`].
    pub fitted_on: Family,
    /// The families whose modelled figures it moves.
    pub moves: Vec<Family>,
    /// Built-in value.
    pub built_in: f64,
    /// Refitted on every family.
    pub refit_all: f64,
    /// Refitted without `fitted_on` (its prior when nothing left moves with it).
    pub refit_without: f64,
}

/// What [`cross_validate`] found.
#[derive(Clone, Debug, PartialEq)]
pub struct CrossValidation {
    /// Per family (left out in turn).
    pub families: Vec<FamilyLine>,
    /// Per fitted constant.
    pub constants: Vec<ConstantLine>,
    /// Families modelled in all (sensitivity probes and refits; remembered ones not counted).
    pub evaluations: usize,
}

/// Memoised family models under changing tables.
struct Evaluator {
    /// Per family, the indices of the constants that move it.
    moved_by: HashMap<Family, Vec<usize>>,
    memo: HashMap<(Family, Vec<u64>), Vec<Row>>,
    evaluations: usize,
}

impl Evaluator {
    /// Family `f`'s points with `values` (one per constant) set in the built-in tables.
    fn rows(&mut self, f: Family, values: &[f64]) -> Result<Vec<Row>, NkiError> {
        let relevant = &self.moved_by[&f];
        let key: Vec<u64> = relevant.iter().map(|&i| values[i].to_bits()).collect();
        if let Some(r) = self.memo.get(&(f, key.clone())) {
            return Ok(r.clone());
        }
        let mut t = Tables::built_in();
        for &i in relevant {
            (CONSTANTS[i].set)(&mut t, values[i]);
        }
        self.evaluations += 1;
        let rows = t.run(|| f.points(None))?;
        self.memo.insert((f, key), rows.clone());
        Ok(rows)
    }

    /// Mean `|ln(model / published)|` over the points of `sample` with `values`.
    fn error(&mut self, sample: &[Family], values: &[f64]) -> Result<f64, NkiError> {
        let (mut sum, mut n) = (0.0, 0usize);
        for &f in sample {
            for r in self.rows(f, values)? {
                sum += log_error(&r);
                n += 1;
            }
        }
        Ok(sum / n.max(1) as f64)
    }
}

/// `|ln(model / published)|` of a row (a zero counter: 0 when modelled as zero).
fn log_error(r: &Row) -> f64 {
    let ratio = 1.0 + r.error_percent() / 100.0;
    ratio.clamp(1e-6, 1e6).ln().abs()
}

/// The grid of `range`.
fn grid(range: Range) -> Vec<f64> {
    match range {
        Range::Values(v) => v.to_vec(),
        Range::Log {
            lo,
            hi,
            points,
            whole,
        } => (0..points)
            .map(|i| {
                let v = lo * (hi / lo).powf(i as f64 / (points - 1).max(1) as f64);
                if whole {
                    v.round()
                } else {
                    v
                }
            })
            .collect(),
    }
}

/// Refits the constants in `free` (the others keep `values`) on `sample` by coordinate
/// descent; returns the refitted values.
fn refit(
    ev: &mut Evaluator,
    sample: &[Family],
    free: &[usize],
    mut values: Vec<f64>,
    rounds: usize,
) -> Result<Vec<f64>, NkiError> {
    for _ in 0..rounds {
        for &i in free {
            let c = &CONSTANTS[i];
            let mut candidates = vec![c.prior];
            candidates.extend(grid(c.range));
            let mut best = (ev.error(sample, &values)?, values[i]);
            let try_value = |ev: &mut Evaluator, v: f64, best: &mut (f64, f64)| {
                let mut trial = values.clone();
                trial[i] = v;
                let e = ev.error(sample, &trial)?;
                if e < best.0 {
                    *best = (e, v);
                }
                Ok::<(), NkiError>(())
            };
            for &v in &candidates {
                try_value(ev, v, &mut best)?;
            }
            // Refine a continuous constant between its grid neighbours: halve the log step
            // three times around the best value so far.
            if let Range::Log {
                lo,
                hi,
                points,
                whole,
            } = c.range
            {
                if best.1 > 0.0 {
                    let mut step = (hi / lo).powf(1.0 / (points - 1).max(1) as f64);
                    for _ in 0..3 {
                        step = step.sqrt();
                        let centre = best.1;
                        for v in [centre / step, centre * step] {
                            let v = if whole { v.round() } else { v };
                            let v = v.clamp(lo.min(c.prior), hi.max(c.prior));
                            try_value(ev, v, &mut best)?;
                        }
                    }
                }
            }
            values[i] = best.1;
        }
    }
    Ok(values)
}

/// Refits every constant without each family of `options` in turn and on all of them, and
/// compares each family's error left out and in sample (see the module doc).
pub fn cross_validate(options: &Options) -> Result<CrossValidation, NkiError> {
    let built_in = Tables::built_in();
    let shipped: Vec<f64> = CONSTANTS.iter().map(|c| (c.get)(&built_in)).collect();
    let families = &options.families;
    // Which families each constant moves: both ends of its range, the rest as built in.
    let mut base = HashMap::new();
    let mut evaluations = 0;
    for &f in families {
        base.insert(f, built_in.run(|| f.points(None))?);
        evaluations += 1;
    }
    let mut moved_by: HashMap<Family, Vec<usize>> =
        families.iter().map(|&f| (f, Vec::new())).collect();
    let mut moves: Vec<Vec<Family>> = vec![Vec::new(); CONSTANTS.len()];
    for &f in families {
        (options.progress)(&format!("which constants move {}", f.name()));
        let (targets, link) = family_uses(f);
        let candidates: Vec<usize> = (0..CONSTANTS.len())
            .filter(|&i| {
                let c = &CONSTANTS[i];
                targets.iter().any(|t| c.targets.contains(t)) && (link || !c.link)
            })
            .collect();
        // Whether `f`'s figures change with the constants `which` at their lowest (`end`
        // 0) or highest values, the rest as built in.
        let mut changes = |which: &[usize]| -> Result<bool, NkiError> {
            let mut changed = false;
            for end in [0, 1] {
                let mut t = built_in.clone();
                for &i in which {
                    let g = grid(CONSTANTS[i].range);
                    (CONSTANTS[i].set)(&mut t, if end == 0 { g[0] } else { g[g.len() - 1] });
                }
                let rows = t.run(|| f.points(None))?;
                evaluations += 1;
                changed |= rows
                    .iter()
                    .zip(&base[&f])
                    .any(|(a, b)| a.model.to_bits() != b.model.to_bits());
            }
            Ok(changed)
        };
        // All together first: a family none of them moves (byte counters) is probed twice.
        if candidates.is_empty() || !changes(&candidates)? {
            continue;
        }
        for i in candidates {
            if changes(&[i])? {
                moved_by.get_mut(&f).expect("family listed").push(i);
                moves[i].push(f);
            }
        }
    }
    let mut ev = Evaluator {
        moved_by,
        memo: HashMap::new(),
        evaluations,
    };
    let priors: Vec<f64> = CONSTANTS.iter().map(|c| c.prior).collect();
    // One refit per sample: every family, then every family but one.
    let fit = |ev: &mut Evaluator, sample: &[Family]| -> Result<Vec<f64>, NkiError> {
        let free: Vec<usize> = (0..CONSTANTS.len())
            .filter(|&i| moves[i].iter().any(|f| sample.contains(f)))
            .collect();
        refit(ev, sample, &free, priors.clone(), options.rounds)
    };
    (options.progress)("refit on every family");
    let all = fit(&mut ev, families)?;
    let mut without = HashMap::new();
    for &left in families {
        (options.progress)(&format!(
            "refit without {} ({} family models so far)",
            left.name(),
            ev.evaluations
        ));
        let sample: Vec<Family> = families.iter().copied().filter(|&f| f != left).collect();
        without.insert(left, fit(&mut ev, &sample)?);
    }
    let mut lines = Vec::new();
    for &f in families {
        let rows_all = ev.rows(f, &all)?;
        let rows_out = ev.rows(f, &without[&f])?;
        lines.push(FamilyLine {
            family: f,
            points: base[&f].len(),
            built_in: FamilyError::of(&base[&f]),
            in_sample: FamilyError::of(&rows_all),
            left_out: FamilyError::of(&rows_out),
        });
    }
    let constants = CONSTANTS
        .iter()
        .enumerate()
        .map(|(i, c)| ConstantLine {
            name: c.name,
            fitted_on: c.fitted_on,
            moves: moves[i].clone(),
            built_in: shipped[i],
            refit_all: all[i],
            refit_without: without.get(&c.fitted_on).map_or(all[i], |v| v[i]),
        })
        .collect();
    Ok(CrossValidation {
        families: lines,
        constants,
        evaluations: ev.evaluations,
    })
}

impl fmt::Display for CrossValidation {
    /// The two tables: per family (errors as mean / max of |model / published − 1| in
    /// percent, and points within 20 %), per constant (values and how far the refit without
    /// its family moves it from the refit on all).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<24} {:>6}  {:>16}  {:>16}  {:>16}  {:>14}",
            "family",
            "points",
            "built-in err %",
            "in-sample err %",
            "left out err %",
            "≤20 %: in/out"
        )?;
        for l in &self.families {
            writeln!(
                f,
                "{:<24} {:>6}  {:>16}  {:>16}  {:>16}  {:>9}/{}",
                l.family.name(),
                l.points,
                l.built_in.to_string(),
                l.in_sample.to_string(),
                l.left_out.to_string(),
                l.in_sample.within_20,
                l.left_out.within_20
            )?;
        }
        writeln!(
            f,
            "\n{:<52} {:<24} {:>10} {:>10} {:>12} {:>8}  moves",
            "fitted constant", "fitted on", "built in", "refit all", "left out", "change"
        )?;
        for c in &self.constants {
            let change = if c.refit_all == 0.0 {
                if c.refit_without == 0.0 {
                    "0 %".to_string()
                } else {
                    "from 0".to_string()
                }
            } else {
                format!("{:+.0} %", (c.refit_without / c.refit_all - 1.0) * 100.0)
            };
            let moves: Vec<&str> = c.moves.iter().map(|f| f.name()).collect();
            writeln!(
                f,
                "{:<52} {:<24} {:>10} {:>10} {:>12} {:>8}  {}",
                c.name,
                c.fitted_on.name(),
                short(c.built_in),
                short(c.refit_all),
                short(c.refit_without),
                change,
                moves.join(", ")
            )?;
        }
        write!(f, "({} family models)", self.evaluations)
    }
}

/// A value for the table: whole from 100 on (and whole numbers), else 4 decimals.
fn short(v: f64) -> String {
    if v == 0.0 || v.abs() >= 100.0 || (v.abs() >= 1.0 && v.fract() == 0.0) {
        format!("{v:.0}")
    } else {
        format!("{v:.4}")
    }
}
