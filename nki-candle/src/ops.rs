//! Ready-made ops over the autograd kernels of `nki_kernels::autograd`: the tiled tensor add
//! of NKI's custom-operator guide and RMSNorm with its backward kernel.

use crate::op::KernelOp;
use candle_core::{Error, Shape};
use nki_core::prelude::*;
use nki_kernels::autograd::{
    rmsnorm_bwd, rmsnorm_fwd, tensor_add_tile, ADD_TILE_COLS, ADD_TILE_ROWS,
};

crate::kernel!(
    /// [`tensor_add_tile`](fn@tensor_add_tile) as an [`NkiKernel`](crate::NkiKernel): inputs
    /// `[a, b]`, output `[c]`.
    pub AddTile = |launch, [a, b], [c]| tensor_add_tile::run(launch, a, b, c)
);

/// The tensor add of NKI's custom-operator guide as a candle op (`"nki_tensor_add"`): `a + b`
/// for two `[N * 128, M * 512]` tensors, one `[128, 512]` tile per instance of an `[N, M]` grid,
/// with the guide's backward (both gradients are the output gradient).
pub fn tensor_add() -> KernelOp<AddTile> {
    KernelOp::new("nki_tensor_add", AddTile, |s| {
        Grid::new([s[0][0] / ADD_TILE_ROWS, s[0][1] / ADD_TILE_COLS])
    })
    .output_shape(add_output_shape)
    .backward_pass_through()
}

/// The output shape of [`tensor_add`]: the operands' common shape, which must be 2-D with
/// multiples of the tile size (`ShapeMismatchBinaryOp` for operands of two shapes,
/// `UnexpectedShape` naming the nearest fitting shape otherwise).
fn add_output_shape(s: &[&[usize]]) -> candle_core::Result<Vec<usize>> {
    const OP: &str = "nki_tensor_add";
    let (a, b) = (s[0], s[1]);
    if a != b {
        return Err(Error::ShapeMismatchBinaryOp {
            lhs: Shape::from_dims(a),
            rhs: Shape::from_dims(b),
            op: OP,
        });
    }
    match *a {
        [r, c] if r > 0 && c > 0 && r % ADD_TILE_ROWS == 0 && c % ADD_TILE_COLS == 0 => {
            Ok(a.to_vec())
        }
        _ => {
            let round = |n: usize, m: usize| n.div_ceil(m).max(1) * m;
            let expected = match *a {
                [r, c] => vec![round(r, ADD_TILE_ROWS), round(c, ADD_TILE_COLS)],
                _ => vec![ADD_TILE_ROWS, ADD_TILE_COLS],
            };
            Err(Error::UnexpectedShape {
                msg: format!(
                    "nki op `{OP}`: operands must have one shape, 2-D [N * {ADD_TILE_ROWS}, \
                     M * {ADD_TILE_COLS}] (N, M >= 1), got {a:?}"
                ),
                expected: Shape::from_dims(&expected),
                got: Shape::from_dims(a),
            })
        }
    }
}

crate::kernel!(
    /// [`rmsnorm_fwd`](fn@rmsnorm_fwd) as an [`NkiKernel`](crate::NkiKernel): inputs
    /// `[x, gain]`, output `[y]`.
    pub RmsNormForward {
        /// Added to the mean square before the square root.
        pub eps: f32,
    } = |this, launch, [x, gain], [y]| rmsnorm_fwd::run(launch, x, gain, y, this.eps)
);

crate::kernel!(
    /// [`rmsnorm_bwd`](fn@rmsnorm_bwd) as an [`NkiKernel`](crate::NkiKernel): inputs
    /// `[x, gain, y, dy]` (the forward output `y` is not needed), outputs `[dx, dgain]`.
    pub RmsNormBackward {
        /// The forward's `eps`.
        pub eps: f32,
    } = |this, launch, [x, gain, _y, dy], [dx, dgain]| {
        rmsnorm_bwd::run(launch, x, gain, dy, dx, dgain, this.eps)
    }
);

/// RMSNorm as a differentiable candle op (`"nki_rmsnorm"`): `x: [n, d]`, `gain: [1, d]` ->
/// `x / sqrt(mean(x^2, last axis) + eps) * gain`; forward on a `[ceil(n / 128)]` grid, backward
/// (gradients of `x` and `gain`) as one instance.
pub fn rmsnorm(eps: f32) -> KernelOp<RmsNormForward, RmsNormBackward> {
    KernelOp::new("nki_rmsnorm", RmsNormForward { eps }, |s| {
        Grid::new([s[0][0].div_ceil(nl::tile_size::PMAX)])
    })
    .output_shape(rmsnorm_output_shape)
    .backward(RmsNormBackward { eps }, |_| Grid::new([1]))
}

/// The output shape of [`rmsnorm`]: `x`'s, with `x` 2-D (`UnexpectedNumberOfDims`
/// otherwise) and `gain` `[1, d]` (`UnexpectedShape` otherwise).
fn rmsnorm_output_shape(s: &[&[usize]]) -> candle_core::Result<Vec<usize>> {
    let (x, gain) = (s[0], s[1]);
    match *x {
        [n, d] if n > 0 && gain == [1, d] => Ok(x.to_vec()),
        [_, d] => Err(Error::UnexpectedShape {
            msg: format!("nki op `nki_rmsnorm`: gain must be [1, {d}] for x{x:?}"),
            expected: Shape::from_dims(&[1, d]),
            got: Shape::from_dims(gain),
        }),
        _ => Err(Error::UnexpectedNumberOfDims {
            expected: 2,
            got: x.len(),
            shape: Shape::from_dims(x),
        }),
    }
}
