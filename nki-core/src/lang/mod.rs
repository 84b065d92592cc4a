//! `nl`: the NKI language — tile creation, load/store, element-wise math, reductions, matmul,
//! transpose, program ids and loop iterators. Every call is one (or a few) engine instructions
//! going through the funnel in [`crate::context`].

mod alloc_grid;
mod atomic;
mod blocks;
mod branch;
mod check;
pub mod classic;
mod constants;
pub(crate) mod control;
pub(crate) mod data;
mod debug;
pub(crate) mod elementwise;
mod gather;
mod grid;
mod indirect;
mod layout;
mod logic;
pub(crate) mod loop_state;
mod matmul;
pub(crate) mod ops;
pub(crate) mod random;
mod reduce;
mod stream;
mod tile_grid;
pub(crate) mod unary;

pub use crate::access::{ds, stepped, Ix};
pub use crate::dtype::DType;
pub use crate::isa::Operand;
pub use crate::math::{ActFn, AluOp};
pub use crate::record::MemKind;
pub use alloc_grid::{alloc_blocks, alloc_tiles, AllocView, GridTensor};
pub use atomic::atomic_rmw;
pub use blocks::{ndarray_blocks, BlockTile};
pub(crate) use branch::SEQUENCERS;
pub use branch::{if_else, if_then, Cond, Condition};
pub use check::{check, fail, require};
pub use constants::shared_identity_matrix;
pub use control::{
    fori_loop, fori_loop_step, fori_loop_with, while_loop, ForiOpts, TripCounts,
    MAX_DEVICE_LOOP_ITERATIONS,
};
pub use data::{
    assign, copy, empty_like, full, load, load_as, ndarray, ones, store, zeros, zeros_like,
    StoreDest,
};
pub use debug::device_print;
pub use gather::gather_flattened;
pub use grid::{
    affine_range, affine_range_step, core_id, num_programs, num_programs_total, num_tiles,
    program_id, program_ndim, sequential_range, static_range, tile_range, AffineRange,
};
pub use indirect::load_indirect;
pub use layout::{broadcast_to, expand_dims, iota, load_transpose2d};
pub use logic::{
    abs_max, abs_min, add, binary, bitwise_and, bitwise_or, bitwise_xor, divide, equal, fmod,
    greater, greater_equal, invert, left_shift, less, less_equal, logical_and, logical_not,
    logical_or, logical_xor, maximum, minimum, mod_, multiply, not_equal, power, right_shift,
    subtract, where_,
};
pub use matmul::{matmul, matmul_acc, transpose};
pub use ops::TileArith;
pub use random::{dropout, rand, random_seed, DEFAULT_SEED};
pub use reduce::{all, max, mean, min, prod, reduce, sum, var, SoftmaxAxes};
pub use stream::{alloc_stream_buffers, StreamBuffers, StreamSource};
pub use tile_grid::{blocks, tiles, BlockGrid, GridPattern, GridView, IntoGridView, TileGrid};
pub use unary::{
    abs, arctan, ceil, cos, erf, erf_dx, exp, floor, gelu, gelu_apprx_sigmoid,
    gelu_apprx_sigmoid_dx, gelu_apprx_tanh, gelu_dx, log, mish, negative, reciprocal, relu,
    rms_norm, rsqrt, sigmoid, sign, silu, silu_dx, sin, softmax, softplus, sqrt, square, tan, tanh,
    trunc, unary,
};

/// NKI `nl.sbuf` (the Beta-1 form: `nl::ndarray(.., nl::SBUF)` gives a [`Tile`](crate::tile::Tile)).
pub const SBUF: MemKind = MemKind::Sbuf;
/// NKI `nl.psum` (the Beta-1 form: `nl::ndarray(.., nl::PSUM)` gives a [`Tile`](crate::tile::Tile)).
pub const PSUM: MemKind = MemKind::Psum;

pub use crate::tensor::{
    is_hbm, is_on_chip, is_psum, is_sbuf, shared_constant, Alloc, Buffer, Tensor, TensorRef,
};

/// NKI 0.7 `nl.sbuf`: `nl::ndarray(dims, dtype, nl::sbuf)` gives a [`Tensor`] in SBUF.
#[allow(non_upper_case_globals)]
pub const sbuf: Buffer = Buffer::Sbuf;
/// NKI 0.7 `nl.psum`: a [`Tensor`] in PSUM.
#[allow(non_upper_case_globals)]
pub const psum: Buffer = Buffer::Psum;
/// NKI 0.7 `nl.private_hbm`: a [`Tensor`] in HBM private to the program instance (scratch).
#[allow(non_upper_case_globals)]
pub const private_hbm: Buffer = Buffer::PrivateHbm;
/// NKI 0.7 `nl.hbm`, the same as [`private_hbm`].
#[allow(non_upper_case_globals)]
pub const hbm: Buffer = Buffer::PrivateHbm;
/// NKI 0.7 `nl.shared_hbm`: a [`Tensor`] in HBM shared by the launch's program instances,
/// what a kernel returns as its output.
#[allow(non_upper_case_globals)]
pub const shared_hbm: Buffer = Buffer::SharedHbm;

pub mod tile_size;
