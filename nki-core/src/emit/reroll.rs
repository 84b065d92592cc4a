//! Loops re-rolled from a traced, unrolled kernel: the calls of each iteration of a recorded
//! loop are compared with the other iterations' (the same statements, every number affine
//! in the iteration index, checked on every iteration), and runs of iterations that agree
//! become one `for` loop over an index; where an iteration differs, its calls stay unrolled.
//!
//! Host loops (a Rust `for`, which leaves no loop frame in the trace) are found afterwards
//! from the statements alone ([`roll_repeats`]): a block of statements repeated, each number
//! affine in the repetition, becomes an `nl.static_range` loop (NKI unrolls it when tracing,
//! as it unrolls a Python `range`). [`renumber`] then names every loop index after its
//! nesting level.

/// The "depth" standing for the program id (`pid = nl.program_id(0)`, the core of an LNC=2
/// launch) in an [`Affine`]'s terms: the two cores' statements are re-rolled like two
/// iterations of a loop over it ([`reroll`]).
pub(crate) const PROGRAM_ID: usize = usize::MAX;

/// The Python name of the loop index of depth `depth` (`i<depth>`; `pid` for
/// [`PROGRAM_ID`]).
pub(crate) fn index_name(depth: usize) -> String {
    if depth == PROGRAM_ID {
        "pid".to_string()
    } else {
        format!("i{depth}")
    }
}

/// An integer affine in the loop indices: `c + Σ coeff · i<depth>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Affine {
    /// The constant.
    pub(crate) c: i64,
    /// `(depth of the loop index, coefficient)`, by depth, no zero coefficient.
    pub(crate) terms: Vec<(usize, i64)>,
}

impl Affine {
    /// The constant `c`.
    pub(crate) fn constant(c: i64) -> Affine {
        Affine {
            c,
            terms: Vec::new(),
        }
    }

    /// Python source of the expression (`128 * i0 + 256`).
    pub(crate) fn python(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        for &(d, k) in &self.terms {
            let v = index_name(d);
            let term = match k {
                1 => v,
                -1 => format!("-{v}"),
                k => format!("{k} * {v}"),
            };
            parts.push(term);
        }
        if self.c != 0 || parts.is_empty() {
            parts.push(self.c.to_string());
        }
        let mut s = parts[0].clone();
        for p in &parts[1..] {
            match p.strip_prefix('-') {
                Some(neg) => {
                    s.push_str(" - ");
                    s.push_str(neg);
                }
                None => {
                    s.push_str(" + ");
                    s.push_str(p);
                }
            }
        }
        s
    }
}

/// A piece of a statement: source text, or a number that may vary between iterations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Tok {
    /// Fixed text.
    Text(String),
    /// A number.
    Num(Affine),
}

/// A statement of the emitted kernel body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Stmt {
    /// One line of source.
    Line(Vec<Tok>),
    /// `for i<depth> in <api>(<trips>):` and its body.
    Loop {
        /// The iterator (`nl.affine_range`).
        api: &'static str,
        /// Its trip count.
        trips: u64,
        /// The loop index's depth (its name is `i<depth>`).
        depth: usize,
        /// The body.
        body: Vec<Stmt>,
    },
    /// The iterations of the loop whose index has depth `depth`, in runs that differ:
    /// `if i<depth> < end0: ... elif i<depth> < end1: ... else: ...` (each arm `(end, body)`,
    /// the last one's end the trip count).
    Cases {
        /// The loop index's depth.
        depth: usize,
        /// The arms, in order.
        arms: Vec<(u64, Vec<Stmt>)>,
    },
}

/// True when `a` and `b` are the same statements but for their numbers.
fn same_shape(a: &[Stmt], b: &[Stmt]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x, y) {
            (Stmt::Line(p), Stmt::Line(q)) => {
                p.len() == q.len()
                    && p.iter().zip(q).all(|(s, t)| match (s, t) {
                        (Tok::Text(s), Tok::Text(t)) => s == t,
                        (Tok::Num(_), Tok::Num(_)) => true,
                        _ => false,
                    })
            }
            (
                Stmt::Loop {
                    api: a1,
                    trips: t1,
                    depth: d1,
                    body: b1,
                },
                Stmt::Loop {
                    api: a2,
                    trips: t2,
                    depth: d2,
                    body: b2,
                },
            ) => a1 == a2 && t1 == t2 && d1 == d2 && same_shape(b1, b2),
            (
                Stmt::Cases {
                    depth: d1,
                    arms: a1,
                },
                Stmt::Cases {
                    depth: d2,
                    arms: a2,
                },
            ) => {
                d1 == d2
                    && a1.len() == a2.len()
                    && a1
                        .iter()
                        .zip(a2)
                        .all(|(x, y)| x.0 == y.0 && same_shape(&x.1, &y.1))
            }
            _ => false,
        })
}

/// The numbers of `stmts`, in order.
fn nums(stmts: &[Stmt], out: &mut Vec<Affine>) {
    for s in stmts {
        match s {
            Stmt::Line(toks) => out.extend(toks.iter().filter_map(|t| match t {
                Tok::Num(a) => Some(a.clone()),
                Tok::Text(_) => None,
            })),
            Stmt::Loop { body, .. } => nums(body, out),
            Stmt::Cases { arms, .. } => {
                for (_, body) in arms {
                    nums(body, out);
                }
            }
        }
    }
}

/// `stmts` with their numbers replaced, in order, by `values`.
fn with_nums(stmts: &[Stmt], values: &mut impl Iterator<Item = Affine>) -> Vec<Stmt> {
    stmts
        .iter()
        .map(|s| match s {
            Stmt::Line(toks) => Stmt::Line(
                toks.iter()
                    .map(|t| match t {
                        Tok::Num(_) => Tok::Num(values.next().expect("one value per number")),
                        Tok::Text(_) => t.clone(),
                    })
                    .collect(),
            ),
            Stmt::Loop {
                api,
                trips,
                depth,
                body,
            } => Stmt::Loop {
                api,
                trips: *trips,
                depth: *depth,
                body: with_nums(body, values),
            },
            Stmt::Cases { depth, arms } => Stmt::Cases {
                depth: *depth,
                arms: arms
                    .iter()
                    .map(|(end, body)| (*end, with_nums(body, values)))
                    .collect(),
            },
        })
        .collect()
}

/// The iterations `bodies` (in order) of a loop `api` whose index has depth `depth`, as
/// statements. Each maximal run of two or more iterations that agree (same statements, each
/// number's constant affine in the index, its inner-loop terms equal) is rolled. When every
/// iteration is one run, the result is one loop; a single iteration is its statements. Runs
/// that differ stay in one loop over every iteration, as arms of a [`Stmt::Cases`] (a loop
/// frame of the trace is kept whole: a partial last tile stays an iteration of its loop).
pub(crate) fn reroll(bodies: Vec<Vec<Stmt>>, api: &'static str, depth: usize) -> Vec<Stmt> {
    let values: Vec<Vec<Affine>> = bodies
        .iter()
        .map(|b| {
            let mut v = Vec::new();
            nums(b, &mut v);
            v
        })
        .collect();
    let mut arms: Vec<(u64, Vec<Stmt>)> = Vec::new();
    let mut a = 0;
    while a < bodies.len() {
        let end = run_end(&bodies, &values, a);
        let body = if end - a >= 2 {
            // Affine in the loop index: the value at iteration `a` minus `a` steps.
            let steps = values[a].iter().zip(&values[a + 1]).map(|(x, y)| y.c - x.c);
            let rolled: Vec<Affine> = values[a]
                .iter()
                .zip(steps)
                .map(|(x, d)| {
                    let mut terms = x.terms.clone();
                    if d != 0 {
                        terms.push((depth, d));
                        terms.sort_unstable();
                    }
                    Affine {
                        c: x.c - d * a as i64,
                        terms,
                    }
                })
                .collect();
            with_nums(&bodies[a], &mut rolled.into_iter())
        } else {
            bodies[a].clone()
        };
        arms.push((end as u64, body));
        a = end;
    }
    let trips = bodies.len() as u64;
    match arms.len() {
        0 => Vec::new(),
        1 if trips == 1 => arms.pop().map(|(_, b)| b).unwrap_or_default(),
        _ if arms.iter().all(|(_, b)| b.is_empty()) => Vec::new(),
        1 => {
            let body = arms.pop().map(|(_, b)| b).unwrap_or_default();
            vec![Stmt::Loop {
                api,
                trips,
                depth,
                body,
            }]
        }
        _ => vec![Stmt::Loop {
            api,
            trips,
            depth,
            body: vec![Stmt::Cases { depth, arms }],
        }],
    }
}

/// The end of the longest run of iterations from `a` that re-rolls (at least `a + 1`).
fn run_end(bodies: &[Vec<Stmt>], values: &[Vec<Affine>], a: usize) -> usize {
    let mut end = a + 1;
    while end < bodies.len() && same_shape(&bodies[a], &bodies[end]) {
        let k = (end - a) as i64;
        let affine = values[a].iter().enumerate().all(|(p, x)| {
            let y = &values[end][p];
            let d = values[a + 1][p].c - x.c;
            y.terms == x.terms && y.c - x.c == k * d
        });
        if !affine {
            break;
        }
        end += 1;
    }
    end
}

/// The iterator of a loop found from repeated statements (a host loop).
pub(crate) const HOST_LOOP: &str = "nl.static_range";

/// The longest block [`roll_repeats`] looks for (statements): longer repeats are rare and
/// the search is quadratic in it.
const MAX_BLOCK: usize = 64;

/// A hash of a statement's shape (its text and structure, not its numbers): statements of
/// different shapes never compare equal, so blocks are told apart by it first.
fn shape_key(s: &Stmt) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    fn feed(s: &Stmt, h: &mut impl Hasher) {
        match s {
            Stmt::Line(toks) => {
                0u8.hash(h);
                for t in toks {
                    match t {
                        Tok::Text(x) => x.hash(h),
                        Tok::Num(_) => 1u8.hash(h),
                    }
                }
            }
            Stmt::Loop {
                api,
                trips,
                depth,
                body,
            } => {
                (2u8, api, trips, depth, body.len()).hash(h);
                for b in body {
                    feed(b, h);
                }
            }
            Stmt::Cases { depth, arms } => {
                (3u8, depth, arms.len()).hash(h);
                for (end, body) in arms {
                    (end, body.len()).hash(h);
                    for b in body {
                        feed(b, h);
                    }
                }
            }
        }
    }
    feed(s, &mut h);
    h.finish()
}

/// `stmts` with every repeated block of statements rolled into a loop over a fresh index
/// (see the [module documentation](self)), inside loops too. `fresh` numbers the new
/// indices (their depth field; [`renumber`] renames them); it must start above every loop
/// depth in `stmts`.
pub(crate) fn roll_repeats(stmts: Vec<Stmt>, fresh: &mut usize) -> Vec<Stmt> {
    let keys: Vec<u64> = stmts.iter().map(shape_key).collect();
    let values: Vec<Vec<Affine>> = stmts
        .iter()
        .map(|s| {
            let mut v = Vec::new();
            nums(std::slice::from_ref(s), &mut v);
            v
        })
        .collect();
    let mut out = Vec::new();
    let mut a = 0;
    while a < stmts.len() {
        match best_repeat(&stmts, &keys, &values, a) {
            Some((p, count)) => {
                let bodies: Vec<Vec<Stmt>> = stmts[a..a + p * count]
                    .chunks(p)
                    .map(<[Stmt]>::to_vec)
                    .collect();
                let depth = *fresh;
                *fresh += 1;
                for s in reroll(bodies, HOST_LOOP, depth) {
                    out.push(roll_inside(s, fresh));
                }
                a += p * count;
            }
            None => {
                out.push(roll_inside(stmts[a].clone(), fresh));
                a += 1;
            }
        }
    }
    out
}

/// `s` with the repeats in its body rolled (a loop), or `s` (a line).
fn roll_inside(s: Stmt, fresh: &mut usize) -> Stmt {
    match s {
        Stmt::Loop {
            api,
            trips,
            depth,
            body,
        } => Stmt::Loop {
            api,
            trips,
            depth,
            body: roll_repeats(body, fresh),
        },
        Stmt::Cases { depth, arms } => Stmt::Cases {
            depth,
            arms: arms
                .into_iter()
                .map(|(end, body)| (end, roll_repeats(body, fresh)))
                .collect(),
        },
        line => line,
    }
}

/// The repeat starting at `a` that saves the most lines: `(block length, repetitions)`, or
/// `None` when no repeat there saves a line. Every repetition is checked (same statements,
/// each number's constant affine in the repetition, its index terms equal).
fn best_repeat(
    stmts: &[Stmt],
    keys: &[u64],
    values: &[Vec<Affine>],
    a: usize,
) -> Option<(usize, usize)> {
    let n = stmts.len() - a;
    let mut best: Option<(usize, usize, usize)> = None; // (saved, p, count)
    for p in 1..=MAX_BLOCK.min(n / 2) {
        let agrees = |k: usize| {
            (0..p).all(|o| {
                let (x, y) = (a + o, a + k * p + o);
                keys[x] == keys[y]
                    && same_shape(
                        std::slice::from_ref(&stmts[x]),
                        std::slice::from_ref(&stmts[y]),
                    )
                    && values[x]
                        .iter()
                        .zip(&values[y])
                        .enumerate()
                        .all(|(q, (u, v))| {
                            let d = values[a + p + o][q].c - u.c;
                            v.terms == u.terms && v.c - u.c == k as i64 * d
                        })
            })
        };
        let mut count = 1;
        while a + (count + 1) * p <= stmts.len() && agrees(count) {
            count += 1;
        }
        // Lines: p * count unrolled, p + 1 rolled (a nested loop counts as one line here).
        let saved = (p * count).saturating_sub(p + 1);
        if count >= 2 && saved > 0 && best.is_none_or(|b| saved > b.0) {
            best = Some((saved, p, count));
        }
    }
    best.map(|(_, p, count)| (p, count))
}

/// `stmts` (at nesting level `level`) with each loop's index named after its nesting level
/// (`depth` = the number of loops around it): `outer` maps the enclosing loops' old depths to
/// their new ones.
pub(crate) fn renumber(
    stmts: Vec<Stmt>,
    level: usize,
    outer: &mut Vec<(usize, usize)>,
) -> Vec<Stmt> {
    let rename = |a: &Affine, outer: &[(usize, usize)]| {
        let mut terms: Vec<(usize, i64)> = a
            .terms
            .iter()
            .map(|&(d, k)| {
                let new = outer
                    .iter()
                    .rev()
                    .find(|(old, _)| *old == d)
                    .map_or(d, |&(_, new)| new);
                (new, k)
            })
            .collect();
        terms.sort_unstable();
        Affine { c: a.c, terms }
    };
    stmts
        .into_iter()
        .map(|s| match s {
            Stmt::Line(toks) => Stmt::Line(
                toks.into_iter()
                    .map(|t| match t {
                        Tok::Num(a) => Tok::Num(rename(&a, outer)),
                        text => text,
                    })
                    .collect(),
            ),
            Stmt::Loop {
                api,
                trips,
                depth,
                body,
            } => {
                outer.push((depth, level));
                let body = renumber(body, level + 1, outer);
                outer.pop();
                Stmt::Loop {
                    api,
                    trips,
                    depth: level,
                    body,
                }
            }
            Stmt::Cases { depth, arms } => Stmt::Cases {
                depth: outer
                    .iter()
                    .rev()
                    .find(|(old, _)| *old == depth)
                    .map_or(depth, |&(_, new)| new),
                arms: arms
                    .into_iter()
                    .map(|(end, body)| (end, renumber(body, level, outer)))
                    .collect(),
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(n: i64) -> Stmt {
        Stmt::Line(vec![
            Tok::Text("x[".into()),
            Tok::Num(Affine::constant(n)),
            Tok::Text("]".into()),
        ])
    }

    #[test]
    fn affine_iterations_become_one_loop() {
        let bodies: Vec<Vec<Stmt>> = (0..4).map(|i| vec![line(128 * i + 5)]).collect();
        let out = reroll(bodies, "nl.affine_range", 0);
        assert_eq!(out.len(), 1);
        let Stmt::Loop { trips, body, .. } = &out[0] else {
            panic!("{out:?}")
        };
        assert_eq!(*trips, 4);
        let Stmt::Line(toks) = &body[0] else { panic!() };
        assert_eq!(
            toks[1],
            Tok::Num(Affine {
                c: 5,
                terms: vec![(0, 128)]
            })
        );
        if let Tok::Num(a) = &toks[1] {
            assert_eq!(a.python(), "128 * i0 + 5");
        }
    }

    #[test]
    fn every_iteration_is_checked_not_only_two() {
        // 1, 2, 3 affine; 10 breaks the run: one loop of four, the run of three one arm and
        // the last iteration the other (the loop stays whole).
        let bodies: Vec<Vec<Stmt>> = [1, 2, 3, 10].iter().map(|&i| vec![line(i)]).collect();
        let out = reroll(bodies, "nl.affine_range", 0);
        let mut text = String::new();
        crate::emit::python::render(&out, 0, &mut text);
        assert_eq!(
            text,
            "for i0 in nl.affine_range(4):\n    if i0 < 3:\n        x[i0 + 1]\n    else:\n        \
             x[10]\n"
        );
    }

    #[test]
    fn different_statements_stay_in_their_loop_as_arms() {
        let other = Stmt::Line(vec![Tok::Text("y".into())]);
        let bodies = vec![vec![line(0)], vec![other.clone()], vec![line(5)]];
        let out = reroll(bodies, "nl.affine_range", 0);
        let Stmt::Loop { trips: 3, body, .. } = &out[0] else {
            panic!("{out:?}")
        };
        let want = Stmt::Cases {
            depth: 0,
            arms: vec![(1, vec![line(0)]), (2, vec![other]), (3, vec![line(5)])],
        };
        assert_eq!(body, &vec![want]);
    }

    fn named(name: &str, n: i64) -> Stmt {
        Stmt::Line(vec![
            Tok::Text(format!("{name}[")),
            Tok::Num(Affine::constant(n)),
            Tok::Text("]".into()),
        ])
    }

    #[test]
    fn a_repeated_block_becomes_a_host_loop_and_nests() {
        // Rust `for i in 0..2 { a[i]; for j in 0..3 { b[3 * i + j] } }`, flattened, then a tail.
        let mut stmts = Vec::new();
        for i in 0..2 {
            stmts.push(named("a", i));
            for j in 0..3 {
                stmts.push(named("b", 3 * i + j));
            }
        }
        stmts.push(named("c", 7));
        let mut fresh = 100;
        let out = renumber(roll_repeats(stmts, &mut fresh), 0, &mut Vec::new());
        let mut text = String::new();
        crate::emit::python::render(&out, 0, &mut text);
        // b[3 * i + j] is affine in the flat index too: one loop of the two, b's loop inside.
        assert_eq!(
            text,
            "for i0 in nl.static_range(2):\n    a[i0]\n    for i1 in nl.static_range(3):\n        \
             b[3 * i0 + i1]\nc[7]\n"
        );
    }

    #[test]
    fn a_repeat_that_breaks_stays_unrolled_after_the_break() {
        // 0, 1, 2, 3 affine; 9 breaks it.
        let stmts: Vec<Stmt> = [0, 1, 2, 3, 9].iter().map(|&i| named("x", i)).collect();
        let mut fresh = 100;
        let out = roll_repeats(stmts, &mut fresh);
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(matches!(&out[0], Stmt::Loop { trips: 4, .. }), "{out:?}");
        assert_eq!(out[1], named("x", 9));
    }

    #[test]
    fn two_statements_are_not_worth_a_loop() {
        let stmts = vec![named("x", 0), named("x", 1)];
        let mut fresh = 100;
        assert_eq!(roll_repeats(stmts.clone(), &mut fresh), stmts);
    }
}
