//! NKI 0.7's constant tensors: `nl.shared_identity_matrix`.
//!
//! On Trainium the identity is a constant of the compiled binary, loaded to HBM with the model
//! and shared by every identity of its dtype. nki-rs builds it on chip instead, with the two
//! instructions a kernel would use (GpSimdE `iota` of `p - f`, then VectorE `tensor_scalar`
//! `equal 0` into the identity's dtype), so its cost is that of those instructions \[A: the
//! constant's load is not modelled\]. `nl.shared_constant` is not provided: a kernel's
//! constants are host `Hbm` inputs.

use super::data::ndarray;
use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::isa::op::Op;
use crate::isa::{iota, tensor_scalar, AffineExpr, AluOp};
use crate::tensor::{Buffer, Tensor};

/// The `[n, n]` identity matrix of `dtype` in SBUF (NKI 0.7
/// `nl.shared_identity_matrix(n, dtype)`; NKI's default dtype is `uint8`), e.g. the moving
/// operand of a TensorE transpose. `n` is 1..=128 (the partitions). See the module docs for
/// how it is built and costed.
#[track_caller]
pub fn shared_identity_matrix(n: usize, dtype: DType) -> Tensor {
    let ins = Op::begin("nl.shared_identity_matrix");
    if !(1..=128).contains(&n) {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!("n = {n} of 'shared_identity_matrix' must be 1..=128 (the SBUF partitions)"),
        );
    }
    let diff = ndarray(&[n, n], DType::I32, Buffer::Sbuf);
    iota(&diff, &AffineExpr::new(n, 1).free(-1, n), None);
    let id = ndarray(&[n, n], dtype, Buffer::Sbuf);
    tensor_scalar(&id, &diff, AluOp::Equal, 0, None);
    id
}
