//! The operands of `nisa` calls as emit-trace arguments ([`crate::emit::trace::Arg`]): views,
//! engines and ALU operators, spelled as NKI 0.8 spells them.

use super::base::Operand;
use crate::emit::trace::{Arg, TensorId, View};
use crate::engine::Engine;
use crate::hbm::view::HbmView;
use crate::math::{ActFn, AluOp};
use crate::tile::TileRef;

/// The view `t` of an on-chip tensor.
pub(crate) fn tile(t: &TileRef) -> Arg {
    let unprintable = if t.ind.is_some() {
        Some("an indirect view (tensor.indirect)")
    } else if t.cast.is_some() {
        Some("a view reinterpreting the tensor's dtype")
    } else {
        None
    };
    Arg::View(View {
        tensor: TensorId::Tile(t.tile.id),
        ap: t.ap,
        unprintable,
        storage: None,
    })
}

/// The view `v` of an HBM tensor.
pub(crate) fn hbm(v: &HbmView) -> Arg {
    let unprintable = if v.register().is_some() {
        Some("a view with a run-time offset (scalar_offset / select)")
    } else {
        None
    };
    Arg::View(View {
        tensor: TensorId::Hbm(v.st.id),
        ap: v.ap,
        unprintable,
        storage: Some(v.st.clone()),
    })
}

/// A tile or scalar operand.
pub(crate) fn operand(o: &Operand) -> Arg {
    match o {
        Operand::Tile(t) => tile(t),
        Operand::Scalar { value, float: true } => Arg::Float(*value),
        Operand::Scalar {
            value,
            float: false,
        } => Arg::Int(*value as i64),
    }
}

/// `nisa.<engine>_engine`.
pub(crate) fn engine(e: Engine) -> Arg {
    let name = match e {
        Engine::Tensor => "nisa.tensor_engine",
        Engine::Vector => "nisa.vector_engine",
        Engine::Scalar => "nisa.scalar_engine",
        Engine::GpSimd => "nisa.gpsimd_engine",
        Engine::Sync => "nisa.sync_engine",
        Engine::Dma => "nisa.dma_engine",
    };
    Arg::Const(name.to_string())
}

/// `nl.<op>`.
pub(crate) fn alu(op: AluOp) -> Arg {
    Arg::Const(format!("nl.{}", op.name()))
}

/// `nl.<function>` of an activation.
pub(crate) fn act(f: ActFn) -> Arg {
    Arg::Const(format!("nl.{}", f.name()))
}

/// A tuple of integers (`(128, 512)`, `(3,)`).
pub(crate) fn ints(v: &[usize]) -> Arg {
    Arg::Const(match v {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            v.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}
