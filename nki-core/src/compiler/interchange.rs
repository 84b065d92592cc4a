//! Loop interchange, a transformation of the `compiler` stage
//! (`CompilerStage::interchange`): an `affine_range` loop whose every iteration runs a
//! sequential loop (a `sequential_range` or a Python `range`, which Beta 1 turns into one)
//! runs one step of that sequential loop for all of its iterations before the next step —
//! the parallel loop distributed over its body and moved inside the sequential one:
//! `for j (affine) { pre; for k (seq) { body }; post }` becomes `for j { pre }; for k {
//! for j { body } }; for j { post }`. `affine_range` declares the iterations independent
//! (nki.language.affine_range: no loop-carried dependency), so any interleaving of whole
//! iterations' statements that keeps each iteration's own order is legal; the sequential
//! loop's order is kept.
//!
//! The records do not mark a sequential loop; its signature is an iteration of the affine
//! loop whose body runs the same statements (child loops of the same source lines, or
//! records of the same lines) two or more times in a row, as the fusion pass reads it too
//! (`compiler::fuse`: two activations of one loop statement inside one iteration).
//!
//! When: only where the interchanged loop then keeps a loop-invariant computation the
//! hoisting (`CompilerStage::hoist_compute`) runs once and whose kept results fit in SBUF
//! (the hoisting's own fit rule, applied per step of the sequential loop); the caller
//! checks that on a trial ([`plans`] gives the candidates, [`apply`] does it). Evidence:
//! the NKIBench lora baseline (calibration.md section 5) transposes its input `x` on TensorE
//! inside a `sequential_range(4)` over chunks of K, inside an `affine_range(12)` over blocks
//! of N. Its counters decompose as x read once by that nest (not 12 times), its transposes
//! (80 MiB, 640 KiB per partition: not hoistable out of the N loop as written, as NKIBench
//! matmul's same-sized lhs^T is not) saved once and re-loaded in 11 of the 12 N blocks, and
//! the rest of the spill traffic symmetric, about 4 saves and 4 re-loads of every N block's
//! K-chunk accumulator (192 MiB in all) plus the low-rank product once: what the program
//! does with the N loop inside the K-chunk loop, where each chunk's x^T (160 KiB per
//! partition, within trn1's 176 KiB) is invariant in the N loop and every N block's
//! accumulator is live across the K chunks. As written, one N block's accumulators
//! (128 KiB) nearly fit beside a chunk's weights and would spill a few tiles per chunk.
//! Counter-evidence for a wider rule: NKIBench matmul (all loops affine) keeps its N loop
//! outside (lhs read 12 times), and the matmul tutorials' blocked versions, whose sequential
//! K loop holds no invariant computation (only loads), are not changed here.

use crate::compiler::fuse::{reorder, with_frame, Act};
use crate::error::SourceLoc;
use crate::record::Instr;

/// One affine loop activation to interchange with the sequential loop of its iterations.
pub(crate) struct Plan {
    /// The activation and its depth in the records' positions.
    act: u32,
    depth: usize,
    /// Its records.
    start: usize,
    end: usize,
    /// Per iteration, the record ranges of its segments: before the sequential loop, each
    /// step of it, after it.
    segments: Vec<Vec<(usize, usize)>>,
    /// The line of the first statement of the sequential loop's body.
    body: SourceLoc,
    /// Steps of the sequential loop.
    pub(crate) steps: usize,
}

/// What one statement of an iteration's body is: a child loop (its line) or a record (its
/// line), and its records.
#[derive(Clone, Copy)]
struct Unit {
    key: (bool, SourceLoc),
    act: Option<u32>,
    start: usize,
    end: usize,
}

/// The statements of `records[start..end]` (one iteration of a loop at `depth`).
fn units(
    records: &[Instr],
    loops: &[SourceLoc],
    depth: usize,
    start: usize,
    end: usize,
) -> Vec<Unit> {
    let mut out: Vec<Unit> = Vec::new();
    for (i, r) in records.iter().enumerate().take(end).skip(start) {
        let child = r.affine.frames().get(depth + 1).map(|f| f.0);
        match (child, out.last_mut()) {
            (Some(c), Some(u)) if u.act == Some(c) => u.end = i + 1,
            _ => out.push(Unit {
                key: match child {
                    Some(c) => (true, loops.get(c as usize).copied().unwrap_or(r.loc)),
                    None => (false, r.loc),
                },
                act: child,
                start: i,
                end: i + 1,
            }),
        }
    }
    out
}

/// The sequential loop in a body's statement keys: the first statement that repeats, the
/// period (statements per step) and the steps (at least two).
fn sequential(keys: &[(bool, SourceLoc)]) -> Option<(usize, usize, usize)> {
    for p0 in 0..keys.len() {
        let Some(q) = keys[p0 + 1..].iter().position(|k| *k == keys[p0]) else {
            continue;
        };
        let period = q + 1;
        let step = &keys[p0..p0 + period];
        let mut steps = 1;
        while keys
            .get(p0 + steps * period..p0 + (steps + 1) * period)
            .is_some_and(|s| s == step)
        {
            steps += 1;
        }
        if steps >= 2 {
            return Some((p0, period, steps));
        }
    }
    None
}

/// The affine loop activations of `records` (`acts`, from `compiler::fuse::activations`;
/// activation `a` began at `loops[a]`) whose iterations all run the same sequential loop, and
/// whose sequential body holds a record `worth` accepts (something the hoisting could run
/// once), innermost first.
pub(crate) fn plans(
    records: &[Instr],
    acts: &[Act],
    loops: &[SourceLoc],
    worth: impl Fn(&Instr) -> bool,
) -> Vec<Plan> {
    let mut out = Vec::new();
    for a in acts {
        let (id, depth, start, end, n, runs) = a.parts();
        if n < 2 || runs != n {
            continue;
        }
        // The first iteration's statements first: most loops hold no sequential loop with
        // something to hoist, and the other iterations need not be looked at.
        let iteration = |i: usize| records[i].affine.frames()[depth].1;
        if iteration(start) != 0 {
            continue;
        }
        let first_end = (start..end).find(|&i| iteration(i) != 0).unwrap_or(end);
        let first = units(records, loops, depth, start, first_end);
        let keys: Vec<(bool, SourceLoc)> = first.iter().map(|u| u.key).collect();
        let Some((p0, period, steps)) = sequential(&keys) else {
            continue;
        };
        let seq = &first[p0..p0 + period * steps];
        let hoistable = seq
            .iter()
            .any(|u| records[u.start..u.end].iter().any(&worth));
        if !hoistable {
            continue;
        }
        // The iterations' record ranges, in order.
        let mut iters: Vec<(usize, usize)> = Vec::new();
        for i in start..end {
            let it = iteration(i);
            let seen = iters.len();
            if seen > 0 && it as usize == seen - 1 {
                iters[seen - 1].1 = i + 1;
            } else if it as usize == seen {
                iters.push((i, i + 1));
            } else {
                break;
            }
        }
        if iters.len() != n as usize || iters.last().map(|r| r.1) != Some(end) {
            continue;
        }
        let bodies: Vec<Vec<Unit>> = iters
            .iter()
            .map(|&(s, e)| units(records, loops, depth, s, e))
            .collect();
        let same = bodies
            .iter()
            .all(|b| b.len() == keys.len() && b.iter().zip(&keys).all(|(u, k)| u.key == *k));
        if !same {
            continue;
        }
        let range = |b: &[Unit], from: usize, to: usize| match (b.get(from), to.checked_sub(1)) {
            (Some(f), Some(l)) if from < to => (f.start, b[l].end),
            _ => (0, 0),
        };
        let segments = bodies
            .iter()
            .map(|b| {
                let mut s = vec![range(b, 0, p0)];
                for k in 0..steps {
                    s.push(range(b, p0 + k * period, p0 + (k + 1) * period));
                }
                s.push(range(b, p0 + steps * period, b.len()));
                s
            })
            .collect();
        out.push(Plan {
            act: id,
            depth,
            start,
            end,
            segments,
            body: keys[p0].1,
            steps,
        });
    }
    out.sort_by_key(|p| std::cmp::Reverse(p.depth));
    out
}

impl Plan {
    /// The loop's line and the line of the first statement of the sequential body.
    pub(crate) fn lines(&self, loops: &[SourceLoc]) -> (Option<SourceLoc>, SourceLoc) {
        (loops.get(self.act as usize).copied(), self.body)
    }
}

/// Interchanges each plan of `plans` (from [`plans`] on these records, innermost first):
/// segment by segment, the records of every iteration, each segment a new activation whose
/// line (appended to `loops`) is the loop's. Returns, per plan, its new activations. The
/// indices in `marks` follow as `compiler::fuse` moves them.
pub(crate) fn apply(
    records: &mut Vec<Instr>,
    plans: &[Plan],
    loops: &mut Vec<SourceLoc>,
    marks: &mut [usize],
) -> Vec<Vec<u32>> {
    let mut made = Vec::with_capacity(plans.len());
    for p in plans {
        let line = loops.get(p.act as usize).copied();
        let nseg = p.segments[0].len();
        let mut ids = Vec::with_capacity(nseg);
        let mut order: Vec<usize> = (0..p.start).collect();
        for s in 0..nseg {
            if p.segments.iter().all(|seg| seg[s].0 == seg[s].1) {
                continue;
            }
            let id = loops.len() as u32;
            loops.push(line.unwrap_or(records[p.start].loc));
            ids.push(id);
            let mut last = None;
            for (j, seg) in p.segments.iter().enumerate() {
                let (from, to) = seg[s];
                for (i, r) in records.iter_mut().enumerate().take(to).skip(from) {
                    r.affine = with_frame(&r.affine, p.depth, (id, j as u32), &mut last);
                    order.push(i);
                }
            }
        }
        order.extend(p.end..records.len());
        reorder(records, &order, marks);
        made.push(ids);
    }
    made
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequential_loop_is_the_first_run_of_repeated_statements() {
        let k = |line: u32| {
            let file = "k.rs";
            (
                true,
                SourceLoc {
                    file,
                    line,
                    column: 1,
                },
            )
        };
        assert_eq!(sequential(&[k(1), k(2), k(1), k(2), k(3)]), Some((0, 2, 2)));
        assert_eq!(
            sequential(&[k(9), k(1), k(2), k(1), k(2), k(1), k(2)]),
            Some((1, 2, 3))
        );
        assert_eq!(sequential(&[k(1), k(2), k(1), k(3)]), None);
        assert_eq!(sequential(&[k(1), k(2), k(3)]), None);
    }
}
