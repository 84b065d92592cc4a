//! What a sweep's estimate closure may return: a kernel launcher's result as it comes, with or
//! without the outputs a returning kernel hands back, so that `k::estimate(..)` of any kernel
//! is the closure's whole body ([`IntoProfile`]).

use crate::error::NkiError;
use crate::profile::Profile;

/// A launcher's result a sweep reads the [`Profile`] from: `Result<Profile, NkiError>` (a
/// kernel writing `&mut Hbm` outputs) or `Result<(outputs, Profile), NkiError>` (a kernel
/// returning its outputs, NKI 0.7 style; the outputs are dropped).
pub trait IntoProfile {
    /// The profile, or the error the launch failed with.
    fn into_profile(self) -> Result<Profile, NkiError>;
}

impl IntoProfile for Result<Profile, NkiError> {
    fn into_profile(self) -> Result<Profile, NkiError> {
        self
    }
}

impl<Outputs> IntoProfile for Result<(Outputs, Profile), NkiError> {
    fn into_profile(self) -> Result<Profile, NkiError> {
        self.map(|(_, profile)| profile)
    }
}
