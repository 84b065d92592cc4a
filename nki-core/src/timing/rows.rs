//! What the profile's summary takes from the records alone, whatever their placement: the
//! per-op rows, instruction and source-line counts, FLOPs and DMA traffic. It reads the
//! records only, so it can be built beside placement (see `timing::schedule`).

use super::fast_hash;
use crate::profile::findings::BoundFacts;
use crate::profile::{DmaStats, OpInfo};
use crate::record::{CoreStream, Engine, Instr, MemKind, Opcode};
use crate::target::TargetSpec;

/// Records ahead of the one read whose fields are asked for early (see [`prefetch`]).
const AHEAD: usize = 16;

/// Asks the CPU to bring the cache lines of `r`'s fields that the rows read (its scalar
/// fields, source location and DMA size) into the cache, without waiting for them. The rows
/// read every record once, in order, long after it was written: each record's first read was
/// a cache miss the loop waited for (60 % of the rows' time in perf, ~3 ms of a hoist_load
/// estimate), one record after another.
#[inline(always)]
fn prefetch(r: &Instr) {
    #[cfg(target_arch = "x86_64")]
    for p in [
        &r.engine as *const Engine as *const i8,
        &r.loc as *const _ as *const i8,
        &r.dma as *const _ as *const i8,
    ] {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is a hint: it reads nothing the program sees, cannot fault
        // (here `p` points into a live record anyway), and SSE is part of every x86-64 CPU.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

/// A source line and the API called there (a row of
/// [`Profile::top_lines`](crate::profile::Profile::top_lines)). Its hash reads only the
/// numbers (line, column, lengths), not the file name's bytes; equality compares all.
#[derive(Clone, Copy, Eq)]
pub(super) struct LineKey(pub crate::error::SourceLoc, pub &'static str);

impl PartialEq for LineKey {
    fn eq(&self, other: &LineKey) -> bool {
        let (a, b) = (&self.0, &other.0);
        a.line == b.line
            && a.column == b.column
            && same_str(a.file, b.file)
            && same_str(self.1, other.1)
    }
}

/// `a == b`, without reading the bytes when both are the same string (the file and API names
/// of one call site always are).
#[inline]
fn same_str(a: &str, b: &str) -> bool {
    (a.as_ptr() == b.as_ptr() && a.len() == b.len()) || a == b
}

impl std::hash::Hash for LineKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        h.write_u32(self.0.line);
        h.write_u32(self.0.column);
        h.write_usize(self.0.file.len());
        h.write_usize(self.1.len());
    }
}

/// The source lines of a launch's records, in order of first use.
#[derive(Default)]
pub(super) struct Lines {
    slots: fast_hash::Map<LineKey, u32>,
    /// Per line: its key and the engine of its first record.
    pub keys: Vec<(LineKey, Engine)>,
    /// Per line: its records.
    pub counts: Vec<usize>,
    /// Per line: the bytes its DMAs move.
    pub dma_bytes: Vec<u64>,
}

/// The record-only part of a launch's profile, in global record order (core 0's stream first).
pub(super) struct RecordRows {
    /// Per record: its row of [`Profile::ops`](crate::profile::Profile::ops).
    pub ops: Vec<OpInfo>,
    /// Per record: its line (index into `lines`).
    pub line_of: Vec<u32>,
    pub lines: Lines,
    /// Per core stream: hardware FLOPs of its TensorE records.
    pub core_flops: Vec<u64>,
    /// Per core stream: bytes its DMAs move.
    pub core_dma: Vec<u64>,
    /// Hardware FLOPs of the TensorE transposes.
    pub tr_flops: u64,
    /// DMA traffic: its record-only fields (count, bytes, HBM reads and writes).
    pub dma: DmaStats,
    /// The facts behind the profile's performance bounds.
    pub bound_facts: BoundFacts,
}

impl RecordRows {
    /// The rows of every record of `streams` (costed on `spec` for the bounds' TensorE time).
    pub(super) fn of_streams(streams: &[CoreStream], spec: &TargetSpec) -> RecordRows {
        let n = streams.iter().map(CoreStream::records).sum();
        let mut rows = RecordRows {
            ops: Vec::with_capacity(n),
            line_of: Vec::with_capacity(n),
            lines: Lines::default(),
            core_flops: vec![0; streams.len().max(1)],
            core_dma: vec![0; streams.len().max(1)],
            tr_flops: 0,
            dma: DmaStats::default(),
            bound_facts: BoundFacts::new(streams.len()),
        };
        for (c, s) in streams.iter().enumerate() {
            for (ii, (_, rs)) in s.instances.iter().enumerate() {
                rows.bound_facts.begin_instance(rs);
                for (k, r) in rs.iter().enumerate() {
                    if let Some(ahead) = rs.get(k + AHEAD) {
                        prefetch(ahead);
                    }
                    let bytes = r.dma.map(|d| d.bytes).unwrap_or(0);
                    match r.engine {
                        Engine::Tensor => {
                            let f = r.hw_flops();
                            rows.core_flops[c] += f;
                            if r.opcode == Opcode::Transpose {
                                rows.tr_flops += f;
                            }
                        }
                        Engine::Dma => {
                            let dma = &mut rows.dma;
                            dma.count += 1;
                            dma.bytes += bytes;
                            rows.core_dma[c] += bytes;
                            if let Some(d) = r.dma {
                                if d.src == MemKind::Hbm {
                                    dma.hbm_read_bytes += d.bytes;
                                }
                                if d.dst == MemKind::Hbm {
                                    dma.hbm_write_bytes += d.bytes;
                                }
                            }
                        }
                        _ => {}
                    }
                    rows.ops.push(OpInfo {
                        engine: r.engine,
                        opcode: r.opcode,
                        api: r.api,
                        partitions: r.partitions,
                        free: r.free,
                        in_dtype: r.in_dtype,
                        out_dtype: r.out_dtype,
                        bytes,
                        kmn: r.matmul.map(|m| [m.k, m.m, m.n]),
                        loc: r.loc,
                        nc: s.nc as u16,
                        instance: ii as u32,
                        name: r.name,
                    });
                    let lines = &mut rows.lines;
                    let next = lines.keys.len() as u32;
                    let key = LineKey(r.loc, r.api);
                    let slot = *lines.slots.entry(key).or_insert(next);
                    if slot == next {
                        lines.keys.push((key, r.engine));
                        lines.counts.push(0);
                        lines.dma_bytes.push(0);
                    }
                    lines.counts[slot as usize] += 1;
                    if r.engine == Engine::Dma {
                        lines.dma_bytes[slot as usize] += bytes;
                    }
                    rows.line_of.push(slot);
                    rows.bound_facts.add(spec, c, slot as usize, r);
                }
            }
        }
        let keys = rows.lines.keys.iter().map(|(k, _)| (k.0, k.1)).collect();
        rows.bound_facts = std::mem::take(&mut rows.bound_facts).finish(keys);
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SourceLoc;

    #[test]
    fn line_keys_compare_by_content_whether_or_not_they_share_their_strings() {
        let loc = |file: &'static str, line, column| SourceLoc { file, line, column };
        let copy = |s: &str| -> &'static str { Box::leak(s.to_owned().into_boxed_str()) };
        let key = LineKey(loc("src/k.rs", 3, 9), "nl.load");
        assert!(key == LineKey(loc("src/k.rs", 3, 9), "nl.load"));
        // The same text in other memory (as two codegen units may hold it) is the same line.
        assert!(key == LineKey(loc(copy("src/k.rs"), 3, 9), copy("nl.load")));
        assert!(key != LineKey(loc("src/k.rs", 4, 9), "nl.load"));
        assert!(key != LineKey(loc("src/k.rs", 3, 8), "nl.load"));
        assert!(key != LineKey(loc("src/j.rs", 3, 9), "nl.load"));
        assert!(key != LineKey(loc("src/k.rs", 3, 9), "nl.store"));
        // A string at the same address but shorter is another string.
        let file = key.0.file;
        assert!(key != LineKey(loc(&file[..7], 3, 9), "nl.load"));
        assert!(key != LineKey(loc(file, 3, 9), &key.1[..5]));
    }
}
