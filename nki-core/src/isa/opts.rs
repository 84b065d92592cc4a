//! The keyword options of the dst-first instructions that have no richer options struct of
//! their own: [`Opts`] (`engine`), [`ReduceOpts`] (`tensor_reduce`'s `negate`) and
//! [`MatmulOpts`] (`nc_matmul`'s `accumulate` and `is_transpose`).
//!
//! Every dst-first instruction takes its options last as `impl Into<Option<..>>`: `None` for
//! NKI's defaults, or the struct built with its builder methods
//! (`Opts::new().engine(Engine::GpSimd)`). NKI 0.7's `name=` keyword, common to every
//! instruction, is not an option field: [`crate::nisa::named`] names the instructions its
//! closure issues.

use crate::builder::setters;
use crate::record::Engine;

/// The options of an instruction whose only 0.7 keyword (besides `name`) is `engine`:
/// `tensor_tensor`, `tensor_copy`, `nc_transpose`, `memset`, and the instructions with no
/// engine choice (which accept only their own engine here).
///
/// ```
/// use nki_core::nisa::{AluOp, Engine, Opts};
/// use nki_core::prelude::*;
///
/// let x = Hbm::from_vec(&[1, 3], vec![1.0f32, 2.0, 3.0]).unwrap();
/// let mut y = Hbm::<f32>::zeros([1, 3]);
/// let out = y.as_output();
/// let profile = Launch::new(1)
///     .mode(Mode::Simulate)
///     .run(|| {
///         let t = nl::load(&x);
///         let (s, c) = (
///             nl::ndarray(&[1, 3], DType::F32, MemKind::Sbuf),
///             nl::ndarray(&[1, 3], DType::F32, MemKind::Sbuf),
///         );
///         nisa::tensor_tensor(&s, &t, &t, AluOp::Add, None); // the default engine
///         nisa::tensor_copy(&c, &s, Opts::new().engine(Engine::Scalar));
///         nl::store(&out, &c);
///     })
///     .unwrap()
///     .profile
///     .unwrap();
/// assert_eq!(y.to_vec().unwrap(), [2.0, 4.0, 6.0]);
/// let copy = profile.ops.iter().find(|o| o.api == "nisa.tensor_copy").unwrap();
/// assert_eq!(copy.engine, Engine::Scalar);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Opts {
    /// The engine to run on; `None` is NKI's `engine=unknown`: the instruction's own default.
    pub engine: Option<Engine>,
}

impl Opts {
    /// NKI's defaults (`engine=unknown`).
    pub fn new() -> Self {
        Self::default()
    }
    setters! {
        /// Runs the instruction on `engine` (an engine the instruction does not run on is an
        /// error naming the ones it does).
        engine(engine: Engine) => engine = Some(engine);
    }

    /// The engine `opts` names, or the instruction's own `default` when it names none.
    pub(crate) fn engine_or(opts: impl Into<Option<Opts>>, default: Engine) -> Engine {
        opts.into().and_then(|o| o.engine).unwrap_or(default)
    }
}

/// The options of `nisa::tensor_reduce`: `negate` multiplies the result by -1. (NKI's
/// `keepdims` only shapes an allocated result; a dst-first call takes the shape from `dst`.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReduceOpts {
    /// Negates the reduced values.
    pub negate: bool,
}

impl ReduceOpts {
    /// NKI's defaults (`negate=False`).
    pub fn new() -> Self {
        Self::default()
    }
    setters! {
        /// Negates the result.
        negate() => negate = true;
    }
}

/// The options of `nisa::nc_matmul`.
///
/// `accumulate`: `None` (NKI's default) accumulates into `dst` when it already holds a
/// value (a later matmul of an accumulation group) and overwrites an unwritten `dst` (the
/// first one); `Some(true)` always accumulates (reading an unwritten `dst` is an error);
/// `Some(false)` always overwrites. `is_transpose` makes the instruction a PE transpose:
/// `moving` must be a `[P, P]` identity and `dst` receives `stationary` transposed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MatmulOpts {
    /// Accumulate into `dst` (see the type's docs).
    pub accumulate: Option<bool>,
    /// Transpose `stationary` through an identity `moving` (NKI `is_transpose=True`).
    pub is_transpose: bool,
    /// PE-array tiling: `(start_row, start_column)` (NKI `tile_position`); set together with
    /// `tile_size`.
    pub tile_position: Option<(usize, usize)>,
    /// PE-array tiling: `(row_size, column_size)`, each 128, 64 or (NeuronCore-v3+) 32 (NKI
    /// `tile_size`).
    pub tile_size: Option<(usize, usize)>,
    /// TensorE performance mode (NKI `perf_mode`).
    pub perf_mode: MatmulPerfMode,
    /// NKI `is_stationary_onezero`: `stationary` holds only ones and zeros; for an fp32
    /// `stationary` the matmul costs half (no effect on other dtypes, as documented). The
    /// values are checked when computed.
    pub is_stationary_onezero: bool,
    /// NKI `is_moving_onezero`: the same hint for `moving`.
    pub is_moving_onezero: bool,
}

/// TensorE performance mode of `nc_matmul` (NKI `nki.isa.matmul_perf_mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MatmulPerfMode {
    /// No performance mode (`none`).
    #[default]
    None,
    /// FP8 double-row mode (`double_row`, NeuronCore-v3+): the contraction covers the
    /// partitions and a first free dimension of 2 (`stationary[K, 2, M]`, `moving[K, 2, N]`,
    /// K up to 2 x 128), at the cycles of a K <= 128 matmul: 2x FP8 throughput.
    DoubleRow,
}

impl MatmulOpts {
    /// NKI's defaults (`accumulate=None`, `is_transpose=False`).
    pub fn new() -> Self {
        Self::default()
    }
    setters! {
        /// Sets `accumulate` (`true`: always add into `dst`; `false`: always overwrite it).
        accumulate(accumulate: bool) => accumulate = Some(accumulate);
        /// Makes the matmul a transpose (NKI `is_transpose=True`).
        transpose() => is_transpose = true;
        /// Runs on the PE tile of `size` (rows, columns) starting at `position` (NKI
        /// `tile_position=`, `tile_size=`).
        tile(position: (usize, usize), size: (usize, usize)) => tile_position = Some(position), tile_size = Some(size);
        /// Sets the performance mode (NKI `perf_mode=`).
        perf_mode(mode: MatmulPerfMode) => perf_mode = mode;
        /// Sets NKI's `is_stationary_onezero=True`.
        stationary_onezero() => is_stationary_onezero = true;
        /// Sets NKI's `is_moving_onezero=True`.
        moving_onezero() => is_moving_onezero = true;
    }
}
