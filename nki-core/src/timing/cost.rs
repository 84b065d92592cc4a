//! Per-instruction costs: how long one record occupies its engine, from the target's table
//! (docs/reference/hardware.md §2.2–2.5). Costs are initiation intervals in cycles of the
//! executing engine, converted to ns with that engine's clock. DMA costs (bytes over bandwidth,
//! per DMA engine) are in `timing::dma` and re-exported here.

use crate::dtype::DType;
use crate::math::AluOp;
use crate::record::{Engine, Opcode};
use crate::target::TargetSpec;

pub use crate::record::CostFacts;

pub use super::dma::{
    dma_descriptor_bytes, dma_efficiency, dma_plan, dma_plan_into, dma_run_efficiency,
    writes_partial_words, DmaPlan,
};

/// The two TensorE phases of a matmul or transpose, in ns.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TensorCost {
    /// LoadStationary: `N_stat / 4` cycles (x the fp32 factor); runs in the background of the
    /// previous MultiplyMoving.
    pub ls_ns: f64,
    /// MultiplyMoving: `max(min(64, N_stat), N_mov)` cycles (x the fp32 factor), at least
    /// `mm_min_cycles`.
    pub mm_ns: f64,
}

/// TensorE cost of a matmul or transpose record. A transpose of a `[P, F]` tile is a matmul
/// with the tile as stationary (`N_stat = F`) and the identity as moving (`N_mov = P`), so the
/// same formula gives the documented `max(P, min(64, F))`.
pub fn tensor_cost(spec: &TargetSpec, r: impl Into<CostFacts>) -> TensorCost {
    let r = r.into();
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
        // Each operand with the one/zero hint halves it (SDK `nc_matmul`: "2x better").
        (spec.fp32_matmul_factor >> r.matmul.map_or(0, |m| m.onezero)).max(1)
    };
    let mm_cycles = (n_stat.min(spec.mm_init_cycles).max(n_mov) * factor).max(spec.mm_min_cycles);
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
fn per_element(r: &CostFacts) -> f64 {
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
        | Opcode::FindIndex8
        | Opcode::MatchReplace8
        // No published figures: one pass over the data [A] (isa/select.rs,
        // isa/tensor_scalar_reduce.rs); exponential's 4x is its perf mode below.
        | Opcode::TensorScalarCumulative
        | Opcode::RangeSelect
        | Opcode::Exponential
        // GpSimd 150 + T, no published figure [A] (isa/nonzero.rs).
        | Opcode::NonzeroWithCount
        // No published figures: one pass over the elements [A] (isa/shuffle.rs,
        // isa/sequence_bounds.rs, isa/rng.rs).
        | Opcode::StreamShuffle
        | Opcode::SequenceBounds
        | Opcode::RngGetState
        // "4*n + K GpSIMD Engine cycles" [E nki.isa.topk], carried as the record's free size.
        | Opcode::TopK
        | Opcode::ScalarLoad
        | Opcode::ScalarStore
        | Opcode::LoopBranch
        | Opcode::Branch
        | Opcode::CoreBarrier
        | Opcode::CoreWait
        // Software DGE: one GpSimd cycle per descriptor after its start-up [A].
        | Opcode::DmaDescriptors => 1.0,
        // "4 elements/partition/cycle" (4x the VectorE rate) [E ARCH3] (isa/mx.rs).
        Opcode::QuantizeMx => 0.25,
        // "4x 32-bit values per lane per cycle" from VectorE's PRNG [E ARCH3] (isa/rng.rs).
        Opcode::Rand2 => 0.25,
        // Costed by `tensor_cost` / `dma_plan`; a full pass over the data if asked here.
        Opcode::Matmul | Opcode::Transpose | Opcode::DmaCopy | Opcode::DmaTranspose => 1.0,
    }
}

/// VectorE performance-mode speed-up on NC-v3+ \[E S2\]: 4x for tensor_copy / tensor_scalar with
/// 16-bit SBUF input and output and contiguous data, 2x for those (16-bit in and out) when one
/// side is PSUM or the data is strided, 2x for tensor_tensor with both inputs in SBUF and all
/// 16-bit. A copy of fp32 PSUM (a matmul result) gets no mode: calibration §6a's read-outs,
/// `tensor_copy` of `[128, 512]` fp32 PSUM to bf16 on VectorE, took 687 ns each (176 µs for
/// 256), more than the 512 cycles (533 ns) of one element per cycle.
pub fn vector_perf_mode(spec: &TargetSpec, r: impl Into<CostFacts>) -> f64 {
    let r = r.into();
    // NC-v4 ScalarE: a 2x mode for tensor_scalar / tensor_copy on bf16/fp16 data [E ARCH3].
    if spec.scalar_perf_mode && r.engine == Engine::Scalar {
        let two16 = is16(r.in_dtype) && is16(r.out_dtype);
        return match r.opcode {
            Opcode::TensorCopy | Opcode::TensorScalar if two16 => 2.0,
            _ => 1.0,
        };
    }
    if !spec.vector_perf_modes || r.engine != Engine::Vector {
        return 1.0;
    }
    // NC-v4 VectorE: FP8 runs at the 16-bit width too (512 elements/cycle) [E ARCH3].
    let narrow = |d: DType| is16(d) || (spec.vector_perf_mode_fp8 && d.size() == 1 && d.is_float());
    let all16 = narrow(r.in_dtype) && narrow(r.out_dtype);
    match r.opcode {
        // "4x ScalarE activation(exp)" [E ARCH3].
        Opcode::Exponential => spec.exponential_elems_per_cycle.max(1) as f64,
        Opcode::TensorCopy | Opcode::TensorScalar => {
            if all16 && !r.psum && r.contiguous {
                4.0
            } else if all16 {
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
pub fn compute_cycles(spec: &TargetSpec, r: impl Into<CostFacts>) -> u64 {
    let r = r.into();
    if r.opcode == Opcode::DmaDescriptors && r.engine != Engine::GpSimd {
        // Hardware DGE: a fixed time per DMA instruction on the triggering engine.
        return (spec.hwdge_ns * spec.engine_ghz(r.engine)).ceil() as u64;
    }
    if let Some(c) = control_cycles(spec, &r) {
        return c;
    }
    let n = r.free.max(1) as f64;
    let work = (per_element(&r) * n / vector_perf_mode(spec, r)).ceil() as u64;
    match r.engine {
        Engine::GpSimd => spec.gpsimd_start + work + psum_access(spec, &r),
        Engine::Sync => spec.min_ii,
        _ => {
            // iota / affine_select pay GpSimd's start-up on whichever engine runs them.
            let base = if matches!(r.opcode, Opcode::Iota | Opcode::AffineSelect) {
                spec.gpsimd_start + work
            } else if matches!(
                r.opcode,
                Opcode::Max8 | Opcode::FindIndex8 | Opcode::MatchReplace8
            ) {
                // `N` cycles, no MIN_II floor (hardware.md §2.3; nki.isa.max8 2.26 docs);
                // nc_match_replace8 has no published figure: assumed the same as its siblings.
                work
            } else {
                work.max(spec.min_ii)
            };
            // activation_reduce / tensor_scalar_reduce: + MIN_II for the accumulator [E S13].
            let base = if r.accumulate {
                base + spec.min_ii
            } else {
                base
            };
            base + psum_access(spec, &r)
        }
    }
}

/// The static PSUM access cycles ([`TargetSpec::psum_access_cycles`]) of a Vector/Scalar/GpSimd
/// instruction with a PSUM operand, 0 for the others.
fn psum_access(spec: &TargetSpec, r: &CostFacts) -> u64 {
    if r.psum {
        spec.psum_access_cycles
    } else {
        0
    }
}

/// Cycles of the sequencer-only records (register loads/stores, loop branches, core
/// barriers) on any engine, `None` for the others. A device loop's branch is its iteration
/// boundary's scheduling barrier ([`TargetSpec::device_loop_barrier_ns`], or
/// [`TargetSpec::device_loop_pipelined_barrier_ns`] for a software-pipelined iteration). No
/// public figure exists for the other sequencer instructions (hardware.md §7, "Semaphore and
/// cross-engine sync latency"): a register access is assumed to take the sequencer floor of
/// every non-TensorE instruction, one `MIN_II`; a core barrier's semaphore write to the other core
/// is assumed to take the documented cross-engine semaphore-to-start latency, the DMA fixed
/// latency (hardware.md §2.5 [A S5], ~1.3 µs); waiting for the other core takes no engine
/// time of its own (the wait is the dependency on the other core's arrival). A copy on GpSimdE
/// (`sendrecv` through GpSimd's integrated DMA) takes GpSimd's instruction start-up plus its
/// bytes at that DMA's bandwidth ([`TargetSpec::gpsimd_dma_bytes_per_ns`]); no latency figure
/// is published for it, so none more is added \[A\].
fn control_cycles(spec: &TargetSpec, r: &CostFacts) -> Option<u64> {
    match r.opcode {
        Opcode::DmaCopy if r.engine == Engine::GpSimd => {
            let bytes = r.partitions as f64 * r.free as f64 * r.in_dtype.size() as f64;
            let ns = bytes / spec.gpsimd_dma_bytes_per_ns.max(f64::MIN_POSITIVE);
            Some(spec.gpsimd_start + (ns * spec.gpsimd_ghz).ceil() as u64)
        }
        // A compiled conditional's compare-and-branch: the sequencer floor [A] (lang/branch.rs).
        Opcode::ScalarLoad | Opcode::ScalarStore | Opcode::Branch => Some(spec.min_ii),
        Opcode::LoopBranch => {
            // The iteration boundary's scheduling barrier (`timing::deps` makes it wait for
            // the iteration and the next one wait for it); `accumulate` marks a
            // software-pipelined iteration (`lang::control`).
            let ns = if r.accumulate {
                spec.device_loop_pipelined_barrier_ns
            } else {
                spec.device_loop_barrier_ns
            };
            Some((ns * spec.engine_ghz(r.engine)).ceil() as u64)
        }
        Opcode::CoreBarrier => {
            Some((spec.dma_fixed_latency_ns * spec.engine_ghz(r.engine)).ceil() as u64)
        }
        Opcode::CoreWait => Some(0),
        _ => None,
    }
}

/// ns a Vector/Scalar/GpSimd/Sync record occupies its engine.
pub fn compute_ns(spec: &TargetSpec, r: impl Into<CostFacts>) -> f64 {
    let r = r.into();
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

#[cfg(test)]
mod tests {
    use super::super::test_records::{loc, mm, vec_op};
    use super::*;
    use crate::record::{Instr, MatmulDims};
    use crate::target::Target;

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
        let t = |p: u32, f: u32| {
            Instr::with_cost(
                CostFacts {
                    partitions: p,
                    free: f,
                    in_dtype: DType::BF16,
                    ..CostFacts::new(Engine::Tensor, Opcode::Transpose)
                },
                "nl.transpose",
                loc(),
            )
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
        // trn2: 2 x 128 cycles in transpose mode, under TensorE's 512-cycle floor.
        assert!((tensor_cost(s2, &f32t).mm_ns - 512.0 / 2.4).abs() < 1e-9);
        assert!((tensor_cost(s, &f32t).mm_ns - 4.0 * 128.0 / 2.8).abs() < 1e-9);
    }

    #[test]
    fn a_reduced_matmul_tile_costs_a_full_tile_on_trn2() {
        // A [128, 128] x [128, 64] matmul (N = 64): 64 cycles by the documented formula (trn1),
        // the 512-cycle floor on trn2 (calibration §6b); a full tile is 512 either way, an
        // fp32 one 4 x 512.
        let mm = |n: u32, fp32: bool| {
            Instr::with_cost(
                CostFacts {
                    matmul: Some(MatmulDims {
                        k: 128,
                        m: 128,
                        n,
                        fp32,
                        onezero: 0,
                    }),
                    ..CostFacts::new(Engine::Tensor, Opcode::Matmul)
                },
                "nisa.nc_matmul",
                loc(),
            )
        };
        let (s1, s2) = (Target::Trn1.spec(), Target::Trn2.spec());
        assert!((tensor_cost(s1, &mm(64, false)).mm_ns - 64.0 / 2.8).abs() < 1e-9);
        assert!((tensor_cost(s2, &mm(64, false)).mm_ns - 512.0 / 2.4).abs() < 1e-9);
        assert!((tensor_cost(s2, &mm(512, false)).mm_ns - 512.0 / 2.4).abs() < 1e-9);
        assert!((tensor_cost(s2, &mm(512, true)).mm_ns - 2048.0 / 2.4).abs() < 1e-9);
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
        // tensor_tensor fp32 SBUF: 2N; one PSUM input: N, and the static PSUM access.
        let mut tt = vec_op(Opcode::TensorTensor, Engine::Vector, 512, DType::F32);
        tt.inputs = 2;
        assert_eq!(compute_cycles(s, &tt), 1024);
        tt.psum = true;
        assert_eq!(compute_cycles(s, &tt), 512 + s.psum_access_cycles);
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
    fn performance_modes_of_trn2_and_trn3() {
        use {DType::*, Engine::*, Opcode::*, Target::*};
        // (target, opcode, engine, free elements, dtype, cycles) over 128 partitions.
        let cases = [
            // trn2's VectorE performance modes.
            (Trn1, TensorCopy, Vector, 2048, BF16, 2048),
            (Trn2, TensorCopy, Vector, 2048, BF16, 512),
            (Trn2, TensorCopy, Vector, 2048, F32, 2048),
            // The 64-cycle floor still holds.
            (Trn2, TensorScalar, Vector, 128, BF16, 64),
            // ScalarE has no performance mode on trn2.
            (Trn2, TensorCopy, Scalar, 2048, BF16, 2048),
            // ScalarE's 2x bf16/fp16 mode for tensor_copy / tensor_scalar (NC-v4 only).
            (Trn3, TensorCopy, Scalar, 2048, BF16, 1024),
            (Trn3, Activation, Scalar, 2048, BF16, 2048),
            (Trn3, TensorCopy, Scalar, 2048, F32, 2048),
            // VectorE fp8 at the 16-bit width on NC-v4, not on NC-v3.
            (Trn3, TensorCopy, Vector, 2048, F8E4M3, 512),
            (Trn2, TensorCopy, Vector, 2048, F8E4M3, 2048),
            // exponential: 4 elements per cycle, MIN_II floor.
            (Trn3, Exponential, Vector, 2048, F32, 512),
            (Trn3, Exponential, Vector, 100, F32, 64),
        ];
        for (t, op, engine, free, dt, want) in cases {
            let r = vec_op(op, engine, free, dt);
            let what = format!("{t:?} {op:?} on {engine:?}, {free} x {dt:?}");
            assert_eq!(compute_cycles(t.spec(), &r), want, "{what}");
        }
        // trn2 VectorE: a strided access halves the bf16 mode.
        let mut strided = vec_op(TensorCopy, Vector, 2048, BF16);
        strided.contiguous = false;
        assert_eq!(compute_cycles(Trn2.spec(), &strided), 1024);
        // A PSUM side: 2x for 16-bit data; an fp32 PSUM read-out to bf16 gets no mode
        // (calibration §6a); both pay the static PSUM access.
        let psum = Trn2.spec().psum_access_cycles;
        let mut readout = vec_op(TensorCopy, Vector, 512, F32);
        readout.out_dtype = BF16;
        readout.psum = true;
        assert_eq!(compute_cycles(Trn2.spec(), &readout), 512 + psum);
        let mut bf16_psum = vec_op(TensorCopy, Vector, 512, BF16);
        bf16_psum.psum = true;
        assert_eq!(compute_cycles(Trn2.spec(), &bf16_psum), 256 + psum);
        for engine in [Scalar, GpSimd] {
            let mut sbuf = vec_op(TensorCopy, engine, 128, F32);
            let plain = compute_cycles(Trn1.spec(), &sbuf);
            sbuf.psum = true;
            assert_eq!(
                compute_cycles(Trn1.spec(), &sbuf),
                plain + Trn1.spec().psum_access_cycles
            );
        }
        // trn3 exponential: + MIN_II for a read-out.
        let mut e = vec_op(Exponential, Vector, 2048, F32);
        e.accumulate = true;
        assert_eq!(compute_cycles(Trn3.spec(), &e), 576);
    }
}
