//! Records the timing rules' unit tests cost: one builder per kind, shared by the tests of
//! [`cost`](super::cost) and [`dma`](super::dma).

use crate::dtype::DType;
use crate::error::SourceLoc;
use crate::record::{CostFacts, DmaDims, Engine, Instr, MatmulDims, MemKind, Opcode};

/// The caller's line.
pub(super) fn loc() -> SourceLoc {
    SourceLoc::caller()
}

/// A bf16 `nc_matmul` of a 128-row contraction: `m` stationary columns, `n` moving ones
/// (fp32 when `fp32`).
pub(super) fn mm(m: u32, n: u32, fp32: bool) -> Instr {
    Instr::with_cost(
        CostFacts {
            partitions: 128,
            free: n,
            matmul: Some(MatmulDims {
                k: 128,
                m,
                n,
                fp32,
                onezero: 0,
            }),
            ..CostFacts::new(Engine::Tensor, Opcode::Matmul)
        },
        "nisa.nc_matmul",
        loc(),
    )
}

/// Element-wise `op` on `engine` over 128 partitions of `free` elements of `dt`.
pub(super) fn vec_op(op: Opcode, engine: Engine, free: u32, dt: DType) -> Instr {
    Instr::with_cost(
        CostFacts {
            partitions: 128,
            free,
            in_dtype: dt,
            out_dtype: dt,
            ..CostFacts::new(engine, op)
        },
        "nl.exp",
        loc(),
    )
}

/// An HBM -> SBUF load of `bytes` into `parts` partitions from partition `start` on (one
/// contiguous HBM run).
pub(super) fn dma(parts: u32, start: u32, bytes: u64) -> Instr {
    Instr::with_cost(
        CostFacts {
            partitions: parts,
            dma: Some(DmaDims {
                src: MemKind::Hbm,
                dst: MemKind::Sbuf,
                bytes,
                partitions: parts,
                start_partition: start,
                chunk_bytes: bytes,
            }),
            ..CostFacts::new(Engine::Dma, Opcode::DmaCopy)
        },
        "nl.load",
        loc(),
    )
}
