//! What the bridge launches: [`NkiKernel`], a kernel launcher generic over the element type, so
//! one op serves f32, bf16 and f16 tensors, and the [`kernel!`](crate::kernel!) macro that
//! writes one from a launch expression.

use nki_core::prelude::*;

/// A launcher of an nki-rs kernel on HBM tensors of one element type.
///
/// `inputs` are the op's operands in order; `outputs` are zero-filled tensors the kernel writes
/// (for a forward kernel one output; for a backward kernel one gradient per forward input). The
/// bridge builds `launch` from the op's grid function and, when profiling, its target and
/// [`Mode::Simulate`]; pass it on to the kernel's `run`.
///
/// Most kernels are wrapped with [`kernel!`](crate::kernel!) rather than by hand.
pub trait NkiKernel: Send + Sync + 'static {
    /// Launches the kernel.
    fn launch<T: Element>(
        &self,
        launch: Launch,
        inputs: &[&Hbm<T>],
        outputs: &mut [Hbm<T>],
    ) -> Result<LaunchReport, NkiError>;
}

/// The kernel of an op without a backward kernel (never launched).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoKernel;

impl NkiKernel for NoKernel {
    fn launch<T: Element>(
        &self,
        _: Launch,
        _: &[&Hbm<T>],
        _: &mut [Hbm<T>],
    ) -> Result<LaunchReport, NkiError> {
        Err(NkiError::new(
            ErrorKind::InvalidArgument,
            "nki-candle",
            "this op has no backward kernel",
        ))
    }
}

/// The error a [`kernel!`](crate::kernel!) launcher returns when the op passes a different
/// number of tensors than its pattern names.
pub fn arity_error(kernel: &'static str, what: &str, expected: usize, got: usize) -> NkiError {
    NkiError::new(
        ErrorKind::InvalidArgument,
        kernel,
        format!("expects {expected} {what} tensors, got {got}"),
    )
}

/// Defines a struct implementing [`NkiKernel`] from a launch expression:
///
/// ```
/// use nki_kernels::autograd::{rmsnorm_fwd, tensor_add_tile};
///
/// nki_candle::kernel!(
///     /// The tiled tensor add.
///     pub AddTile = |launch, [a, b], [c]| tensor_add_tile::run(launch, a, b, c)
/// );
/// nki_candle::kernel!(
///     /// RMSNorm with its `eps` as a field.
///     pub RmsNorm { eps: f32 } = |this, launch, [x, gain], [y]| {
///         rmsnorm_fwd::run(launch, x, gain, y, this.eps)
///     }
/// );
/// let _ = (AddTile, RmsNorm { eps: 1e-6 });
/// ```
///
/// `launch` is the [`Launch`] to run with, the first bracket names the input tensors
/// (`&Hbm<T>`) and the second the outputs (`&mut Hbm<T>`). Inside the expression `T` is the
/// element type. The second form declares fields, reachable through the name before `launch`
/// (`this` above). A call with other tensor counts returns an error naming the kernel.
#[macro_export]
macro_rules! kernel {
    ($(#[$meta:meta])* $vis:vis $name:ident = |$launch:ident, [$($input:ident),* $(,)?], [$($output:ident),* $(,)?]| $body:expr) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Default)]
        $vis struct $name;

        $crate::kernel!(@impl $name, _this, $launch, [$($input),*], [$($output),*], $body);
    };
    ($(#[$meta:meta])* $vis:vis $name:ident { $($(#[$fmeta:meta])* $fvis:vis $field:ident: $fty:ty),* $(,)? } = |$this:ident, $launch:ident, [$($input:ident),* $(,)?], [$($output:ident),* $(,)?]| $body:expr) => {
        $(#[$meta])*
        #[derive(Clone, Debug)]
        $vis struct $name {
            $($(#[$fmeta])* $fvis $field: $fty),*
        }

        $crate::kernel!(@impl $name, $this, $launch, [$($input),*], [$($output),*], $body);
    };
    (@impl $name:ident, $this:ident, $launch:ident, [$($input:ident),*], [$($output:ident),*], $body:expr) => {
        impl $crate::NkiKernel for $name {
            #[allow(unused_variables)]
            fn launch<T: $crate::nki_core::dtype::Element>(
                &self,
                $launch: $crate::nki_core::spmd::Launch,
                inputs: &[&$crate::nki_core::hbm::Hbm<T>],
                outputs: &mut [$crate::nki_core::hbm::Hbm<T>],
            ) -> ::core::result::Result<$crate::nki_core::spmd::LaunchReport, $crate::nki_core::error::NkiError> {
                const NAME: &str = stringify!($name);
                let $this = self;
                let [$($input),*] = inputs else {
                    let expected = [$(stringify!($input)),*].len();
                    return Err($crate::arity_error(NAME, "input", expected, inputs.len()));
                };
                let got = outputs.len();
                let [$($output),*] = outputs else {
                    let expected = [$(stringify!($output)),*].len();
                    return Err($crate::arity_error(NAME, "output", expected, got));
                };
                $body
            }
        }
    };
}
