//! The instruction dump of a launch: what the kernel became, one line per instruction in
//! program order (per NeuronCore and program instance) with its engine, opcode, NKI call,
//! operands (buffers, partitions and byte ranges, dtypes), options, source line and modelled
//! start and end; runs of identical loop iterations folded into one body with its trip count.
//! [`Profile::ir`] gives it (`Display`), [`Profile::write_ir`] writes it to a file.

use super::summary::Profile;
use super::units::human_ns;
use crate::record::{BufId, CoreStream, Engine, Instr, MemKind, Region};
use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::hash::{Hash, Hasher};
use std::path::Path;

/// Most instructions a folded loop body may have (longer repeats are printed unfolded).
const MAX_BODY: usize = 64;

/// A piece of an instance's program: one instruction, or a loop of identical iterations.
enum Node {
    /// The record at this index of the instance.
    Instr(usize),
    /// `trips` iterations of `body` (the first iteration's nodes), records `first..end`.
    Loop {
        body: Vec<Node>,
        trips: usize,
        first: usize,
        end: usize,
    },
}

impl Node {
    fn first(&self) -> usize {
        match self {
            Node::Instr(i) => *i,
            Node::Loop { first, .. } => *first,
        }
    }
}

/// What makes two instructions the same step of a loop body: the call, its line and kind.
fn instr_signature(r: &Instr) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (
        r.engine,
        r.opcode,
        r.api,
        r.loc.line,
        r.loc.column,
        r.loc.file,
    )
        .hash(&mut h);
    h.finish()
}

/// Folds repeated runs of `nodes` (signatures `sig`) into loops, shortest period first,
/// until nothing repeats.
fn fold(mut nodes: Vec<Node>, mut sig: Vec<u64>, records: usize) -> Vec<Node> {
    loop {
        let mut out: Vec<Node> = Vec::with_capacity(nodes.len());
        let mut out_sig = Vec::with_capacity(nodes.len());
        let mut changed = false;
        let mut i = 0;
        let mut nodes_iter: Vec<Option<Node>> = nodes.into_iter().map(Some).collect();
        while i < nodes_iter.len() {
            let n = nodes_iter.len();
            let mut best: Option<(usize, usize)> = None;
            for p in 1..=MAX_BODY.min((n - i) / 2) {
                if sig[i..i + p] != sig[i + p..i + 2 * p] {
                    continue;
                }
                let mut trips = 2;
                while i + (trips + 1) * p <= n
                    && sig[i..i + p] == sig[i + trips * p..i + (trips + 1) * p]
                {
                    trips += 1;
                }
                best = Some((p, trips));
                break;
            }
            match best {
                Some((p, trips)) => {
                    let first = nodes_iter[i].as_ref().map_or(0, Node::first);
                    let end = nodes_iter
                        .get(i + trips * p)
                        .and_then(|x| x.as_ref().map(Node::first))
                        .unwrap_or(records);
                    let body: Vec<Node> = (i..i + p).filter_map(|k| nodes_iter[k].take()).collect();
                    let mut h = std::collections::hash_map::DefaultHasher::new();
                    (&sig[i..i + p], trips).hash(&mut h);
                    out_sig.push(h.finish());
                    out.push(Node::Loop {
                        body,
                        trips,
                        first,
                        end,
                    });
                    i += trips * p;
                    changed = true;
                }
                None => {
                    if let Some(x) = nodes_iter[i].take() {
                        out.push(x);
                        out_sig.push(sig[i]);
                    }
                    i += 1;
                }
            }
        }
        nodes = out;
        sig = out_sig;
        if !changed {
            return nodes;
        }
    }
}

/// Short names of the launch's buffers, in order of first use: `hbm0`, `t0`, ...
#[derive(Default)]
struct Names {
    names: HashMap<BufId, String>,
    hbm: usize,
    tiles: usize,
}

impl Names {
    fn of(&mut self, b: BufId) -> &str {
        let (hbm, tiles) = (&mut self.hbm, &mut self.tiles);
        self.names.entry(b).or_insert_with(|| match b {
            BufId::Hbm(_) => {
                *hbm += 1;
                format!("hbm{}", *hbm - 1)
            }
            BufId::Tile(_) => {
                *tiles += 1;
                format!("t{}", *tiles - 1)
            }
        })
    }

    fn region(&mut self, g: &Region, mem: Option<MemKind>) -> String {
        let mem = mem.map_or(String::new(), |m| format!("{}:", m.name()));
        let name = self.of(g.buf).to_string();
        match g.buf {
            BufId::Hbm(_) => format!("{mem}{name}[{}..{} B]", g.lo, g.hi),
            BufId::Tile(_) => format!("{mem}{name}[p{}..{}, {}..{} B]", g.p0, g.p1, g.lo, g.hi),
        }
    }
}

/// A launch's instruction dump (see the module docs); `Display` writes it.
pub struct IrDump<'a> {
    profile: &'a Profile,
    streams: &'a [CoreStream],
}

impl Profile {
    /// The launch's instructions as a readable dump (see [`IrDump`]), or `None` when the
    /// profile kept no records (an estimate launched without
    /// [`crate::Launch::keep_records`]).
    pub fn ir(&self) -> Option<IrDump<'_>> {
        self.kept_records.0.as_deref().map(|streams| IrDump {
            profile: self,
            streams,
        })
    }

    /// Writes [`Profile::ir`] to `path`. An error when the profile kept no records (estimate
    /// mode: launch with [`crate::Launch::keep_records`]) or the file cannot be written.
    pub fn write_ir(&self, path: impl AsRef<Path>) -> std::io::Result<()> {
        let dump = self.ir().ok_or_else(|| {
            std::io::Error::other(
                "this profile kept no instruction records: estimate launches keep them with \
                 Launch::keep_records() (simulate launches always do)",
            )
        })?;
        std::fs::write(path, dump.to_string())
    }
}

impl IrDump<'_> {
    /// Start and end of every record, in ns (`NaN` for a record the timeline has no span of).
    fn times(&self) -> (Vec<f64>, Vec<f64>) {
        let n = self.profile.ops.len();
        let (mut start, mut end) = (vec![f64::INFINITY; n], vec![f64::NEG_INFINITY; n]);
        for s in self.profile.spans.iter().filter(|s| s.cause.is_none()) {
            let i = s.op as usize;
            if i < n {
                start[i] = start[i].min(s.start_ns);
                end[i] = end[i].max(s.start_ns + s.dur_ns);
            }
        }
        (start, end)
    }

    fn line(&self, names: &mut Names, r: &Instr, t: (f64, f64)) -> String {
        let mut s = String::new();
        let (src, dst) = match r.dma {
            Some(d) => (Some(d.src), Some(d.dst)),
            None => (None, None),
        };
        let writes: Vec<String> = r
            .writes
            .iter()
            .map(|g| format!("{} {}", names.region(g, dst), r.out_dtype.name()))
            .collect();
        let reads: Vec<String> = r
            .reads
            .iter()
            .map(|g| format!("{} {}", names.region(g, src), r.in_dtype.name()))
            .collect();
        let _ = write!(
            s,
            "{:<7} {:<20} {:<22} {} <- {}",
            r.engine.name(),
            r.opcode.name(),
            r.api,
            if writes.is_empty() {
                "-".into()
            } else {
                writes.join(", ")
            },
            if reads.is_empty() {
                "-".into()
            } else {
                reads.join(", ")
            },
        );
        let mut opts = vec![format!("{}x{}", r.partitions, r.free)];
        if let Some(a) = r.alu {
            opts.push(format!("op={a:?}"));
        }
        if r.accumulate {
            opts.push("accumulate".into());
        }
        if let Some(m) = r.matmul {
            opts.push(format!("K={} M={} N={}", m.k, m.m, m.n));
        }
        if let Some(d) = r.dma {
            opts.push(format!("{} B in runs of {} B", d.bytes, d.chunk_bytes));
        }
        if r.engine != Engine::Dma && !r.contiguous {
            opts.push("strided".into());
        }
        if let Some(n) = &r.name {
            opts.push(format!("name={n}"));
        }
        let when = if t.0.is_finite() && t.1 >= t.0 {
            format!("{}..{}", human_ns(t.0), human_ns(t.1))
        } else {
            "-".into()
        };
        let _ = write!(s, " {{{}}} at {} [{when}]", opts.join(", "), r.loc);
        s
    }

    #[allow(clippy::too_many_arguments)]
    fn write_nodes(
        &self,
        f: &mut fmt::Formatter<'_>,
        names: &mut Names,
        nodes: &[Node],
        records: &[Instr],
        base: usize,
        times: &(Vec<f64>, Vec<f64>),
        depth: usize,
    ) -> fmt::Result {
        let pad = "  ".repeat(depth + 1);
        for n in nodes {
            match n {
                Node::Instr(i) => {
                    let g = base + i;
                    let t = (
                        times.0.get(g).copied().unwrap_or(f64::NAN),
                        times.1.get(g).copied().unwrap_or(f64::NAN),
                    );
                    writeln!(f, "{pad}{:>6}  {}", i, self.line(names, &records[*i], t))?;
                }
                Node::Loop {
                    body,
                    trips,
                    first,
                    end,
                } => {
                    let lo = (base + first..base + end)
                        .map(|g| times.0.get(g).copied().unwrap_or(f64::INFINITY))
                        .fold(f64::INFINITY, f64::min);
                    let hi = (base + first..base + end)
                        .map(|g| times.1.get(g).copied().unwrap_or(f64::NEG_INFINITY))
                        .fold(f64::NEG_INFINITY, f64::max);
                    let when = if lo <= hi {
                        format!("{}..{}", human_ns(lo), human_ns(hi))
                    } else {
                        "-".into()
                    };
                    writeln!(
                        f,
                        "{pad}loop x{trips} (records {first}..{end}, [{when}]; first iteration):"
                    )?;
                    self.write_nodes(f, names, body, records, base, times, depth + 1)?;
                }
            }
        }
        Ok(())
    }
}

impl fmt::Display for IrDump<'_> {
    /// One line per instruction in program order, per core and instance: index, engine,
    /// opcode, NKI call, `written <- read` operands (memory, buffer, partitions and byte
    /// range, dtype), `{options}`, source line and `[modelled start..end]`; repeated
    /// iterations folded as `loop xN` with the first iteration's instructions.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let times = self.times();
        let mut names = Names::default();
        let mut base = 0;
        writeln!(
            f,
            "# {} instructions on {} ({} NeuronCore{}), latency {}",
            self.profile.instructions,
            self.profile.target,
            self.streams.len(),
            if self.streams.len() == 1 { "" } else { "s" },
            human_ns(self.profile.latency_ns)
        )?;
        for s in self.streams {
            for (pid, records) in &s.instances {
                writeln!(
                    f,
                    "nc{} program {pid:?} ({} instructions):",
                    s.nc,
                    records.len()
                )?;
                let sig: Vec<u64> = records.iter().map(instr_signature).collect();
                let nodes = fold(
                    (0..records.len()).map(Node::Instr).collect(),
                    sig,
                    records.len(),
                );
                self.write_nodes(f, &mut names, &nodes, records, base, &times, 0)?;
                base += records.len();
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(nodes: &[Node]) -> String {
        nodes
            .iter()
            .map(|n| match n {
                Node::Instr(i) => i.to_string(),
                Node::Loop { body, trips, .. } => format!("{trips}x({})", shape(body)),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn repeats_fold_innermost_first_and_nest() {
        // a (b b b c) (b b b c) d: an inner loop of 3 b's in an outer loop of 2.
        let sig = [1, 2, 2, 2, 3, 2, 2, 2, 3, 4];
        let nodes = fold(
            (0..sig.len()).map(Node::Instr).collect(),
            sig.to_vec(),
            sig.len(),
        );
        assert_eq!(shape(&nodes), "0 2x(3x(1) 4) 9");
        // Nothing repeats: unchanged.
        let nodes = fold((0..3).map(Node::Instr).collect(), vec![1, 2, 3], 3);
        assert_eq!(shape(&nodes), "0 1 2");
    }
}
