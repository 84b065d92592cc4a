//! NKI `nl.tile_size` constants.

/// Maximum partitions of a tile.
pub const PMAX: usize = 128;
/// fp32 elements per partition in one PSUM bank.
pub const PSUM_FMAX: usize = 512;
/// Matmul stationary free-dim limit.
pub const GEMM_STATIONARY_FMAX: usize = 128;
/// Matmul moving free-dim limit.
pub const GEMM_MOVING_FMAX: usize = 512;
/// bn_stats free-dim limit.
pub const BN_STATS_FMAX: usize = 512;
