//! The per-line findings of a profile's performance bounds ([`super::bounds`]) and the
//! record-only facts behind them, gathered with the profile's rows (`timing::rows`, one
//! [`BoundFacts::add`] per record): small DMA descriptors, loads that re-read bytes, matmuls
//! on reduced TensorE tiles, transposes that recur, the TensorE time issued, the adjusted
//! FLOPs and how each HBM tensor is read and written.

use super::units::human_bytes;
use crate::dtype::DType;
use crate::error::SourceLoc;
use crate::record::{BufId, Engine, Instr, MatmulDims, MemKind, Opcode};
use crate::target::TargetSpec;
use crate::timing::fast_hash::Map;
use std::fmt;

/// Descriptor size below which AWS's DMA investigation calls a DMA inefficient: "DMA
/// descriptors below 4 KiB are significantly less efficient ... beyond 4 KB improvements are
/// marginal" (neuron-agentic-development `investigations/dma_efficiency.md`; measured on trn2:
/// 1 KiB descriptors 259 GB/s, 4 KiB 354 GB/s).
pub const EFFICIENT_DESCRIPTOR_BYTES: u64 = 4096;

/// The profiler's `adjusted_flops` weight of a matmul by its input dtype: 4x for fp32 (four
/// TensorE passes), 0.5x for fp8, 1x for bf16/fp16/tf32 and the rest (neuron-agentic-development
/// `investigations/te_inefficiency.md`, trn2).
pub fn adjusted_flops_factor(dtype: DType) -> f64 {
    if dtype == DType::F32 {
        4.0
    } else if dtype.is_fp8() {
        0.5
    } else {
        1.0
    }
}

/// What a per-line finding is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum FindingKind {
    /// DMAs whose descriptors (contiguous runs) are shorter than
    /// `EFFICIENT_DESCRIPTOR_BYTES`.
    SmallDescriptors,
    /// Loads that read again exactly the HBM bytes an earlier load of the same program
    /// instance read.
    Reloaded,
    /// Spill traffic the capacity resolution added (saves, reloads, input reloads).
    Spilled,
    /// Matmuls whose stationary tile uses fewer rows (contraction K) or columns (M) than
    /// TensorE's processing-element array.
    ReducedTensorTile,
    /// Transposes of data an earlier transpose of the same instance already transposed (the
    /// same HBM bytes, loaded again or transposed by DMA again): work that recurs per
    /// iteration and could be done once.
    RecurringTranspose,
}

impl FindingKind {
    /// The name the profile prints.
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::SmallDescriptors => "DMA descriptors < 4 KiB",
            FindingKind::Reloaded => "re-loaded",
            FindingKind::Spilled => "spilled",
            FindingKind::ReducedTensorTile => "reduced TensorE tile",
            FindingKind::RecurringTranspose => "recurring transpose",
        }
    }
}

/// One finding at one source line.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Finding {
    /// What was found.
    pub kind: FindingKind,
    /// `file:line:column` of the NKI call.
    pub location: String,
    /// The NKI call (`nl.load`, `nisa.nc_matmul`, ...).
    pub api: &'static str,
    /// Instructions concerned.
    pub count: usize,
    /// Bytes concerned (DMA findings; 0 for TensorE findings).
    pub bytes: u64,
    /// The finding's measure in a few words: the smallest descriptor, the PE array share
    /// used, the distinct sources transposed, the spilled tile.
    pub detail: String,
}

impl fmt::Display for Finding {
    /// `k.rs:42:9: nl.load: DMA descriptors < 4 KiB, 64x, 2.10 MB (descriptors of 1.0 KB)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}: {}, {}x",
            self.location,
            self.api,
            self.kind.name(),
            self.count
        )?;
        if self.bytes > 0 {
            write!(f, ", {}", human_bytes(self.bytes as f64))?;
        }
        if !self.detail.is_empty() {
            write!(f, " ({})", self.detail)?;
        }
        Ok(())
    }
}

/// What one source line's records add to the findings.
#[derive(Clone, Debug, Default)]
pub(crate) struct LineFacts {
    small_dmas: usize,
    small_bytes: u64,
    smallest_descriptor: u64,
    reloads: usize,
    reload_bytes: u64,
    matmuls: usize,
    reduced: usize,
    pe_used: f64,
    pe_full: f64,
    transposes: usize,
    recurring: usize,
}

/// A region of a tile as the findings key it (the tile, its partitions, its bytes).
type TileRegion = (BufId, u32, u32, u64, u64);
/// A byte range of an HBM tensor.
type HbmBytes = (BufId, u64, u64);
/// A byte range of an HBM tensor, the tensor by its index in [`BoundFacts::hbm`] (a shorter
/// key hashes faster: one per HBM read).
type HbmRange = (u32, u64, u64);

/// The record-only facts of a launch behind its bounds, gathered beside the profile's rows
/// (one call of [`BoundFacts::add`] per record) and kept in the profile.
#[derive(Clone, Debug, Default)]
pub(crate) struct BoundFacts {
    /// Per core stream: TensorE MultiplyMoving time issued, in ns.
    pub(crate) tensor_ns: Vec<f64>,
    /// Adjusted FLOPs of the matmuls.
    pub(crate) useful_flops: f64,
    /// Per line slot (the rows' line order).
    lines: Vec<LineFacts>,
    /// Per HBM tensor: the span read and written, the bytes moved each way, and whether
    /// its first access was a write.
    hbm: Vec<HbmUse>,
    /// The HBM tensor of each entry of `hbm`, in the same order (a kernel reads and writes
    /// a few: a scan of these beats hashing).
    hbm_bufs: Vec<BufId>,
    /// Index into `hbm` of each HBM tensor, kept once there are more than
    /// [`BoundFacts::SCANNED_HBM`].
    hbm_index: Map<BufId, usize>,
    /// This instance has TensorE transposes: which tiles hold loaded data is followed.
    follow_tiles: bool,
    /// This instance's HBM reads so far (tensor index, byte range).
    seen_reads: Map<HbmRange, ()>,
    /// This instance's tiles last written by a load: tile region -> the HBM bytes loaded.
    loaded_from: Map<TileRegion, HbmBytes>,
    /// The sources this instance's transposes transposed.
    transposed: Map<HbmBytes, ()>,
    /// The line keys, set when the rows are done (location, api).
    keys: Vec<(SourceLoc, &'static str)>,
    /// The facts of the last matmul added (a kernel's matmuls repeat a few shapes).
    last_matmul: Option<MatmulFacts>,
}

/// What one matmul adds to the bound facts, a function of its operand sizes and input dtype
/// on one target: worked out once per run of matmuls of one shape.
#[derive(Clone, Copy, Debug)]
struct MatmulFacts {
    dims: MatmulDims,
    in_dtype: DType,
    /// TensorE MultiplyMoving time, in ns.
    mm_ns: f64,
    /// Adjusted FLOPs.
    useful_flops: f64,
    /// PE cells used and offered, times the moving columns.
    pe_used: f64,
    pe_full: f64,
    /// True on a reduced tile (fewer rows or columns than the PE array).
    reduced: bool,
}

impl MatmulFacts {
    /// The facts of matmul record `r` (operand sizes `m`) on `spec`.
    fn of(spec: &TargetSpec, r: &Instr, m: MatmulDims) -> MatmulFacts {
        let (rows, cols) = (spec.pe_array.0 as f64, spec.pe_array.1 as f64);
        let n = m.n.max(1) as f64;
        MatmulFacts {
            dims: m,
            in_dtype: r.in_dtype,
            mm_ns: crate::timing::cost::tensor_cost(spec, r).mm_ns,
            useful_flops: r.hw_flops() as f64 * adjusted_flops_factor(r.in_dtype),
            pe_used: (m.k as f64).min(rows) * (m.m as f64).min(cols) * n,
            pe_full: rows * cols * n,
            reduced: (m.k as f64) < rows || (m.m as f64) < cols,
        }
    }
}

/// How a launch uses one HBM tensor.
#[derive(Clone, Debug)]
struct HbmUse {
    written_first: bool,
    read_after_write: bool,
    /// Lowest and one past the highest byte read (`u64::MAX, 0` before any read).
    read_span: (u64, u64),
    /// The same for writes.
    write_span: (u64, u64),
    read_bytes: u64,
    write_bytes: u64,
}

impl HbmUse {
    const NONE: (u64, u64) = (u64::MAX, 0);

    /// The distinct bytes of a span, at most `bytes` (a span read with gaps moves fewer).
    fn ideal(span: (u64, u64), bytes: u64) -> u64 {
        span.1.saturating_sub(span.0).min(bytes)
    }
}

/// Widens `span` to cover `lo..hi`.
fn widen(span: &mut (u64, u64), lo: u64, hi: u64) {
    span.0 = span.0.min(lo);
    span.1 = span.1.max(hi);
}

/// True for records the capacity resolution added (their traffic is counted as spills).
fn is_spill_record(r: &Instr) -> bool {
    super::spills::SpillKind::of_api(r.api).is_some()
}

impl BoundFacts {
    /// Facts for `cores` core streams.
    pub(crate) fn new(cores: usize) -> BoundFacts {
        BoundFacts {
            tensor_ns: vec![0.0; cores.max(1)],
            ..Default::default()
        }
    }

    /// Starts a new program instance (re-loads and recurring transposes are counted within
    /// an instance).
    pub(crate) fn begin_instance(&mut self, records: &[Instr]) {
        self.seen_reads.clear();
        self.loaded_from.clear();
        self.transposed.clear();
        self.follow_tiles = records.iter().any(|r| r.opcode == Opcode::Transpose);
    }

    /// Up to this many HBM tensors are found by a scan, more by a hash map.
    const SCANNED_HBM: usize = 16;

    /// The index (into `hbm`) of HBM tensor `buf`'s use: a scan of the few a kernel touches
    /// (inlined: one per HBM read or write).
    #[inline]
    fn hbm_index(&mut self, buf: BufId) -> usize {
        if self.hbm_bufs.len() <= Self::SCANNED_HBM {
            if let Some(k) = self.hbm_bufs.iter().position(|&b| b == buf) {
                return k;
            }
        } else if let Some(&k) = self.hbm_index.get(&buf) {
            return k;
        }
        self.add_hbm(buf)
    }

    /// Adds HBM tensor `buf` (first touched) to `hbm`, returning its index.
    #[cold]
    fn add_hbm(&mut self, buf: BufId) -> usize {
        let k = self.hbm.len();
        self.hbm_bufs.push(buf);
        if self.hbm_bufs.len() > Self::SCANNED_HBM {
            if self.hbm_index.is_empty() {
                self.hbm_index
                    .extend(self.hbm_bufs.iter().enumerate().map(|(k, &b)| (b, k)));
            } else {
                self.hbm_index.insert(buf, k);
            }
        }
        self.hbm.push(HbmUse {
            written_first: false,
            read_after_write: false,
            read_span: HbmUse::NONE,
            write_span: HbmUse::NONE,
            read_bytes: 0,
            write_bytes: 0,
        });
        k
    }

    /// Adds record `r` of core stream `core`, at line slot `line`.
    pub(crate) fn add(&mut self, spec: &TargetSpec, core: usize, line: usize, r: &Instr) {
        if self.lines.len() <= line {
            self.lines.resize_with(line + 1, LineFacts::default);
        }
        match r.engine {
            Engine::Tensor => self.add_tensor(spec, core, line, r),
            Engine::Dma => self.add_dma(line, r),
            _ => {
                if self.follow_tiles {
                    for w in r.writes.iter() {
                        self.loaded_from.remove(&(w.buf, w.p0, w.p1, w.lo, w.hi));
                    }
                }
            }
        }
    }

    fn add_tensor(&mut self, spec: &TargetSpec, core: usize, line: usize, r: &Instr) {
        match (r.opcode, r.matmul) {
            (Opcode::Transpose, _) => {
                if let Some(t) = self.tensor_ns.get_mut(core) {
                    *t += crate::timing::cost::tensor_cost(spec, r).mm_ns;
                }
                let l = &mut self.lines[line];
                l.transposes += 1;
                let src = r
                    .reads
                    .first()
                    .and_then(|g| self.loaded_from.get(&(g.buf, g.p0, g.p1, g.lo, g.hi)));
                if let Some(&src) = src {
                    if self.transposed.insert(src, ()).is_some() {
                        l.recurring += 1;
                    }
                }
            }
            (_, Some(m)) => {
                let f = match self.last_matmul {
                    Some(f) if f.dims == m && f.in_dtype == r.in_dtype => f,
                    _ => {
                        let f = MatmulFacts::of(spec, r, m);
                        self.last_matmul = Some(f);
                        f
                    }
                };
                if let Some(t) = self.tensor_ns.get_mut(core) {
                    *t += f.mm_ns;
                }
                self.useful_flops += f.useful_flops;
                let l = &mut self.lines[line];
                l.matmuls += 1;
                l.pe_used += f.pe_used;
                l.pe_full += f.pe_full;
                l.reduced += f.reduced as usize;
            }
            _ => {
                if let Some(t) = self.tensor_ns.get_mut(core) {
                    *t += crate::timing::cost::tensor_cost(spec, r).mm_ns;
                }
            }
        }
        if self.follow_tiles {
            for w in r.writes.iter() {
                self.loaded_from.remove(&(w.buf, w.p0, w.p1, w.lo, w.hi));
            }
        }
    }

    fn add_dma(&mut self, line: usize, r: &Instr) {
        let Some(d) = &r.dma else { return };
        if r.opcode == Opcode::DmaDescriptors {
            return;
        }
        let spill = is_spill_record(r);
        let l = &mut self.lines[line];
        let desc = crate::timing::cost::dma_descriptor_bytes(r);
        if desc < EFFICIENT_DESCRIPTOR_BYTES && !spill {
            l.small_dmas += 1;
            l.small_bytes += d.bytes;
            l.smallest_descriptor = if l.small_dmas == 1 {
                desc
            } else {
                l.smallest_descriptor.min(desc)
            };
        }
        let src = r.reads.first().copied();
        let dst = r.writes.first().copied();
        if spill {
            return;
        }
        if let (MemKind::Hbm, Some(s)) = (d.src, src) {
            let k = self.hbm_index(s.buf);
            let l = &mut self.lines[line];
            if self.seen_reads.insert((k as u32, s.lo, s.hi), ()).is_some() {
                l.reloads += 1;
                l.reload_bytes += d.bytes;
            }
            if r.opcode == Opcode::DmaTranspose {
                l.transposes += 1;
                if self.transposed.insert((s.buf, s.lo, s.hi), ()).is_some() {
                    l.recurring += 1;
                }
            }
            let u = &mut self.hbm[k];
            if u.write_bytes > 0 {
                u.read_after_write = true;
            }
            widen(&mut u.read_span, s.lo, s.hi);
            u.read_bytes += d.bytes;
        }
        if let (MemKind::Hbm, Some(w)) = (d.dst, dst) {
            let k = self.hbm_index(w.buf);
            let u = &mut self.hbm[k];
            if u.read_bytes == 0 && u.write_bytes == 0 {
                u.written_first = true;
            }
            widen(&mut u.write_span, w.lo, w.hi);
            u.write_bytes += d.bytes;
        }
        if let Some(w) = dst.filter(|w| self.follow_tiles && matches!(w.buf, BufId::Tile(_))) {
            let key = (w.buf, w.p0, w.p1, w.lo, w.hi);
            match (d.src, src) {
                (MemKind::Hbm, Some(s)) => {
                    self.loaded_from.insert(key, (s.buf, s.lo, s.hi));
                }
                _ => {
                    self.loaded_from.remove(&key);
                }
            }
        }
    }

    /// Ends the pass: `keys` are the rows' line keys (location, api) in slot order.
    pub(crate) fn finish(mut self, keys: Vec<(SourceLoc, &'static str)>) -> BoundFacts {
        self.keys = keys;
        self.seen_reads = Map::default();
        self.loaded_from = Map::default();
        self.transposed = Map::default();
        self
    }

    /// The ideal bytes (see [`PerformanceBounds::bytes_ideal`]).
    pub(crate) fn ideal_bytes(&self) -> u64 {
        let mut total = 0;
        for u in &self.hbm {
            if !u.written_first {
                total += HbmUse::ideal(u.read_span, u.read_bytes);
            }
            if !u.read_after_write {
                total += HbmUse::ideal(u.write_span, u.write_bytes);
            }
        }
        total
    }

    /// The findings of the record lines, by kind.
    pub(crate) fn findings(&self) -> Vec<Finding> {
        let mut out = Vec::new();
        for (k, l) in self.lines.iter().enumerate() {
            let Some(&(loc, api)) = self.keys.get(k) else {
                continue;
            };
            let mut push = |kind, count, bytes, detail: String| {
                out.push(Finding {
                    kind,
                    location: loc.to_string(),
                    api,
                    count,
                    bytes,
                    detail,
                })
            };
            if l.small_dmas > 0 {
                let d = format!("descriptors down to {} B", l.smallest_descriptor);
                push(
                    FindingKind::SmallDescriptors,
                    l.small_dmas,
                    l.small_bytes,
                    d,
                );
            }
            if l.reloads > 0 {
                push(
                    FindingKind::Reloaded,
                    l.reloads,
                    l.reload_bytes,
                    String::new(),
                );
            }
            if l.reduced > 0 {
                let share = 100.0 * l.pe_used / l.pe_full.max(1.0);
                let d = format!(
                    "{} of {} matmuls; {share:.0}% of the PE array used",
                    l.reduced, l.matmuls
                );
                push(FindingKind::ReducedTensorTile, l.reduced, 0, d);
            }
            if l.recurring > 0 {
                let d = format!("{} of {} transposes", l.recurring, l.transposes);
                push(FindingKind::RecurringTranspose, l.recurring, 0, d);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spill_records_are_told_apart_by_their_api_name() {
        use crate::profile::spills::SpillKind;
        for k in [
            SpillKind::InputReload,
            SpillKind::Save,
            SpillKind::Reload,
            SpillKind::Refill,
        ] {
            assert_eq!(SpillKind::of_api(k.name()), Some(k));
        }
        for api in ["nl.load", "nisa.dma_copy", "spill", "spill saves", ""] {
            assert_eq!(SpillKind::of_api(api), None, "{api}");
        }
    }

    #[test]
    fn ideal_bytes_are_the_span_touched_at_most_the_bytes_moved() {
        let mut span = HbmUse::NONE;
        assert_eq!(HbmUse::ideal(span, 0), 0);
        widen(&mut span, 100, 200);
        widen(&mut span, 0, 50);
        assert_eq!(span, (0, 200));
        assert_eq!(HbmUse::ideal(span, 1000), 200);
        assert_eq!(HbmUse::ideal(span, 150), 150);
    }

    #[test]
    fn adjusted_flops_weigh_fp32_four_times_and_fp8_half() {
        assert_eq!(adjusted_flops_factor(DType::F32), 4.0);
        assert_eq!(adjusted_flops_factor(DType::BF16), 1.0);
        assert_eq!(adjusted_flops_factor(DType::F8E4M3), 0.5);
    }

    #[test]
    fn hbm_tensors_keep_their_entries_past_the_scanned_few() {
        let mut f = BoundFacts::new(1);
        let n = BoundFacts::SCANNED_HBM as u64 + 5;
        for round in 0..3u64 {
            for b in 0..n {
                let k = f.hbm_index(BufId::Hbm(b));
                f.hbm[k].read_bytes += b + 1 + round;
            }
        }
        assert_eq!(f.hbm.len(), n as usize);
        for b in 0..n {
            let k = f.hbm_index(BufId::Hbm(b));
            assert_eq!(f.hbm[k].read_bytes, 3 * (b + 1) + 3);
        }
        assert_eq!(f.hbm.len(), n as usize);
    }

    #[test]
    fn matmul_facts_follow_each_matmul_when_shapes_and_dtypes_alternate() {
        let spec = crate::target::Target::Trn1.spec();
        let matmul = |k, m, n, dtype| {
            let mut r = Instr::new(Engine::Tensor, Opcode::Matmul, "t", SourceLoc::caller());
            r.in_dtype = dtype;
            r.matmul = Some(MatmulDims {
                k,
                m,
                n,
                fp32: dtype == DType::F32,
                onezero: 0,
            });
            r
        };
        let shapes = [
            matmul(128, 128, 512, DType::BF16),
            matmul(128, 128, 512, DType::F32),
            matmul(64, 128, 512, DType::BF16),
            matmul(128, 128, 512, DType::BF16),
            // The same operand sizes at another dtype: other adjusted FLOPs.
            matmul(128, 128, 512, DType::F8E4M3),
            matmul(128, 32, 128, DType::F8E4M3),
        ];
        let mut f = BoundFacts::new(1);
        f.begin_instance(&shapes);
        let (mut ns, mut flops, mut used, mut full, mut reduced) = (0.0, 0.0, 0.0, 0.0, 0);
        for r in shapes.iter().cycle().take(3 * shapes.len()) {
            f.add(spec, 0, 0, r);
            let one = MatmulFacts::of(spec, r, r.matmul.unwrap());
            ns += crate::timing::cost::tensor_cost(spec, r).mm_ns;
            flops += r.hw_flops() as f64 * adjusted_flops_factor(r.in_dtype);
            used += one.pe_used;
            full += one.pe_full;
            reduced += one.reduced as usize;
        }
        assert_eq!(f.tensor_ns[0], ns);
        assert_eq!(f.useful_flops, flops);
        let l = &f.lines[0];
        assert_eq!((l.matmuls, l.pe_used, l.pe_full), (18, used, full));
        // The 64-row and 32-column matmuls use a reduced tile.
        assert_eq!((l.reduced, reduced), (6, 6));
    }
}
