//! The NKI dialect of a kernel ([`Dialect`]): a leaf, so that the launch (`spmd`) and the
//! instance context (`context`) both read it without importing each other.

/// The NKI dialect a kernel is written in, fixed per kernel by `#[nki_kernel]`
/// (`#[nki_kernel(nki = "0.7")]` for [`Dialect::Nki07`], `nki = "0.8"` for
/// [`Dialect::Nki08`], the default [`Dialect::Beta1`] otherwise), readable as the kernel type's `DIALECT` constant, on a `Launch`
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
    /// NKI 0.8 (Neuron 2.34): 0.7's launch (the grid is the logical NeuronCore's degree) and
    /// 0.7's surface, plus what 0.8 added beside it (`nl::if_else` on a device-computed
    /// condition, `nisa::scalar_alu`, the `nki::lnc` module, ...). Everything 0.8 removed or
    /// deprecated stays callable from 0.7 and Beta-1 kernels.
    Nki08,
}

impl Dialect {
    /// True when the launch grid is the logical NeuronCore's degree (`kernel[1]`,
    /// `kernel[2]`): every dialect after Beta 1.
    pub fn grid_is_lnc_degree(self) -> bool {
        self != Dialect::Beta1
    }

    /// The dialect's name in messages: `NKI Beta 1`, `NKI 0.7`, `NKI 0.8`.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Beta1 => "NKI Beta 1",
            Dialect::Nki07 => "NKI 0.7",
            Dialect::Nki08 => "NKI 0.8",
        }
    }
}
