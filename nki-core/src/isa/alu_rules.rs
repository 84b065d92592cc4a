//! The rules NKI states for the ALU operators an instruction takes, shared by `tensor_scalar`,
//! `tensor_scalar_reduce`, `tensor_tensor` and the `nl` binary operators.
//!
//! - **NeuronCore-v4 operators.** `abs_max` / `abs_min` are "trn3 only" and `square` / `relu`
//!   are "accepted as op0 on trn3" (NKI 0.4 release notes, still in 0.7): on trn1/trn2 each is
//!   an error naming the target.
//! - **Unary operators** (the operator table's "Arithmetic Unary" rows: `abs`, `square`,
//!   `relu`, `rsqrt`, `reciprocal`) apply to `data` alone. `tensor_scalar` takes one as
//!   `op0`, whose `operand0` "must be None or 0" (nki-rs: a scalar 0; a tile is an error).
//!   As `op1`, or in an instruction of two data operands, a unary operator is an error (the
//!   docs accept them "as op0" only).
//! - **GpSimdE** runs `tensor_scalar` with a unary operator only for `rsqrt` (the `engine`
//!   parameter: "gpsimd (only allowed for rsqrt)"; the operator table's engine-selection
//!   note: `tensor_scalar(op0=nl.rsqrt, operand0=0.0)` on GpSimdE). In the 0.7 dst-first
//!   `nisa::tensor_scalar` that is the whole rule: `engine=gpsimd` with any other `op0`, binary
//!   ones included, is an error ([`gpsimd_rsqrt_only`]). The Beta-1 forms
//!   (`nisa::classic::tensor_scalar`), whose documentation lists GpSimdE beside VectorE and
//!   ScalarE with no operator restriction, keep running binary operators there.

use super::base::{short, Operand};
use super::op::Op;
use crate::error::ErrorKind;
use crate::math::AluOp;
use crate::record::Engine;
use crate::target::Target;

/// Fails with `message(target)` unless the target is NeuronCore-v`min` or newer.
pub(crate) fn needs_nc(ins: &Op, min: u8, message: impl FnOnce(Target) -> String) {
    let target = ins.target();
    if target.spec().nc_version < min {
        ins.fail(ErrorKind::InvalidArgument, message(target));
    }
}

/// Fails unless the target is NeuronCore-v`min` or newer; `what` names the feature
/// ("'exponential'", "operator 'abs_max' of 'tensor_scalar'", ...).
pub(crate) fn needs_nc_version(ins: &Op, min: u8, what: &str) {
    needs_nc(ins, min, |target| {
        format!("{what} is available only on NeuronCore-v{min} and newer, not on {target}")
    });
}

/// Fails unless the target is NeuronCore-v`min` or newer, naming the instruction ("'rand2'
/// is available on NeuronCore-v4 and newer, ...").
pub(crate) fn instruction_since(ins: &Op, min: u8) {
    let name = short(ins.api);
    needs_nc(ins, min, |target| {
        format!("'{name}' is available on NeuronCore-v{min} and newer, not on {target}")
    });
}

/// Fails unless the target is NeuronCore-v4, the only generation with the instruction
/// ("'activate2' is available only on NeuronCore-v4 (trn3), ...").
pub(crate) fn v4_instruction(ins: &Op) {
    let name = short(ins.api);
    needs_nc(ins, 4, |target| {
        format!("'{name}' is available only on NeuronCore-v4 (trn3), not on {target}")
    });
}

/// Fails for an operator the target lacks (`abs_max`, `abs_min`, `square`, `relu` before
/// NeuronCore-v4); `role` names the parameter (`op0`, `op`, ...).
pub(crate) fn on_target(ins: &Op, role: &str, op: AluOp) {
    if op.needs_nc_v4() {
        needs_nc_version(
            ins,
            4,
            &format!("operator '{op}' ({role} of '{}')", short(ins.api)),
        );
    }
}

/// The rules of an operator in a place that takes two operands (`op1` of `tensor_scalar`,
/// the `op` of `tensor_tensor` or of an `nl` binary operator): binary, and on the target.
pub(crate) fn binary(ins: &Op, role: &str, op: AluOp) {
    if op.is_unary() {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "'{op}' is a unary operator: '{}' takes it only as op0 of tensor_scalar / tensor_scalar_reduce (with operand0 0), not as {role}",
                short(ins.api)
            ),
        );
    }
    on_target(ins, role, op);
}

/// The rules of `op0` with its `operand0` on `engine` (`tensor_scalar`,
/// `tensor_scalar_reduce`): on the target, and for a unary operator `operand0` a scalar 0
/// and, on GpSimdE, `rsqrt` only.
pub(crate) fn op0(ins: &Op, op: AluOp, operand0: &Operand, engine: Engine) {
    on_target(ins, "op0", op);
    if !op.is_unary() {
        return;
    }
    let zero = matches!(operand0, Operand::Scalar { value, .. } if *value == 0.0);
    if !zero {
        let got = match operand0 {
            Operand::Tile(t) => format!("tile {}", t.describe()),
            Operand::Scalar { value, .. } => format!("{value}"),
        };
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "operand0 of '{}' must be None or 0 when op0 is the unary operator '{op}', got {got}",
                short(ins.api)
            ),
        );
    }
    if engine == Engine::GpSimd && op != AluOp::Rsqrt {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "'{}' runs a unary op0 on the GpSimd Engine only for rsqrt, not '{op}'; use the Vector Engine",
                short(ins.api)
            ),
        );
    }
}

/// NKI 0.7's `engine` rule of `tensor_scalar`: "gpsimd (only allowed for rsqrt)", so on
/// GpSimdE `op0` must be `rsqrt` (the 0.7 dst-first form only; the Beta-1 forms allowed any
/// operator there). `op1` is not restricted by the documentation and is not checked.
pub(crate) fn gpsimd_rsqrt_only(ins: &Op, op0: AluOp, engine: Engine) {
    if engine == Engine::GpSimd && op0 != AluOp::Rsqrt {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "'{}' runs on the GpSimd Engine only for rsqrt as op0 (NKI 0.7: engine=gpsimd is \
                 \"only allowed for rsqrt\"), not '{op0}'; use the Vector or Scalar Engine (the \
                 Beta-1 nisa::classic::tensor_scalar still runs other operators there)",
                short(ins.api)
            ),
        );
    }
}
