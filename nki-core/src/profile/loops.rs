//! Device loops in a profile: from what each instance logged about the `nl::fori_loop` /
//! `nl::while_loop` runs it made, the per-loop summary a profile shows ([`LoopStat`]:
//! iterations, time per iteration, the loop's own per-iteration overhead).

use super::summary::{LoopStat, Profile};
use crate::record::LoopLog;

/// The loop summaries of `profile`, given every loop run with the NeuronCore it ran on and the
/// global index of its instance's first record. Loops are listed by core, then in order of
/// their first run.
pub(crate) fn stats(profile: &Profile, runs: &[(usize, usize, LoopLog)]) -> Vec<LoopStat> {
    if runs.is_empty() {
        return Vec::new();
    }
    let n = profile.ops.len();
    let mut start = vec![f64::INFINITY; n];
    let mut end = vec![f64::NEG_INFINITY; n];
    for s in profile.spans.iter().filter(|s| s.cause.is_none()) {
        let i = s.op as usize;
        if i < n {
            start[i] = start[i].min(s.start_ns);
            end[i] = end[i].max(s.start_ns + s.dur_ns);
        }
    }
    let span = |a: usize, b: usize| -> Option<(f64, f64)> {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for i in a.min(n)..b.min(n) {
            lo = lo.min(start[i]);
            hi = hi.max(end[i]);
        }
        (lo <= hi).then_some((lo, hi))
    };
    let mut out: Vec<LoopStat> = Vec::new();
    for (nc, base, log) in runs {
        let k = match out
            .iter()
            .position(|s| s.nc == *nc && s.loc == log.loc && s.api == log.api)
        {
            Some(k) => k,
            None => {
                out.push(LoopStat {
                    api: log.api,
                    loc: log.loc,
                    nc: *nc,
                    runs: 0,
                    iterations: 0,
                    time_ns: 0.0,
                    ns_per_iteration: 0.0,
                    overhead_ns_per_iteration: 0.0,
                });
                out.len() - 1
            }
        };
        let s = &mut out[k];
        s.runs += 1;
        s.iterations += log.iterations.len() as u64;
        if let (Some(first), Some(last)) = (log.iterations.first(), log.iterations.last()) {
            if let Some((lo, hi)) = span(base + first.0, base + last.2) {
                s.time_ns += hi - lo;
            }
        }
        for &(_, b, e) in &log.iterations {
            let longest = (base + b..base + e)
                .filter(|&i| i < n && end[i] >= start[i])
                .map(|i| end[i] - start[i])
                .fold(0.0f64, f64::max);
            // Summed here, averaged below.
            s.overhead_ns_per_iteration += longest;
        }
    }
    for s in &mut out {
        if s.iterations > 0 {
            s.ns_per_iteration = s.time_ns / s.iterations as f64;
            s.overhead_ns_per_iteration /= s.iterations as f64;
        }
    }
    out.sort_by_key(|s| s.nc);
    out
}
