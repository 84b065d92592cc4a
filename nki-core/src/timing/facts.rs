//! The input of the cost rules ([`cost`](super::cost), [`dma`](super::dma)): the fields of an
//! instruction record they read.

use crate::dtype::DType;
use crate::math::AluOp;
use crate::record::{DmaDims, Engine, Instr, MatmulDims, Opcode};

/// What the cost rules read of an instruction record, and nothing else (not its regions, API
/// name, source line or loop position): the rules take this, so a record costs the same
/// whether it is costed as it is recorded (on the modelling thread, from a copy of these
/// fields) or afterwards. Every rule accepts a record too (`&Instr` converts).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostFacts {
    /// The engine it runs on.
    pub engine: Engine,
    /// What it does.
    pub opcode: Opcode,
    /// Partitions processed.
    pub partitions: u32,
    /// Free elements per partition (N of the cost formulas).
    pub free: u32,
    /// Tile inputs the engine reads.
    pub inputs: u8,
    /// Dtype of the (first) input.
    pub in_dtype: DType,
    /// Dtype of the output.
    pub out_dtype: DType,
    /// An input or the output is in PSUM.
    pub psum: bool,
    /// All on-chip accesses have a unit innermost stride.
    pub contiguous: bool,
    /// TensorE sizes.
    pub matmul: Option<MatmulDims>,
    /// DMA sizes.
    pub dma: Option<DmaDims>,
    /// The ALU operator of an element-wise instruction.
    pub alu: Option<AluOp>,
    /// It also reduces into the engine's accumulator.
    pub accumulate: bool,
}

impl CostFacts {
    /// The cost-relevant fields of `r`.
    #[inline]
    pub fn of(r: &Instr) -> CostFacts {
        CostFacts {
            engine: r.engine,
            opcode: r.opcode,
            partitions: r.partitions,
            free: r.free,
            inputs: r.inputs,
            in_dtype: r.in_dtype,
            out_dtype: r.out_dtype,
            psum: r.psum,
            contiguous: r.contiguous,
            matmul: r.matmul,
            dma: r.dma,
            alu: r.alu,
            accumulate: r.accumulate,
        }
    }
}

impl From<&Instr> for CostFacts {
    #[inline]
    fn from(r: &Instr) -> CostFacts {
        CostFacts::of(r)
    }
}

impl From<&CostFacts> for CostFacts {
    #[inline]
    fn from(r: &CostFacts) -> CostFacts {
        *r
    }
}
