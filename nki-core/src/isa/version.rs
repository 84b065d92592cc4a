//! `nisa.get_nc_version()` / `nisa.get_nc_sub_version()`: the NeuronCore generation of the
//! launch target, asked from inside a kernel (14 NKI Library files branch on it), and the
//! `nc_version` enum it returns.
//!
//! Both are trace-time queries, as in NKI: they leave no instruction record and cost nothing.

use super::op::Op;
use crate::target::Target;
use std::fmt;

/// A NeuronCore generation (NKI `nki.isa.nc_version`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NcVersion {
    /// NeuronCore-v2: Trainium1 / Inferentia2 (`nc_version.gen2`).
    Gen2 = 2,
    /// NeuronCore-v3: Trainium2 (`nc_version.gen3`).
    Gen3 = 3,
    /// NeuronCore-v4: Trainium3 (`nc_version.gen4`).
    Gen4 = 4,
}

impl NcVersion {
    /// The generation of `target`.
    pub fn of(target: Target) -> NcVersion {
        match target.spec().nc_version {
            2 => NcVersion::Gen2,
            3 => NcVersion::Gen3,
            _ => NcVersion::Gen4,
        }
    }

    /// The generation number (2, 3 or 4), NKI's `nc_version.genN.value`.
    pub fn number(self) -> u8 {
        self as u8
    }
}

impl fmt::Display for NcVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gen{}", self.number())
    }
}

/// The NeuronCore generation of the running launch's target (NKI 0.7
/// `nisa.get_nc_version()`): `Gen2` on trn1, `Gen3` on trn2, `Gen4` on trn3. A kernel
/// branches on it at trace time (`if nisa::get_nc_version() >= NcVersion::Gen4 { .. }`);
/// called outside a kernel it is an error naming the call.
#[track_caller]
pub fn get_nc_version() -> NcVersion {
    NcVersion::of(Op::begin("nisa.get_nc_version").target())
}

/// The silicon revision within the target's generation (NKI 0.7 `nisa.get_nc_sub_version()`:
/// 0 for the first revision, 1 for the second). nki-rs models the first revision of each
/// generation, so this is always 0 inside a kernel.
#[track_caller]
pub fn get_nc_sub_version() -> u32 {
    let _ = Op::begin("nisa.get_nc_sub_version");
    0
}
