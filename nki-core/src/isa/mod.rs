//! `nisa`: engine-level instructions. Each call is exactly one instruction record on one engine
//! (see [`crate::record`]), with the hardware's numerics (f32 engine math, rounding to the
//! output dtype) and the compiler's operand rules as errors.
//!
//! | module | instructions |
//! |---|---|
//! | TensorE | [`nc_matmul`], [`nc_matmul_acc`], [`nc_transpose`] (also VectorE for <= 32x32) |
//! | ScalarE | [`activation`], [`activation_reduce`] |
//! | VectorE | [`tensor_tensor`], [`tensor_scalar`], [`tensor_reduce`], [`tensor_copy`], [`tensor_tensor_scan`], [`reciprocal`], [`memset`], [`bn_stats`], [`bn_aggr`] |
//! | GpSimdE | [`iota`], [`affine_select`], [`tensor_partition_reduce`] |
//! | DMA | [`dma_copy`] |
//!
//! Classic NKI keyword arguments map to positional `Option`s, or to an args struct with
//! `Default` and builder methods where an instruction has several ([`ActivationArgs`],
//! [`TensorScalarArgs`], [`ScanArgs`]). Scalars-or-vectors (`scale`, `operand0`, `initial`)
//! take any [`Operand`]: an `f32` or a `[P, 1]` tile.

mod dma;
mod gpsimd;
mod scalar;
mod tensor;
#[cfg(test)]
mod tests;
mod vector;

pub use crate::lang::Operand;
pub use crate::math::{ActFn, AluOp};
pub use crate::record::Engine;
pub use dma::{dma_copy, DmaEndpoint, DmaSource, DmaTarget};
pub use gpsimd::{affine_select, iota, tensor_partition_reduce, AffineExpr};
pub use scalar::{activation, activation_reduce, ActivationArgs};
pub use tensor::{nc_matmul, nc_matmul_acc, nc_transpose};
pub use vector::{
    bn_aggr, bn_stats, memset, reciprocal, tensor_copy, tensor_reduce, tensor_scalar,
    tensor_tensor, tensor_tensor_scan, ScanArgs, TensorScalarArgs,
};
pub(crate) use vector::{reduced_shape, trailing_axes};

use crate::context::{check, issue, raise, OpEnv};
use crate::dtype::DType;
use crate::error::{ErrorKind, NkiError, Result, SourceLoc};
use crate::lang::{self, checks};
use crate::record::{Instr, MemKind, Opcode, Region};
use crate::tile::{Tile, TileRef};

/// The short NKI name of an instruction (`nisa.tensor_tensor` -> `tensor_tensor`).
fn short(api: &'static str) -> &'static str {
    api.strip_prefix("nisa.").unwrap_or(api)
}

/// Fails the instance with an error of `kind`.
fn fail(kind: ErrorKind, api: &'static str, msg: String, loc: SourceLoc) -> ! {
    raise(NkiError::new(kind, api, msg), loc)
}

/// Allocates a new, unwritten output tile of `dims` (checked as a tile shape).
pub(crate) fn out_tile(
    api: &'static str,
    mem: MemKind,
    dtype: DType,
    dims: &[usize],
    loc: SourceLoc,
) -> Tile {
    Tile::alloc(api, mem, dtype, lang::shape(api, dims, loc), None, loc)
}

/// The partition-start rule for every on-chip operand.
fn operand(api: &'static str, what: &str, t: &TileRef, loc: SourceLoc) {
    check(checks::operand(api, what, t), loc);
}

/// The operand must live in one of `allowed`.
fn memory(api: &'static str, what: &str, t: &TileRef, allowed: &[MemKind], loc: SourceLoc) {
    check(checks::memory(api, what, t, allowed), loc);
}

/// NKI's `err_num_partition_mismatch`, verbatim: "number of partitions (dimension 0 size of a
/// tile) mismatch in parameters (data1[128, 512], data2[1, 512]) of 'tensor_tensor'".
fn same_partitions(api: &'static str, a: (&str, &TileRef), b: (&str, &TileRef), loc: SourceLoc) {
    if a.1.partitions() != b.1.partitions() {
        fail(
            ErrorKind::PartitionMismatch,
            api,
            format!(
                "number of partitions (dimension 0 size of a tile) mismatch in parameters ({}{:?}, {}{:?}) of '{}'",
                a.0,
                a.1.shape(),
                b.0,
                b.1.shape(),
                short(api)
            ),
            loc,
        );
    }
}

/// Two full-size operands must hold the same number of elements per partition.
fn same_free(api: &'static str, a: (&str, &TileRef), b: (&str, &TileRef), loc: SourceLoc) {
    if a.1.free_size() != b.1.free_size() {
        fail(
            ErrorKind::ShapeMismatch,
            api,
            format!(
                "number of elements per partition mismatch in parameters ({}{:?}, {}{:?}) of '{}': {} vs {}",
                a.0,
                a.1.shape(),
                b.0,
                b.1.shape(),
                short(api),
                a.1.free_size(),
                b.1.free_size()
            ),
            loc,
        );
    }
}

/// Two tile inputs of one VectorE instruction cannot both be read from PSUM.
fn not_both_psum(api: &'static str, a: (&str, &TileRef), b: (&str, &TileRef), loc: SourceLoc) {
    if a.1.mem() == MemKind::Psum && b.1.mem() == MemKind::Psum {
        fail(
            ErrorKind::WrongMemory,
            api,
            format!(
                "operands '{}' ({}) and '{}' ({}) of '{}' cannot both be in psum; move one to sbuf first",
                a.0,
                a.1.describe(),
                b.0,
                b.1.describe(),
                short(api)
            ),
            loc,
        );
    }
}

/// `engine` must be one of `allowed` for this instruction.
fn engine_in(api: &'static str, engine: Engine, allowed: &[Engine], loc: SourceLoc) {
    if !allowed.contains(&engine) {
        let names: Vec<&str> = allowed.iter().map(|e| e.name()).collect();
        fail(
            ErrorKind::InvalidArgument,
            api,
            format!(
                "'{}' cannot run on {}; supported engines: {}",
                short(api),
                engine.name(),
                names.join(", ")
            ),
            loc,
        );
    }
}

/// GpSimdE cannot read or write PSUM.
fn gpsimd_sbuf(api: &'static str, what: &str, t: &TileRef, loc: SourceLoc) {
    if t.mem() == MemKind::Psum {
        fail(
            ErrorKind::WrongMemory,
            api,
            format!(
                "expected operand '{what}' of '{}' to be in address space 'sbuf', but got a tile in 'psum' instead ({}): GpSimd Engine cannot access psum",
                short(api),
                t.describe()
            ),
            loc,
        );
    }
}

/// A per-partition operand checked against a data tile of `p` partitions: a scalar broadcast
/// to every element, or a `[P, 1]` vector broadcast along the free dimension.
#[derive(Clone, Copy, Debug)]
enum PerPartition<'a> {
    Scalar(f32),
    Vector(TileRef<'a>),
}

impl<'a> PerPartition<'a> {
    /// Validates `o` as a scalar or a `[p, 1]` tile (any number of size-1 free dims).
    fn new(
        api: &'static str,
        what: &str,
        o: Operand<'a>,
        p: usize,
        loc: SourceLoc,
    ) -> PerPartition<'a> {
        match o {
            Operand::Scalar { value, .. } => PerPartition::Scalar(value),
            Operand::Tile(t) => {
                check(per_partition_shape(api, what, &t, p), loc);
                operand(api, what, &t, loc);
                PerPartition::Vector(t)
            }
        }
    }

    /// The value of each of the `p` partitions (executes only).
    fn values(&self, api: &'static str, p: usize, loc: SourceLoc) -> Vec<f32> {
        match self {
            PerPartition::Scalar(v) => vec![*v; p],
            PerPartition::Vector(t) => t.gather(api, loc),
        }
    }

    fn tile(&self) -> Option<&TileRef<'a>> {
        match self {
            PerPartition::Scalar(_) => None,
            PerPartition::Vector(t) => Some(t),
        }
    }
}

/// `t` must be a `[p, 1]` vector.
fn per_partition_shape(api: &'static str, what: &str, t: &TileRef, p: usize) -> Result<()> {
    if t.partitions() != p {
        return Err(NkiError::new(
            ErrorKind::PartitionMismatch,
            api,
            format!(
                "number of partitions (dimension 0 size of a tile) mismatch in parameters (data[{p}, ...], {what}{:?}) of '{}'",
                t.shape(),
                short(api)
            ),
        ));
    }
    if t.free_size() != 1 {
        return Err(NkiError::new(
            ErrorKind::ShapeMismatch,
            api,
            format!(
                "'{what}' of '{}' must be a scalar or a vector of shape [{p}, 1] (one element per partition), got {}",
                short(api),
                t.describe()
            ),
        ));
    }
    Ok(())
}

/// The record of a compute instruction: `data` are the full-size inputs (the cost's N is the
/// free size of the first), `extra` the per-partition operands, `outs` the written views.
#[allow(clippy::too_many_arguments)]
fn record(
    engine: Engine,
    opcode: Opcode,
    api: &'static str,
    loc: SourceLoc,
    data: &[&TileRef],
    extra: &[&TileRef],
    outs: &[&TileRef],
    out_dtype: DType,
) -> Instr {
    let main = data.first().or(outs.first()).expect("an operand");
    let contiguous = |t: &&TileRef| t.free_size() <= 1 || t.ap.inner_stride() == 1;
    let mut reads: Vec<Region> = data.iter().map(|t| t.region()).collect();
    reads.extend(extra.iter().map(|t| t.region()));
    Instr {
        partitions: main.partitions() as u32,
        free: main.free_size() as u32,
        inputs: data.len() as u8,
        in_dtype: main.dtype(),
        out_dtype,
        psum: data
            .iter()
            .chain(extra)
            .chain(outs)
            .any(|t| t.mem() == MemKind::Psum),
        contiguous: data.iter().chain(outs).all(contiguous),
        reads,
        writes: outs.iter().map(|t| t.region()).collect(),
        ..Instr::new(engine, opcode, api, loc)
    }
}

/// Which instruction is being issued: its engine, opcode, NKI API name and call site (and the
/// ALU operator, for the instructions whose cost depends on it).
#[derive(Clone, Copy)]
struct Site {
    engine: Engine,
    opcode: Opcode,
    api: &'static str,
    loc: SourceLoc,
    alu: Option<AluOp>,
    accumulate: bool,
}

impl Site {
    /// The instruction `opcode` on `engine`, called as `api` at `loc`.
    fn new(engine: Engine, opcode: Opcode, api: &'static str, loc: SourceLoc) -> Site {
        Site {
            engine,
            opcode,
            api,
            loc,
            alu: None,
            accumulate: false,
        }
    }

    /// The same instruction, recorded as also reducing into the engine's accumulator.
    fn accumulating(self, accumulate: bool) -> Site {
        Site { accumulate, ..self }
    }

    /// The same instruction, recorded with ALU operator `op`.
    fn with_alu(self, op: AluOp) -> Site {
        Site {
            alu: Some(op),
            ..self
        }
    }

    /// [`record`] of this instruction.
    fn record(
        self,
        data: &[&TileRef],
        extra: &[&TileRef],
        outs: &[&TileRef],
        out_dtype: DType,
    ) -> Instr {
        Instr {
            alu: self.alu,
            accumulate: self.accumulate,
            ..record(
                self.engine,
                self.opcode,
                self.api,
                self.loc,
                data,
                extra,
                outs,
                out_dtype,
            )
        }
    }
}

/// Issues a compute instruction through the funnel ([`issue`]): `exec` computes the values of
/// `outs` when the launch computes values; the record is [`Site::record`] of `data` (full-size
/// inputs), `extra` (per-partition operands) and `outs`. When values are not computed, `outs`
/// are marked written, so later reads of them are not flagged as uninitialised.
fn issue_op(
    e: OpEnv,
    site: Site,
    data: &[&TileRef],
    extra: &[&TileRef],
    outs: &[&TileRef],
    out_dtype: DType,
    exec: impl FnOnce(),
) {
    issue(e, exec, || site.record(data, extra, outs, out_dtype));
    if !e.executes {
        for o in outs {
            o.mark_written();
        }
    }
}

#[cfg(test)]
pub(crate) mod trace {
    //! Runs a closure as one simulated program instance and returns its records or error.

    use crate::context::{self, InstanceCtx, KernelAbort, LaunchShared, Mode};
    use crate::error::NkiError;
    use crate::record::Instr;
    use crate::target::Target;

    /// Runs `f` in a fresh instance context with `mode` on the default target; returns the
    /// records it left.
    pub(crate) fn run(mode: Mode, f: impl FnOnce()) -> Result<Vec<Instr>, NkiError> {
        run_on(Target::default(), mode, f)
    }

    /// [`run`] on `target`.
    pub(crate) fn run_on(
        target: Target,
        mode: Mode,
        f: impl FnOnce(),
    ) -> Result<Vec<Instr>, NkiError> {
        let ctx = InstanceCtx::new(vec![0], vec![1], 0, 0, mode, target, LaunchShared::new());
        let prev = context::install(ctx);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let ctx = context::take().expect("installed");
        if let Some(p) = prev {
            context::install(p);
        }
        match r {
            Ok(()) => Ok(ctx.records),
            Err(p) => match p.downcast::<KernelAbort>() {
                Ok(a) => Err(a.0),
                Err(p) => std::panic::resume_unwind(p),
            },
        }
    }
}
