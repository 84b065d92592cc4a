//! What the bridge launches: [`NkiKernel`], a kernel launcher over [`HbmTensor`]s (HBM tensors
//! of any element type the bridge moves), and the [`kernel!`](crate::kernel!) macro that
//! writes one from a launch expression, generic over the element type (one op then serves
//! f32, bf16, f16 and the integer types) or with a type per tensor.

use candle_core::DType;
use nki_core::prelude::*;
use std::any::Any;

/// An HBM tensor of one of the element types the bridge moves between candle and nki-rs.
#[derive(Debug)]
pub enum HbmTensor {
    /// f32 (candle `F32`).
    F32(Hbm<f32>),
    /// bf16 (candle `BF16`).
    BF16(Hbm<bf16>),
    /// f16 (candle `F16`).
    F16(Hbm<f16>),
    /// u8 (candle `U8`).
    U8(Hbm<u8>),
    /// u32 (candle `U32`).
    U32(Hbm<u32>),
    /// i16 (candle `I16`).
    I16(Hbm<i16>),
    /// i32 (candle `I32`).
    I32(Hbm<i32>),
}

/// Runs `$body` with `$h` bound to the `Hbm<T>` inside `$t` (an `HbmTensor` expression, by
/// reference or by value) and the type alias `$ty` to `T`.
macro_rules! each_hbm {
    ($t:expr, $h:ident, $ty:ident => $body:expr) => {
        match $t {
            HbmTensor::F32($h) => {
                #[allow(dead_code)]
                type $ty = f32;
                $body
            }
            HbmTensor::BF16($h) => {
                #[allow(dead_code)]
                type $ty = bf16;
                $body
            }
            HbmTensor::F16($h) => {
                #[allow(dead_code)]
                type $ty = f16;
                $body
            }
            HbmTensor::U8($h) => {
                #[allow(dead_code)]
                type $ty = u8;
                $body
            }
            HbmTensor::U32($h) => {
                #[allow(dead_code)]
                type $ty = u32;
                $body
            }
            HbmTensor::I16($h) => {
                #[allow(dead_code)]
                type $ty = i16;
                $body
            }
            HbmTensor::I32($h) => {
                #[allow(dead_code)]
                type $ty = i32;
                $body
            }
        }
    };
}
pub(crate) use each_hbm;

impl HbmTensor {
    /// The candle dtype of the elements.
    pub fn dtype(&self) -> DType {
        each_hbm!(self, _h, T => <T as candle_core::WithDType>::DTYPE)
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        each_hbm!(self, h, _T => h.shape())
    }

    /// The tensor as an `Hbm<T>`: an [`ErrorKind::InvalidArgument`] error of `kernel` naming
    /// tensor `name` when its elements are of another type.
    pub fn typed<T: Element>(&self, kernel: &'static str, name: &str) -> Result<&Hbm<T>, NkiError> {
        let any: &dyn Any = each_hbm!(self, h, _T => h);
        any.downcast_ref::<Hbm<T>>()
            .ok_or_else(|| self.type_error::<T>(kernel, name))
    }

    /// [`HbmTensor::typed`] for an output.
    pub fn typed_mut<T: Element>(
        &mut self,
        kernel: &'static str,
        name: &str,
    ) -> Result<&mut Hbm<T>, NkiError> {
        let e = self.type_error::<T>(kernel, name);
        let any: &mut dyn Any = each_hbm!(self, h, _T => h);
        any.downcast_mut::<Hbm<T>>().ok_or(e)
    }

    fn type_error<T: Element>(&self, kernel: &'static str, name: &str) -> NkiError {
        NkiError::new(
            ErrorKind::InvalidArgument,
            kernel,
            format!(
                "tensor `{name}` has dtype {:?} {:?}; the kernel takes {}",
                self.dtype(),
                self.shape(),
                T::DTYPE
            ),
        )
    }
}

/// A launcher of an nki-rs kernel on HBM tensors.
///
/// `inputs` are the op's operands in order; `outputs` are the tensors the kernel writes, one
/// per output of the op (for a backward kernel, one gradient per forward input), of the
/// shapes and dtypes the op says. The bridge builds `launch` from the op's grid function and,
/// when profiling, its target and [`Mode::Simulate`]; pass it on to the kernel's `run`.
///
/// Most kernels are wrapped with [`kernel!`](crate::kernel!) rather than by hand.
pub trait NkiKernel: Send + Sync + 'static {
    /// Launches the kernel.
    fn launch(
        &self,
        launch: Launch,
        inputs: &[HbmTensor],
        outputs: &mut [HbmTensor],
    ) -> Result<LaunchReport, NkiError>;
}

/// The kernel of an op without a backward kernel (never launched).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoKernel;

impl NkiKernel for NoKernel {
    fn launch(
        &self,
        _: Launch,
        _: &[HbmTensor],
        _: &mut [HbmTensor],
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

/// Runs `$body` with the type alias `$t` bound to the element type of the first of `$inputs`
/// (a `&[HbmTensor]`); an empty slice is an arity error of kernel `$name`. For
/// [`kernel!`](crate::kernel!)'s expansion.
#[doc(hidden)]
#[macro_export]
macro_rules! __with_first_element {
    ($name:expr, $inputs:expr, $t:ident => $body:expr) => {{
        use $crate::nki_core::prelude::{bf16, f16};
        match $inputs.first() {
            ::core::option::Option::Some($crate::HbmTensor::F32(_)) => {
                type $t = f32;
                $body
            }
            ::core::option::Option::Some($crate::HbmTensor::BF16(_)) => {
                type $t = bf16;
                $body
            }
            ::core::option::Option::Some($crate::HbmTensor::F16(_)) => {
                type $t = f16;
                $body
            }
            ::core::option::Option::Some($crate::HbmTensor::U8(_)) => {
                type $t = u8;
                $body
            }
            ::core::option::Option::Some($crate::HbmTensor::U32(_)) => {
                type $t = u32;
                $body
            }
            ::core::option::Option::Some($crate::HbmTensor::I16(_)) => {
                type $t = i16;
                $body
            }
            ::core::option::Option::Some($crate::HbmTensor::I32(_)) => {
                type $t = i32;
                $body
            }
            ::core::option::Option::None => Err($crate::arity_error($name, "input", 1, 0)),
        }
    }};
}

/// Defines a struct implementing [`NkiKernel`] from a launch expression:
///
/// ```
/// use nki_core::prelude::*;
/// use nki_kernels::autograd::{rmsnorm_fwd, tensor_add_tile};
///
/// nki_candle::kernel!(
///     /// The tiled tensor add, for any element type.
///     pub AddTile = |launch, [a, b], [c]| tensor_add_tile::run(launch, a, b, c)
/// );
/// nki_candle::kernel!(
///     /// RMSNorm with its `eps` as a field.
///     pub RmsNorm { eps: f32 } = |this, launch, [x, gain], [y]| {
///         rmsnorm_fwd::run(launch, x, gain, y, this.eps)
///     }
/// );
///
/// /// f32 in, bf16 out.
/// #[nki_kernel]
/// fn to_bf16(x: &Hbm<f32>, y: &mut Hbm<bf16>) {
///     nl::store(y.view(), &nl::load(x.view()));
/// }
/// nki_candle::kernel!(
///     /// A kernel with a type per tensor.
///     pub ToBf16 = |launch, [x: f32], [y: bf16]| to_bf16::run(launch, x, y)
/// );
/// let _ = (AddTile, RmsNorm { eps: 1e-6 }, ToBf16);
/// ```
///
/// `launch` is the [`Launch`] to run with, the first bracket names the input tensors
/// (`&Hbm<T>`) and the second the outputs (`&mut Hbm<T>`). Without types, `T` is the element
/// type of the first input, every tensor must have it, and the expression is compiled for
/// each element type the bridge moves (f32, bf16, f16, u8, u32, i16, i32): the kernel must be
/// generic over [`Element`]. With `name: type` on every tensor, each has that type. The second
/// form declares fields, reachable through the name before `launch` (`this` above). A call
/// with other tensor counts or element types returns an error naming the kernel and tensor.
#[macro_export]
macro_rules! kernel {
    ($(#[$meta:meta])* $vis:vis $name:ident = |$launch:ident, [$($input:ident : $ity:ty),* $(,)?], [$($output:ident : $oty:ty),* $(,)?]| $body:expr) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Default)]
        $vis struct $name;

        $crate::kernel!(@typed $name, _this, $launch, [$($input: $ity),*], [$($output: $oty),*], $body);
    };
    ($(#[$meta:meta])* $vis:vis $name:ident { $($(#[$fmeta:meta])* $fvis:vis $field:ident: $fty:ty),* $(,)? } = |$this:ident, $launch:ident, [$($input:ident : $ity:ty),* $(,)?], [$($output:ident : $oty:ty),* $(,)?]| $body:expr) => {
        $(#[$meta])*
        #[derive(Clone, Debug)]
        $vis struct $name {
            $($(#[$fmeta])* $fvis $field: $fty),*
        }

        $crate::kernel!(@typed $name, $this, $launch, [$($input: $ity),*], [$($output: $oty),*], $body);
    };
    ($(#[$meta:meta])* $vis:vis $name:ident = |$launch:ident, [$($input:ident),* $(,)?], [$($output:ident),* $(,)?]| $body:expr) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Default)]
        $vis struct $name;

        $crate::kernel!(@generic $name, _this, $launch, [$($input),*], [$($output),*], $body);
    };
    ($(#[$meta:meta])* $vis:vis $name:ident { $($(#[$fmeta:meta])* $fvis:vis $field:ident: $fty:ty),* $(,)? } = |$this:ident, $launch:ident, [$($input:ident),* $(,)?], [$($output:ident),* $(,)?]| $body:expr) => {
        $(#[$meta])*
        #[derive(Clone, Debug)]
        $vis struct $name {
            $($(#[$fmeta])* $fvis $field: $fty),*
        }

        $crate::kernel!(@generic $name, $this, $launch, [$($input),*], [$($output),*], $body);
    };
    (@generic $name:ident, $this:ident, $launch:ident, [$($input:ident),*], [$($output:ident),*], $body:expr) => {
        impl $crate::NkiKernel for $name {
            #[allow(unused_variables)]
            fn launch(
                &self,
                $launch: $crate::nki_core::Launch,
                inputs: &[$crate::HbmTensor],
                outputs: &mut [$crate::HbmTensor],
            ) -> ::core::result::Result<$crate::nki_core::LaunchReport, $crate::nki_core::NkiError> {
                const NAME: &str = stringify!($name);
                let $this = self;
                $crate::__with_first_element!(NAME, inputs, T => {
                    $crate::kernel!(@bind NAME, inputs, outputs, [$($input: T),*], [$($output: T),*]);
                    $body
                })
            }
        }
    };
    (@typed $name:ident, $this:ident, $launch:ident, [$($input:ident : $ity:ty),*], [$($output:ident : $oty:ty),*], $body:expr) => {
        impl $crate::NkiKernel for $name {
            #[allow(unused_variables)]
            fn launch(
                &self,
                $launch: $crate::nki_core::Launch,
                inputs: &[$crate::HbmTensor],
                outputs: &mut [$crate::HbmTensor],
            ) -> ::core::result::Result<$crate::nki_core::LaunchReport, $crate::nki_core::NkiError> {
                const NAME: &str = stringify!($name);
                let $this = self;
                $crate::kernel!(@bind NAME, inputs, outputs, [$($input: $ity),*], [$($output: $oty),*]);
                $body
            }
        }
    };
    (@bind $kname:ident, $inputs:ident, $outputs:ident, [$($input:ident : $ity:ty),*], [$($output:ident : $oty:ty),*]) => {
        let [$($input),*] = $inputs else {
            let expected = [$(stringify!($input)),*].len();
            return Err($crate::arity_error($kname, "input", expected, $inputs.len()));
        };
        $(let $input = $input.typed::<$ity>($kname, stringify!($input))?;)*
        let got = $outputs.len();
        let [$($output),*] = $outputs else {
            let expected = [$(stringify!($output)),*].len();
            return Err($crate::arity_error($kname, "output", expected, got));
        };
        $(let $output = $output.typed_mut::<$oty>($kname, stringify!($output))?;)*
    };
}
