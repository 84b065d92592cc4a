//! DMA rules (docs/reference/hardware.md §2.7): what one DMA costs on each of its
//! NeuronCore's DMA engines ([`dma_plan`]: descriptors, engine shares, efficiency), and how DMAs
//! share the engines and the HBM stack over time ([`queued_at`], [`engine_share`],
//! [`hbm_transfer`], [`dma_end`]).
//!
//! - A DMA is queued `dma_fixed_latency_ns` after its inputs are ready (descriptor setup and
//!   the semaphore-to-start latency) and served first come, first served.
//! - Partition `p` of an on-chip side is served by DMA engine `p / dma_partitions_per_engine`
//!   (a 128-partition tile maps to 16 transfers of 8 partitions); HBM-to-HBM copies are spread
//!   evenly over all engines. Each engine serves one transfer at a time, its share of the bytes
//!   at `dma_engine_bytes_per_ns` (times the DMA's efficiency), and every engine is held at
//!   least `dma_engine_min_ns` by every DMA (idle engines still write the completion
//!   semaphore).
//! - A DMA whose HBM side is gathered from separate runs is a list of descriptors, each one
//!   contiguous run of its HBM side capped by a partition row of its on-chip side
//!   ([`dma_descriptor_bytes`]); short ones move at a fitted fraction of the engine's rate,
//!   long ones at the full rate ([`dma_run_efficiency`], lengths per target).
//! - The HBM stack a NeuronCore shares with its neighbours moves one DMA's HBM bytes after
//!   another at `hbm_bytes_per_ns`: no engine share ends before its DMA's bytes have moved.
//! - A DMA takes at least `dma_min_transfer_ns` from its first engine's start (latency, not
//!   occupancy).

use crate::record::CostFacts;
use crate::record::{MemKind, Opcode};
use crate::target::TargetSpec;

/// When a DMA whose inputs are ready at `ready` joins the DMA queues: after the fixed trigger
/// latency (descriptor setup, semaphore-to-start) `dma_fixed_latency_ns`.
#[inline]
pub(super) fn queued_at(spec: &TargetSpec, ready: f64) -> f64 {
    ready + spec.dma_fixed_latency_ns
}

/// The HBM stack's part of a DMA queued at `t` that moves its HBM bytes in `hbm_ns`: the stack,
/// free from `*free` on, serves it after the DMAs before it; returns when its bytes have moved
/// (and the stack is free again).
#[inline]
pub(super) fn hbm_transfer(free: &mut f64, t: f64, hbm_ns: f64) -> f64 {
    let end = t.max(*free) + hbm_ns;
    *free = end;
    end
}

/// One DMA engine's share of a DMA queued at `t`: the engine, free from `free` on, starts it
/// when both are ready and is busy `share_ns`, and not less than until `bound` (the DMA's HBM
/// transfer end, or `t`). Returns `(start, end)`.
#[inline]
pub(super) fn engine_share(t: f64, free: f64, share_ns: f64, bound: f64) -> (f64, f64) {
    let s = t.max(free);
    (s, (s + share_ns).max(bound))
}

/// True when a DMA's own time is spent on bandwidth: moving its largest engine share
/// (`busiest_ns`, [`DmaPlan::busiest_ns`]) takes longer than the per-DMA engine minimum and the
/// small-transfer floor (`floor_ns`, [`DmaPlan::floor_ns`]); else it is bound by DMA
/// fixed cost. The scheduler evaluates it on each DMA's plan once.
#[inline]
pub(super) fn bandwidth_bound(spec: &TargetSpec, busiest_ns: f64, floor_ns: f64) -> bool {
    busiest_ns > spec.dma_engine_min_ns && busiest_ns > floor_ns
}

/// When a DMA whose engine shares started at `first` at the earliest and ended at `last` at
/// the latest completes: at `last`, and at least `floor_ns` (`dma_min_transfer_ns`) after
/// `first`.
#[inline]
pub(super) fn dma_end(first: f64, last: f64, floor_ns: f64) -> f64 {
    last.max(first + floor_ns)
}

/// How one DMA record occupies the DMA engines of its NeuronCore.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DmaPlan {
    /// Time, in ns, each DMA engine (index = engine) is busy with the record: its share of the
    /// bytes at the engine's bandwidth (times the record's efficiency), at least
    /// `dma_engine_min_ns` on every engine (descriptor processing and the completion write
    /// each engine makes), plus `dma_partial_write_ns` on the engines that write partial ECC
    /// words.
    pub engine_ns: Vec<f64>,
    /// The longest of `engine_ns` (0 when there are none).
    pub busiest_ns: f64,
    /// Every engine has the same share (`engine_ns` holds one value).
    pub even: bool,
    /// Bytes moved.
    pub bytes: u64,
    /// Bytes read from or written to HBM (both for HBM-to-HBM copies).
    pub hbm_bytes: u64,
    /// Time, in ns, of the record on its HBM stack.
    pub hbm_ns: f64,
    /// The shortest time the DMA can take (latency floor).
    pub floor_ns: f64,
    /// Fraction of the engines' bandwidth the record reaches (transposing DMAs and short
    /// descriptors are slower).
    pub efficiency: f64,
}

/// Fraction of an engine's bandwidth a descriptor of `run` bytes reaches on a DMA touching
/// HBM: `dma_short_run_efficiency` up to `dma_short_run_bytes`, the full rate from
/// `dma_full_run_bytes` on, and in between a rise linear in log2 of the length (so the cost
/// of a byte never rises with the run's length).
pub fn dma_run_efficiency(spec: &TargetSpec, run: u64) -> f64 {
    let (short, full) = (spec.dma_short_run_bytes.max(1), spec.dma_full_run_bytes);
    let low = spec.dma_short_run_efficiency;
    if run <= short {
        low
    } else if run >= full {
        1.0
    } else {
        let t = (run as f64 / short as f64).log2() / (full as f64 / short as f64).log2();
        low + (1.0 - low) * t
    }
}

/// Bandwidth efficiency of a DMA: `dma_transpose_efficiency` for transposing DMAs, times
/// [`dma_run_efficiency`] of its descriptors ([`dma_descriptor_bytes`]) when its HBM side, in
/// either direction, is gathered from separate runs (the contiguous run is shorter than the
/// transfer). A contiguous HBM block and SBUF-to-SBUF copies move at the full rate
/// (calibration §3a: `[128, 1000]` and `[128, 2000]` fp32 blocks stream at 17 B/ns per engine).
pub fn dma_efficiency(spec: &TargetSpec, r: impl Into<CostFacts>) -> f64 {
    let r = r.into();
    let transpose = if r.opcode == Opcode::DmaTranspose {
        spec.dma_transpose_efficiency
    } else {
        1.0
    };
    let runs = match r.dma {
        Some(d) if d.chunk_bytes < d.bytes && (d.src == MemKind::Hbm || d.dst == MemKind::Hbm) => {
            dma_run_efficiency(spec, dma_descriptor_bytes(r))
        }
        _ => 1.0,
    };
    transpose * runs
}

/// Bytes one descriptor of a DMA moves: the contiguous run its source and destination share.
/// An on-chip side splits the transfer into partition rows (`bytes / partitions`, or single
/// elements when the tile's free access is strided); the HBM side into its contiguous runs
/// (`chunk_bytes`).
pub fn dma_descriptor_bytes(r: impl Into<CostFacts>) -> u64 {
    let r = r.into();
    let Some(d) = r.dma else {
        return r.free.max(1) as u64 * r.in_dtype.size() as u64;
    };
    let on_chip = d.src != MemKind::Hbm || d.dst != MemKind::Hbm;
    let row = if !on_chip {
        d.chunk_bytes
    } else if r.contiguous {
        d.bytes / d.partitions.max(1) as u64
    } else {
        r.in_dtype.size().min(r.out_dtype.size()) as u64
    };
    d.chunk_bytes.min(row).max(1)
}

/// True when a DMA's descriptors are narrower than the written memory's ECC word
/// (`dma_write_word_bytes`), so every write is a read-modify-write whose receipt the
/// completion semaphore waits for. Transposing DMAs write whole `[P, 16]` blocks cooperatively
/// \[E S2\] and never do.
pub fn writes_partial_words(spec: &TargetSpec, r: impl Into<CostFacts>) -> bool {
    let r = r.into();
    r.opcode != Opcode::DmaTranspose && dma_descriptor_bytes(r) < spec.dma_write_word_bytes
}

/// The DMA plan of a record: partition `p` is served by engine `p / 8`; HBM-to-HBM copies
/// (no on-chip side) are spread evenly over all engines. Every engine is occupied at least
/// `dma_engine_min_ns` (descriptor processing and its completion-semaphore write), whether or
/// not it moves bytes; an engine that moves bytes of a DMA with partial-word descriptors
/// ([`writes_partial_words`]) is held `dma_partial_write_ns` longer for the write receipts.
pub fn dma_plan(spec: &TargetSpec, r: impl Into<CostFacts>) -> DmaPlan {
    let mut plan = DmaPlan::default();
    dma_plan_into(spec, r, &mut plan);
    plan
}

/// [`dma_plan`] written into `plan`, reusing its `engine_ns` allocation (the scheduler plans
/// every DMA record into one buffer).
pub fn dma_plan_into(spec: &TargetSpec, r: impl Into<CostFacts>, plan: &mut DmaPlan) {
    let r = r.into();
    let (bytes, src, dst, parts, p0) = match r.dma {
        Some(d) => (
            d.bytes,
            d.src,
            d.dst,
            d.partitions.max(1) as usize,
            d.start_partition as usize,
        ),
        None => (
            r.partitions.max(1) as u64 * r.free as u64 * r.in_dtype.size() as u64,
            MemKind::Hbm,
            MemKind::Sbuf,
            r.partitions.max(1) as usize,
            0,
        ),
    };
    let efficiency = dma_efficiency(spec, r);
    let bw = spec.dma_engine_bytes_per_ns * efficiency;
    let n_eng = spec.dma_engines.max(1);
    let ppe = spec.dma_partitions_per_engine.max(1);
    let partial_write = if writes_partial_words(spec, r) {
        spec.dma_partial_write_ns
    } else {
        0.0
    };
    let engine_ns = |b: f64| {
        let receipt = if b > 0.0 { partial_write } else { 0.0 };
        (b / bw).max(spec.dma_engine_min_ns) + receipt
    };
    plan.engine_ns.clear();
    // The busiest engine: the largest of the few distinct shares present (never NaN: a NaN
    // quotient becomes the engine minimum); and whether they are all one value.
    let (mut busiest, mut one, mut even) = (0.0f64, None, true);
    let mut has = |x: f64| {
        if x > busiest {
            busiest = x;
        }
        even &= *one.get_or_insert(x.to_bits()) == x.to_bits();
        x
    };
    if src == MemKind::Hbm && dst == MemKind::Hbm {
        let share = has(engine_ns(bytes as f64 / n_eng as f64));
        plan.engine_ns.resize(n_eng, share);
    } else {
        let p0 = p0.min(n_eng * ppe - 1);
        let p_end = (p0 + parts).min(n_eng * ppe).max(p0 + 1);
        let total = (p_end - p0) as f64;
        // Engine `e` serves partitions `e * ppe .. (e + 1) * ppe`: the engines before the
        // first and after the last partition move nothing, the ones strictly between serve
        // `ppe` partitions each; only the first and last can be partial.
        let share = |n: usize| engine_ns(bytes as f64 * n as f64 / total);
        let served = |e: usize| p_end.min((e + 1) * ppe).saturating_sub(p0.max(e * ppe));
        let (e_first, e_last) = (p0 / ppe, (p_end - 1) / ppe);
        let idle = share(0);
        let v = &mut plan.engine_ns;
        if e_first > 0 || e_last + 1 < n_eng {
            has(idle);
        }
        v.resize(e_first, idle);
        v.push(has(share(served(e_first))));
        if e_last > e_first {
            let middle = share(ppe);
            if e_last > e_first + 1 {
                has(middle);
            }
            v.resize(e_last, middle);
            v.push(has(share(served(e_last))));
        }
        v.resize(n_eng, idle);
    }
    plan.busiest_ns = busiest;
    plan.even = even;
    let hbm_bytes = match (src == MemKind::Hbm, dst == MemKind::Hbm) {
        (true, true) => 2 * bytes,
        (false, false) => 0,
        _ => bytes,
    };
    plan.bytes = bytes;
    plan.hbm_bytes = hbm_bytes;
    plan.hbm_ns = hbm_bytes as f64 / spec.hbm_bytes_per_ns;
    plan.floor_ns = spec.dma_min_transfer_ns;
    plan.efficiency = efficiency;
}

#[cfg(test)]
mod tests {
    use super::super::test_records::dma;
    use super::*;
    use crate::dtype::DType;
    use crate::record::Instr;
    use crate::target::Target;

    #[test]
    fn dma_spreads_partitions_over_engines() {
        let s = Target::Trn2.spec();
        let p = dma_plan(s, &dma(128, 0, 128 * 1024));
        assert_eq!(p.engine_ns.len(), 16);
        assert!((p.engine_ns[5] - 8.0 * 1024.0 / 23.0).abs() < 1e-9);
        assert_eq!(p.hbm_bytes, 128 * 1024);
        // One engine moves the bytes; the other 15 are held for the minimum.
        let p = dma_plan(s, &dma(4, 0, 32768));
        assert!((p.engine_ns[0] - 32768.0 / 23.0).abs() < 1e-9);
        assert!(p.engine_ns[1..].iter().all(|&t| t == s.dma_engine_min_ns));
        // Partitions 60..76 touch engines 7, 8 and 9 with 4, 8 and 4 partitions.
        let p = dma_plan(s, &dma(16, 60, 16 * 10_000));
        assert!((p.engine_ns[8] - 2.0 * p.engine_ns[7]).abs() < 1e-9);
        assert!((p.engine_ns[9] - p.engine_ns[7]).abs() < 1e-9);
        assert_eq!(p.engine_ns[10], s.dma_engine_min_ns);
    }

    #[test]
    fn a_plan_knows_its_busiest_engine_and_whether_all_shares_are_one() {
        // Whole, partial, one-engine, HBM-to-HBM and empty DMAs on both targets: the summary
        // fields agree with the shares themselves.
        for s in [Target::Trn1.spec(), Target::Trn2.spec()] {
            let mut hbm = dma(128, 0, 1 << 20);
            hbm.dma.as_mut().unwrap().dst = MemKind::Hbm;
            let cases = [
                dma(128, 0, 128 * 1024),
                dma(4, 0, 32768),
                dma(16, 60, 16 * 10_000),
                dma(100, 3, 100 * 999),
                dma(1, 127, 64),
                dma(128, 0, 0),
                hbm,
            ];
            for r in &cases {
                let p = dma_plan(s, r);
                let max = p.engine_ns.iter().copied().fold(0.0f64, f64::max);
                assert_eq!(p.busiest_ns.to_bits(), max.to_bits(), "{:?}", p.engine_ns);
                let even = p
                    .engine_ns
                    .iter()
                    .all(|x| x.to_bits() == p.engine_ns[0].to_bits());
                assert_eq!(p.even, even, "{:?}", p.engine_ns);
            }
        }
    }

    #[test]
    fn descriptors_are_partition_rows_or_hbm_runs() {
        // [128, 1] fp32 from a contiguous 512-byte HBM run: 4-byte rows.
        assert_eq!(dma_descriptor_bytes(&dma(128, 0, 512)), 4);
        // [128, 2] fp32: 8-byte rows.
        assert_eq!(dma_descriptor_bytes(&dma(128, 0, 1024)), 8);
        // Rows longer than the HBM side's runs: the runs.
        let mut gather = dma(128, 0, 128 * 1024);
        gather.dma.as_mut().unwrap().chunk_bytes = 256;
        assert_eq!(dma_descriptor_bytes(&gather), 256);
        // A strided tile side moves one element per descriptor.
        let mut strided = dma(128, 0, 128 * 1024);
        strided.contiguous = false;
        strided.in_dtype = DType::BF16;
        strided.out_dtype = DType::BF16;
        assert_eq!(dma_descriptor_bytes(&strided), 2);
    }

    #[test]
    fn partial_word_writes_hold_the_data_engines_for_the_write_receipts() {
        let s = Target::Trn1.spec();
        // 4-byte rows on all 128 partitions: every engine pays the read-modify-write receipt.
        let narrow = dma_plan(s, &dma(128, 0, 512));
        let want = s.dma_engine_min_ns + s.dma_partial_write_ns;
        assert!(narrow.engine_ns.iter().all(|&t| (t - want).abs() < 1e-9));
        // 8-byte rows: whole words, the per-DMA minimum only.
        let wide = dma_plan(s, &dma(128, 0, 1024));
        assert!(wide.engine_ns.iter().all(|&t| t == s.dma_engine_min_ns));
        // One 4-byte row: only engine 0 writes data; the others write the semaphore only.
        let one = dma_plan(s, &dma(1, 0, 4));
        assert!((one.engine_ns[0] - want).abs() < 1e-9);
        assert!(one.engine_ns[1..].iter().all(|&t| t == s.dma_engine_min_ns));
        // Transposing DMAs write whole blocks.
        let mut t = dma(128, 0, 512);
        t.opcode = Opcode::DmaTranspose;
        assert!(!writes_partial_words(s, &t));
    }

    /// A load of `parts` partition rows of `row` bytes each, gathered from separate HBM rows
    /// (one descriptor per row).
    fn gathered(parts: u32, row: u64) -> Instr {
        let mut r = dma(parts, 0, parts as u64 * row);
        r.dma.as_mut().unwrap().chunk_bytes = row;
        r
    }

    #[test]
    fn a_longer_run_never_costs_more_per_byte_and_4_kib_runs_reach_the_peak() {
        for s in [
            Target::Trn1.spec(),
            Target::Trn2.spec(),
            Target::Trn3.spec(),
        ] {
            let mut prev = 0.0;
            for run in (0..=16).map(|k| 1u64 << k) {
                let e = dma_run_efficiency(s, run);
                assert!(e >= prev && e > 0.0 && e <= 1.0, "{}: {run} B: {e}", s.name);
                prev = e;
                // One engine's share per byte of a 128-partition gather of `run`-byte rows.
                let p = dma_plan(s, &gathered(128, run.max(8)));
                let per_byte = p.busiest_ns / (8 * run.max(8)) as f64;
                let q = dma_plan(s, &gathered(128, 2 * run.max(8)));
                assert!(q.busiest_ns / (16 * run.max(8)) as f64 <= per_byte + 1e-12);
            }
            // The fitted short rows are slow; from `dma_full_run_bytes` on (4 KiB on trn2,
            // the DMA guide's saturation point) runs move within 3 % of the peak.
            assert_eq!(dma_run_efficiency(s, 256), s.dma_short_run_efficiency);
            assert_eq!(
                dma_run_efficiency(s, s.dma_short_run_bytes),
                s.dma_short_run_efficiency
            );
            assert!(s.dma_short_run_efficiency < 0.9);
            let full = s.dma_full_run_bytes;
            for run in [full, 2 * full, 1 << 20] {
                let p = dma_plan(s, &gathered(128, run));
                let peak = 8.0 * run as f64 / s.dma_engine_bytes_per_ns;
                assert!(p.busiest_ns <= peak * 1.03, "{}: {run} B", s.name);
            }
            // Runs between the two lengths sit in between.
            let mid = dma_run_efficiency(s, 2 * s.dma_short_run_bytes);
            assert!(mid > s.dma_short_run_efficiency && mid < 1.0);
        }
    }

    #[test]
    fn both_hbm_directions_pay_for_short_descriptors_and_sbuf_copies_do_not() {
        let s = Target::Trn1.spec();
        let load = gathered(128, 512);
        let mut store = load.clone();
        let d = store.dma.as_mut().unwrap();
        (d.src, d.dst) = (MemKind::Sbuf, MemKind::Hbm);
        assert_eq!(dma_plan(s, &load).engine_ns, dma_plan(s, &store).engine_ns);
        assert_eq!(dma_efficiency(s, &store), s.dma_short_run_efficiency);
        let mut on_chip = load;
        on_chip.dma.as_mut().unwrap().src = MemKind::Sbuf;
        assert_eq!(dma_efficiency(s, &on_chip), 1.0);
        // A contiguous HBM block moves at the full rate, whatever its partition rows.
        assert_eq!(dma_descriptor_bytes(&dma(128, 0, 128 * 512)), 512);
        assert_eq!(dma_efficiency(s, &dma(128, 0, 128 * 512)), 1.0);
    }

    #[test]
    fn a_64_partition_transfer_moves_its_bytes_on_the_8_engines_of_its_partitions() {
        // "each DMA engine corresponds to 8 partition lanes" (NKI DMA overview, its [4, 4096]
        // example uses one engine): partitions 0..64 are engines 0..8; the other 8 only write
        // the completion semaphore.
        for s in [Target::Trn1.spec(), Target::Trn2.spec()] {
            let p = dma_plan(s, &dma(64, 0, 64 * 8192));
            let share = 8.0 * 8192.0 / s.dma_engine_bytes_per_ns;
            assert!(p.engine_ns[..8].iter().all(|&t| (t - share).abs() < 1e-9));
            assert!(p.engine_ns[8..].iter().all(|&t| t == s.dma_engine_min_ns));
            // Partitions 64..128: the upper 8 engines.
            let p = dma_plan(s, &dma(64, 64, 64 * 8192));
            assert!(p.engine_ns[..8].iter().all(|&t| t == s.dma_engine_min_ns));
            assert!(p.engine_ns[8..].iter().all(|&t| (t - share).abs() < 1e-9));
        }
    }
}
