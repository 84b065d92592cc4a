//! Per-instruction costs: how long one record occupies its engine, from the target's table
//! (shared/reference/hardware.md §2). Costs are initiation intervals in cycles of the executing
//! engine, converted to ns with that engine's clock; DMA costs are bytes over bandwidth.

use crate::dtype::DType;
use crate::math::AluOp;
use crate::record::{Engine, Instr, MemKind, Opcode};
use crate::target::TargetSpec;

/// The two TensorE phases of a matmul or transpose, in ns.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TensorCost {
    /// LoadStationary: `N_stat / 4` cycles (x the fp32 factor); runs in the background of the
    /// previous MultiplyMoving.
    pub ls_ns: f64,
    /// MultiplyMoving: `max(min(64, N_stat), N_mov)` cycles (x the fp32 factor).
    pub mm_ns: f64,
}

/// TensorE cost of a matmul or transpose record. A transpose of a `[P, F]` tile is a matmul
/// with the tile as stationary (`N_stat = F`) and the identity as moving (`N_mov = P`), so the
/// same formula gives the documented `max(P, min(64, F))`.
pub fn tensor_cost(spec: &TargetSpec, r: &Instr) -> TensorCost {
    let (n_stat, n_mov, fp32) = match (r.opcode, r.matmul) {
        (Opcode::Transpose, _) => (
            r.free.max(1) as u64,
            r.partitions.max(1) as u64,
            r.in_dtype == DType::F32,
        ),
        (_, Some(m)) => (m.m.max(1) as u64, m.n.max(1) as u64, m.fp32),
        (_, None) => (r.partitions.max(1) as u64, r.free.max(1) as u64, false),
    };
    let factor = if !fp32 {
        1
    } else if r.opcode == Opcode::Transpose {
        spec.fp32_transpose_factor
    } else {
        spec.fp32_matmul_factor
    };
    let mm_cycles = n_stat.min(spec.mm_init_cycles).max(n_mov) * factor;
    let ls_cycles = n_stat.div_ceil(spec.ls_speedup).max(1) * factor;
    TensorCost {
        ls_ns: ls_cycles as f64 / spec.tensor_ghz,
        mm_ns: mm_cycles as f64 / spec.tensor_ghz,
    }
}

fn is16(d: DType) -> bool {
    matches!(d, DType::BF16 | DType::F16)
}

/// Cycles per free element (`k` of `k * N`, before performance modes) of a non-TensorE,
/// non-DMA instruction (hardware.md §2.3 / §2.4 table, S13). Every opcode has its rule here
/// (no default arm): a new opcode does not compile until it has a cost.
fn per_element(r: &Instr) -> f64 {
    let all16 = is16(r.in_dtype) && is16(r.out_dtype);
    match r.opcode {
        Opcode::TensorTensor => {
            // One PSUM + one SBUF input, or all-SBUF bf16 add/mul/sub contiguous: N; else 2N.
            let fast_op = matches!(r.alu, Some(AluOp::Add | AluOp::Multiply | AluOp::Subtract));
            if r.psum || (r.in_dtype == DType::BF16 && all16 && fast_op && r.contiguous) {
                1.0
            } else {
                2.0
            }
        }
        Opcode::ScalarTensorTensor if r.in_dtype == DType::BF16 && r.free & 1 == 0 => 1.0,
        Opcode::ScalarTensorTensor => 2.0,
        Opcode::TensorReduce if all16 => 0.5,
        Opcode::TensorTensorScan => 2.0,
        Opcode::Select if r.psum => 1.0,
        Opcode::Select => 2.0,
        Opcode::Reciprocal if r.engine == Engine::Vector => 8.0,
        Opcode::Memset if is16(r.out_dtype) => 0.5,
        Opcode::BnAggr => 13.0 / 3.0,
        // max(MIN_II, N) instructions (and GpSimd's start + N).
        Opcode::TensorReduce
        | Opcode::Reciprocal
        | Opcode::Memset
        | Opcode::TensorScalar
        | Opcode::TensorCopy
        | Opcode::Activation
        | Opcode::PartitionReduce
        | Opcode::Iota
        | Opcode::AffineSelect
        | Opcode::BnStats
        | Opcode::VectorTranspose
        | Opcode::Gather
        | Opcode::Rng
        | Opcode::SetRngSeed
        | Opcode::Dropout
        | Opcode::Max8
        | Opcode::FindIndex8 => 1.0,
        // Costed by `tensor_cost` / `dma_plan`; a full pass over the data if asked here.
        Opcode::Matmul | Opcode::Transpose | Opcode::DmaCopy | Opcode::DmaTranspose => 1.0,
    }
}

/// VectorE performance-mode speed-up on NC-v3+ \[E S2\]: 4x for tensor_copy / tensor_scalar with
/// 16-bit SBUF input and output and contiguous data, 2x for those when one side is PSUM or the
/// data is strided, 2x for tensor_tensor with both inputs in SBUF and all 16-bit.
pub fn vector_perf_mode(spec: &TargetSpec, r: &Instr) -> f64 {
    if !spec.vector_perf_modes || r.engine != Engine::Vector {
        return 1.0;
    }
    let all16 = is16(r.in_dtype) && is16(r.out_dtype);
    match r.opcode {
        Opcode::TensorCopy | Opcode::TensorScalar => {
            if all16 && !r.psum && r.contiguous {
                4.0
            } else if r.psum || all16 {
                2.0
            } else {
                1.0
            }
        }
        Opcode::TensorTensor if all16 && !r.psum => 2.0,
        _ => 1.0,
    }
}

/// Cycles of a Vector/Scalar/GpSimd/Sync record on its engine.
pub fn compute_cycles(spec: &TargetSpec, r: &Instr) -> u64 {
    let n = r.free.max(1) as f64;
    let work = (per_element(r) * n / vector_perf_mode(spec, r)).ceil() as u64;
    match r.engine {
        Engine::GpSimd => spec.gpsimd_start + work,
        Engine::Sync => spec.min_ii,
        _ => {
            // iota / affine_select pay GpSimd's start-up on whichever engine runs them.
            let base = if matches!(r.opcode, Opcode::Iota | Opcode::AffineSelect) {
                spec.gpsimd_start + work
            } else if matches!(r.opcode, Opcode::Max8 | Opcode::FindIndex8) {
                // `N` cycles, no MIN_II floor (hardware.md §2.3; nki.isa.max8 2.26 docs).
                work
            } else {
                work.max(spec.min_ii)
            };
            // activation_reduce / tensor_scalar_reduce: + MIN_II for the accumulator [E S13].
            if r.accumulate {
                base + spec.min_ii
            } else {
                base
            }
        }
    }
}

/// ns a Vector/Scalar/GpSimd/Sync record occupies its engine.
pub fn compute_ns(spec: &TargetSpec, r: &Instr) -> f64 {
    compute_cycles(spec, r) as f64 / spec.engine_ghz(r.engine)
}

/// Extra wait, in ns, between a producer's end and a dependent consumer's start on `engine`
/// (pipeline drain + semaphore): `dependency_latency_cycles` of the consumer's clock.
pub fn dependency_latency_ns(spec: &TargetSpec, engine: Engine) -> f64 {
    match engine {
        Engine::Dma => 0.0,
        e => spec.dependency_latency_cycles as f64 / spec.engine_ghz(e),
    }
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
    /// Fraction of the engines' bandwidth the record reaches (transposing DMAs and row gathers
    /// are slower).
    pub efficiency: f64,
}

/// Bandwidth efficiency of a DMA: `dma_transpose_efficiency` for transposing DMAs, times
/// `dma_row_gather_efficiency` when its HBM side is gathered from separate rows (the
/// contiguous run is shorter than the transfer).
pub fn dma_efficiency(spec: &TargetSpec, r: &Instr) -> f64 {
    let transpose = if r.opcode == Opcode::DmaTranspose {
        spec.dma_transpose_efficiency
    } else {
        1.0
    };
    let gather = match r.dma {
        Some(d) if d.chunk_bytes < d.bytes && (d.src == MemKind::Hbm || d.dst == MemKind::Hbm) => {
            spec.dma_row_gather_efficiency
        }
        _ => 1.0,
    };
    transpose * gather
}

/// Bytes one descriptor of a DMA moves: the contiguous run its source and destination share.
/// An on-chip side splits the transfer into partition rows (`bytes / partitions`, or single
/// elements when the tile's free access is strided); the HBM side into its contiguous runs
/// (`chunk_bytes`).
pub fn dma_descriptor_bytes(r: &Instr) -> u64 {
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
pub fn writes_partial_words(spec: &TargetSpec, r: &Instr) -> bool {
    r.opcode != Opcode::DmaTranspose && dma_descriptor_bytes(r) < spec.dma_write_word_bytes
}

/// The DMA plan of a record: partition `p` is served by engine `p / 8`; HBM-to-HBM copies
/// (no on-chip side) are spread evenly over all engines. Every engine is occupied at least
/// `dma_engine_min_ns` (descriptor processing and its completion-semaphore write), whether or
/// not it moves bytes; an engine that moves bytes of a DMA with partial-word descriptors
/// ([`writes_partial_words`]) is held `dma_partial_write_ns` longer for the write receipts.
pub fn dma_plan(spec: &TargetSpec, r: &Instr) -> DmaPlan {
    let mut plan = DmaPlan::default();
    dma_plan_into(spec, r, &mut plan);
    plan
}

/// [`dma_plan`] written into `plan`, reusing its `engine_ns` allocation (the scheduler plans
/// every DMA record into one buffer).
pub fn dma_plan_into(spec: &TargetSpec, r: &Instr, plan: &mut DmaPlan) {
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
    use super::*;
    use crate::error::SourceLoc;
    use crate::record::{DmaDims, MatmulDims};
    use crate::target::Target;

    fn loc() -> SourceLoc {
        SourceLoc::caller()
    }

    fn mm(m: u32, n: u32, fp32: bool) -> Instr {
        Instr {
            partitions: 128,
            free: n,
            matmul: Some(MatmulDims { k: 128, m, n, fp32 }),
            ..Instr::new(Engine::Tensor, Opcode::Matmul, "nisa.nc_matmul", loc())
        }
    }

    fn vec_op(op: Opcode, engine: Engine, free: u32, dt: DType) -> Instr {
        Instr {
            partitions: 128,
            free,
            in_dtype: dt,
            out_dtype: dt,
            ..Instr::new(engine, op, "nl.exp", loc())
        }
    }

    #[test]
    fn matmul_costs_follow_the_formula() {
        let s = Target::Trn1.spec();
        let c = tensor_cost(s, &mm(128, 512, false));
        assert!((c.mm_ns - 512.0 / 2.8).abs() < 1e-9);
        assert!((c.ls_ns - 32.0 / 2.8).abs() < 1e-9);
        // Short moving operand: the 64-cycle floor.
        assert!((tensor_cost(s, &mm(128, 1, false)).mm_ns - 64.0 / 2.8).abs() < 1e-9);
        // Short stationary: max(min(64, 8), 16) = 16 cycles.
        assert!((tensor_cost(s, &mm(8, 16, false)).mm_ns - 16.0 / 2.8).abs() < 1e-9);
        // fp32 is 4x.
        assert!((tensor_cost(s, &mm(128, 512, true)).mm_ns - 4.0 * 512.0 / 2.8).abs() < 1e-9);
        let s2 = Target::Trn2.spec();
        assert!((tensor_cost(s2, &mm(128, 512, false)).mm_ns - 512.0 / 2.4).abs() < 1e-9);
    }

    #[test]
    fn transpose_cost_is_max_p_min_64_f() {
        let s = Target::Trn1.spec();
        let t = |p: u32, f: u32| Instr {
            partitions: p,
            free: f,
            in_dtype: DType::BF16,
            ..Instr::new(Engine::Tensor, Opcode::Transpose, "nl.transpose", loc())
        };
        for (p, f) in [(128u32, 128u32), (32, 128), (32, 16), (8, 4)] {
            let want = (p as u64).max((f as u64).min(64)) as f64 / 2.8;
            assert!(
                (tensor_cost(s, &t(p, f)).mm_ns - want).abs() < 1e-9,
                "{p}x{f}"
            );
        }
        let mut f32t = t(128, 128);
        f32t.in_dtype = DType::F32;
        let s2 = Target::Trn2.spec();
        assert!((tensor_cost(s2, &f32t).mm_ns - 2.0 * 128.0 / 2.4).abs() < 1e-9);
        assert!((tensor_cost(s, &f32t).mm_ns - 4.0 * 128.0 / 2.8).abs() < 1e-9);
    }

    #[test]
    fn vector_scalar_costs() {
        let s = Target::Trn1.spec();
        // max(64, N)
        let a = vec_op(Opcode::Activation, Engine::Scalar, 1, DType::F32);
        assert_eq!(compute_cycles(s, &a), 64);
        let mut a = vec_op(Opcode::Activation, Engine::Scalar, 1000, DType::F32);
        assert_eq!(compute_cycles(s, &a), 1000);
        // activation_reduce: + MIN_II for the accumulator, whatever the API is called.
        a.accumulate = true;
        assert_eq!(compute_cycles(s, &a), 1064);
        a.accumulate = false;
        assert!((compute_ns(s, &a) - 1000.0 / 1.4).abs() < 1e-9);
        // tensor_tensor fp32 SBUF: 2N; one PSUM input: N.
        let mut tt = vec_op(Opcode::TensorTensor, Engine::Vector, 512, DType::F32);
        tt.inputs = 2;
        assert_eq!(compute_cycles(s, &tt), 1024);
        tt.psum = true;
        assert_eq!(compute_cycles(s, &tt), 512);
        // reciprocal on VectorE: 8N.
        let r = vec_op(Opcode::Reciprocal, Engine::Vector, 100, DType::F32);
        assert_eq!(compute_cycles(s, &r), 800);
        // GpSimd iota: 150 + N.
        let i = vec_op(Opcode::Iota, Engine::GpSimd, 300, DType::F32);
        assert_eq!(compute_cycles(s, &i), 450);
        // bf16 reduce: N/2.
        let red = vec_op(Opcode::TensorReduce, Engine::Vector, 1024, DType::BF16);
        assert_eq!(compute_cycles(s, &red), 512);
    }

    #[test]
    fn trn2_vector_performance_modes() {
        let s1 = Target::Trn1.spec();
        let s2 = Target::Trn2.spec();
        let c = vec_op(Opcode::TensorCopy, Engine::Vector, 2048, DType::BF16);
        assert_eq!(compute_cycles(s1, &c), 2048);
        assert_eq!(compute_cycles(s2, &c), 512);
        let mut strided = c.clone();
        strided.contiguous = false;
        assert_eq!(compute_cycles(s2, &strided), 1024);
        let f = vec_op(Opcode::TensorCopy, Engine::Vector, 2048, DType::F32);
        assert_eq!(compute_cycles(s2, &f), 2048);
        // The 64-cycle floor still holds.
        let small = vec_op(Opcode::TensorScalar, Engine::Vector, 128, DType::BF16);
        assert_eq!(compute_cycles(s2, &small), 64);
        // ScalarE has no performance mode on trn2.
        let sc = vec_op(Opcode::TensorCopy, Engine::Scalar, 2048, DType::BF16);
        assert_eq!(compute_cycles(s2, &sc), 2048);
    }

    fn dma(parts: u32, start: u32, bytes: u64) -> Instr {
        Instr {
            partitions: parts,
            dma: Some(DmaDims {
                src: MemKind::Hbm,
                dst: MemKind::Sbuf,
                bytes,
                partitions: parts,
                start_partition: start,
                chunk_bytes: bytes,
            }),
            ..Instr::new(Engine::Dma, Opcode::DmaCopy, "nl.load", loc())
        }
    }

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
}
