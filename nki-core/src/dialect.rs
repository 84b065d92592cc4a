//! The NKI dialect of a kernel ([`Dialect`]): a leaf, so that the launch (`spmd`) and the
//! instance context (`context`) both read it without importing each other.

/// The NKI dialect a kernel is written in, fixed per kernel by `#[nki_kernel]`
/// (`#[nki_kernel(nki = "0.7")]` for [`Dialect::Nki07`], the default [`Dialect::Beta1`]
/// otherwise), readable as the kernel type's `DIALECT` constant, on a `Launch`
/// (`Launch::kernel_dialect`), in the `LaunchReport` and, inside a running instance, from its
/// context (`InstanceCtx::dialect()`).
///
/// It decides what the launch grid means, and which of the compiler's Beta-1-only
/// transformations apply to the kernel's instruction stream. Both dialects share every `nl` and
/// `nisa` call: the instructions a kernel records do not depend on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash, serde::Serialize)]
pub enum Dialect {
    /// NKI Beta 1 (the seeds' dialect, and the default): `kernel[gx, gy, gz]` is an SPMD grid
    /// of 1 to 3 dimensions, placed on NeuronCores with `spmd_dim`/`nc(k)`; the instances of
    /// one core run one after another.
    #[default]
    Beta1,
    /// NKI 0.7: the grid is only the logical NeuronCore's degree. `kernel[2]` runs the kernel
    /// once on each of the two physical cores of an LNC=2 NeuronCore (`nl::program_id(0)` is
    /// the core index, as `Grid::lnc`), `kernel[1]` once on one core; any other grid (a
    /// size above 2, two or three dimensions, `spmd_dim`) is an `ErrorKind::InvalidGrid`
    /// error naming the rule (NKI 0.7 guide, "logical NeuronCores": `kernel[8]` is an error).
    Nki07,
}
