//! `nki.language` (`nl`): allocation, the grid, loops and the element-wise operators, each
//! the nki-core `nl` call a Rust kernel makes.

use crate::call::op;
use crate::tensor::{
    bad_arg, dtype_of, tensor, PyBuffer, PyDType, PyDs, PyTensor, Spec, Value, DTYPES,
};
use nki_core::frontend;
use nki_core::nl::{self, AffineRange, Alloc, Buffer, TensorRef};
use nki_core::SourceLoc;
use nki_core::{ActFn, AluOp, DType};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The allocation `buffer`, `name` and `address` keywords describe (`nl.sbuf` by default).
/// Without `name=`, the tensor is named after the kernel's variable it is stored into
/// (`x = nl.ndarray(...)` names it `x` in errors and profiles).
fn alloc(
    py: Python<'_>,
    buffer: Option<&Bound<'_, PyAny>>,
    name: Option<String>,
    address: Option<(usize, usize)>,
) -> PyResult<Alloc> {
    let name = match name {
        Some(n) => Some(n),
        None => crate::call::assigned_name(py)?,
    };
    let buffer = match buffer {
        None => Buffer::Sbuf,
        Some(b) => b.cast::<PyBuffer>().map(|b| b.get().0).map_err(|_| {
            pyo3::exceptions::PyTypeError::new_err(format!(
                "buffer must be nl.sbuf, nl.psum, nl.hbm, nl.private_hbm or nl.shared_hbm, not {b}"
            ))
        })?,
    };
    let mut a = Alloc::from(buffer);
    if let Some(n) = name {
        a = a.name(&n);
    }
    if let Some((p, b)) = address {
        a = a.address(p, b);
    }
    Ok(a)
}

/// `nl.ndarray(shape, dtype, buffer=nl.sbuf, name=None, address=None)`: a new, unwritten
/// tensor.
#[pyfunction]
#[pyo3(signature = (shape, dtype, buffer=None, name=None, address=None))]
fn ndarray(
    py: Python<'_>,
    shape: Vec<usize>,
    dtype: &Bound<'_, PyAny>,
    buffer: Option<&Bound<'_, PyAny>>,
    name: Option<String>,
    address: Option<(usize, usize)>,
) -> PyResult<PyTensor> {
    let (dtype, a) = (dtype_of(dtype)?, alloc(py, buffer, name, address)?);
    match a.buffer {
        // Made at first use (see `tensor::Lazy`); its shape is checked here, at its line.
        Buffer::Sbuf | Buffer::Psum => op(py, "nl.ndarray", || {
            if let Err(e) = frontend::check_on_chip("nl.ndarray", a.buffer.mem(), &shape) {
                frontend::fail(e)
            }
            PyTensor::of_spec(Spec {
                shape: shape.clone(),
                dtype,
                alloc: a.clone(),
                loc: SourceLoc::caller(),
            })
        }),
        Buffer::PrivateHbm | Buffer::SharedHbm => op(py, "nl.ndarray", || {
            PyTensor::of_tensor(nl::ndarray(&shape, dtype, a))
        }),
    }
}

/// `nl.full(shape, fill_value, dtype, buffer=nl.sbuf, name=None)`: a tensor filled with
/// `fill_value` (a memset).
#[pyfunction]
#[pyo3(signature = (shape, fill_value, dtype, buffer=None, name=None, address=None))]
fn full(
    py: Python<'_>,
    shape: Vec<usize>,
    fill_value: f32,
    dtype: &Bound<'_, PyAny>,
    buffer: Option<&Bound<'_, PyAny>>,
    name: Option<String>,
    address: Option<(usize, usize)>,
) -> PyResult<PyTensor> {
    let (dtype, a) = (dtype_of(dtype)?, alloc(py, buffer, name, address)?);
    op(py, "nl.full", || {
        PyTensor::of_tensor(nl::full(&shape, fill_value, dtype, a))
    })
}

/// `nl.zeros(shape, dtype, buffer=nl.sbuf, name=None)`.
#[pyfunction]
#[pyo3(signature = (shape, dtype, buffer=None, name=None, address=None))]
fn zeros(
    py: Python<'_>,
    shape: Vec<usize>,
    dtype: &Bound<'_, PyAny>,
    buffer: Option<&Bound<'_, PyAny>>,
    name: Option<String>,
    address: Option<(usize, usize)>,
) -> PyResult<PyTensor> {
    full(py, shape, 0.0, dtype, buffer, name, address)
}

/// `nl.ones(shape, dtype, buffer=nl.sbuf, name=None)`.
#[pyfunction]
#[pyo3(signature = (shape, dtype, buffer=None, name=None, address=None))]
fn ones(
    py: Python<'_>,
    shape: Vec<usize>,
    dtype: &Bound<'_, PyAny>,
    buffer: Option<&Bound<'_, PyAny>>,
    name: Option<String>,
    address: Option<(usize, usize)>,
) -> PyResult<PyTensor> {
    full(py, shape, 1.0, dtype, buffer, name, address)
}

/// `nl.program_id(axis)`: the index of this instance on grid axis `axis`.
#[pyfunction]
fn program_id(py: Python<'_>, axis: usize) -> PyResult<usize> {
    op(py, "nl.program_id", || nl::program_id(axis))
}

/// `nl.num_programs(axis=0)`: the grid's size on `axis`.
#[pyfunction]
#[pyo3(signature = (axis=0))]
fn num_programs(py: Python<'_>, axis: usize) -> PyResult<usize> {
    op(py, "nl.num_programs", || nl::num_programs(axis))
}

/// `nl.load(src, dtype=None)`: a new SBUF tile holding HBM tensor `src` (cast to `dtype`).
#[pyfunction]
#[pyo3(signature = (src, dtype=None))]
fn load(
    py: Python<'_>,
    src: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let dtype = dtype.map(dtype_of).transpose()?;
    let s = tensor(src, "src")?;
    op(py, "nl.load", || match s.tref() {
        TensorRef::Hbm(v) => Ok(PyTensor::of_tile(match dtype {
            Some(d) => nl::load_as(v, d),
            None => nl::load(v),
        })),
        TensorRef::Chip(_) => Err(()),
    })?
    .map_err(|()| wrong_memory(py, "nl.load", "loads an HBM tensor; this one is on chip"))
}

/// `nl.store(dst, value)`: writes tile `value` into HBM tensor `dst` (one DMA).
#[pyfunction]
fn store(py: Python<'_>, dst: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
    let (d, v) = (tensor(dst, "dst")?, tensor(value, "value")?);
    crate::tensor::writable(py, "nl.store", &d)?;
    op(py, "nl.store", || match d.tref() {
        TensorRef::Hbm(h) => {
            nki_core::nisa::dma_copy(TensorRef::Hbm(h), v.tref(), None);
            Ok(())
        }
        TensorRef::Chip(_) => Err(()),
    })?
    .map_err(|()| {
        wrong_memory(
            py,
            "nl.store",
            "stores into an HBM tensor; this one is on chip",
        )
    })
}

/// `nl.broadcast_to(src, shape)`: a new SBUF tile holding `src` broadcast to `shape` (NumPy
/// rules; a one-partition `src` is replicated across partitions).
#[pyfunction]
#[pyo3(signature = (src, shape))]
fn broadcast_to(py: Python<'_>, src: &Bound<'_, PyAny>, shape: Vec<usize>) -> PyResult<PyTensor> {
    let s = tensor(src, "src")?;
    op(py, "nl.broadcast_to", || {
        PyTensor::of_tile(nl::broadcast_to(s.tile_ref(), &shape))
    })
}

/// The axes an `axis=` argument names (an int or a sequence of ints; a negative axis counts
/// from the last of `ndim`).
fn axes_of(
    py: Python<'_>,
    api: &'static str,
    axis: &Bound<'_, PyAny>,
    ndim: usize,
) -> PyResult<Vec<usize>> {
    let raw: Vec<i64> = match axis.extract::<i64>() {
        Ok(a) => vec![a],
        Err(_) => axis.extract::<Vec<i64>>().map_err(|_| {
            bad_arg(
                py,
                api,
                format!("axis must be an int or a list of ints, not {axis}"),
            )
        })?,
    };
    raw.into_iter()
        .map(|a| {
            let r = if a < 0 { a + ndim as i64 } else { a };
            usize::try_from(r)
                .ok()
                .filter(|&r| r < ndim)
                .ok_or_else(|| {
                    bad_arg(
                        py,
                        api,
                        format!("axis {a} is out of range for {ndim} dimensions"),
                    )
                })
        })
        .collect()
}

/// Declares the value-returning reductions `nl.<name>(x, axis, dtype=None, keepdims=False)`:
/// a new SBUF tile reducing the free axes `axis` of `x` (with `dtype`, through `nl.reduce` of
/// `alu` when given; `mean` and `all` take none).
macro_rules! reductions {
    ($($(#[$doc:meta])* $name:ident, $api:literal, $alu:expr;)*) => {$(
        $(#[$doc])*
        #[pyfunction]
        #[pyo3(signature = (x, axis, dtype=None, keepdims=false))]
        fn $name(
            py: Python<'_>,
            x: &Bound<'_, PyAny>,
            axis: &Bound<'_, PyAny>,
            dtype: Option<&Bound<'_, PyAny>>,
            keepdims: bool,
        ) -> PyResult<PyTensor> {
            let ndim = x.getattr("shape")?.len()?;
            let t = tensor(x, "x")?;
            let axes = axes_of(py, $api, axis, ndim)?;
            let dtype: Option<DType> = dtype.map(dtype_of).transpose()?;
            let alu: Option<AluOp> = $alu;
            match (dtype, alu) {
                (Some(d), Some(a)) => op(py, $api, || {
                    PyTensor::of_tile(nl::reduce(a, t.tile_ref(), &axes, keepdims, Some(d)))
                }),
                (Some(_), None) => Err(bad_arg(py, $api, format!("{} takes no dtype=", $api))),
                (None, _) => op(py, $api, || {
                    PyTensor::of_tile(nl::$name(t.tile_ref(), &axes, keepdims))
                }),
            }
        }
    )*};
}

reductions! {
    /// `nl.sum(x, axis, dtype=None, keepdims=False)`.
    sum, "nl.sum", Some(AluOp::Add);
    /// `nl.max(x, axis, dtype=None, keepdims=False)`.
    max, "nl.max", Some(AluOp::Maximum);
    /// `nl.min(x, axis, dtype=None, keepdims=False)`.
    min, "nl.min", Some(AluOp::Minimum);
    /// `nl.prod(x, axis, dtype=None, keepdims=False)`.
    prod, "nl.prod", Some(AluOp::Multiply);
    /// `nl.mean(x, axis, keepdims=False)`: fp32 intermediates.
    mean, "nl.mean", None;
    /// `nl.all(x, axis, keepdims=False)`: 1 where every element is non-zero.
    all, "nl.all", None;
}

/// `nl.matmul(x, y, transpose_x=False)`: `x @ y` (or `x.T @ y`) into a new fp32 PSUM tile.
#[pyfunction]
#[pyo3(signature = (x, y, transpose_x=false))]
fn matmul(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    y: &Bound<'_, PyAny>,
    transpose_x: bool,
) -> PyResult<PyTensor> {
    let (a, b) = (tensor(x, "x")?, tensor(y, "y")?);
    op(py, "nl.matmul", || {
        PyTensor::of_tile(nl::matmul(a.tile_ref(), b.tile_ref(), transpose_x))
    })
}

/// `nl.transpose(x)`: a 2-D tile transposed on TensorE into a new PSUM tile.
#[pyfunction]
fn transpose(py: Python<'_>, x: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    let t = tensor(x, "x")?;
    op(py, "nl.transpose", || {
        PyTensor::of_tile(nl::transpose(t.tile_ref()))
    })
}

/// A wrong-memory error of `api`, failing the kernel at its line.
fn wrong_memory(py: Python<'_>, api: &'static str, what: &str) -> PyErr {
    crate::call::fail(
        py,
        nki_core::NkiError::new(
            nki_core::ErrorKind::WrongMemory,
            api,
            format!("{api} {what}"),
        ),
    )
}

/// The iterator of `nl.affine_range`: nki-core's, so that iterations are affine-loop
/// iterations to the race checks and the scheduler.
#[pyclass(unsendable, name = "affine_range_iter", module = "nki_rs.language")]
struct PyAffineRange(Option<AffineRange>);

#[pymethods]
impl PyAffineRange {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<usize>> {
        let Some(r) = self.0.as_mut() else {
            return Ok(None);
        };
        let next = op(py, "nl.affine_range", || r.next())?;
        if next.is_none() {
            self.0 = None;
        }
        Ok(next)
    }
}

/// `start, stop, step` of a Python-style range call (`range(stop)` or `range(start, stop,
/// step)`).
fn range_args(start: usize, stop: Option<usize>, step: usize) -> (usize, usize, usize) {
    match stop {
        None => (0, start, step),
        Some(stop) => (start, stop, step),
    }
}

/// `nl.affine_range(stop)` / `nl.affine_range(start, stop, step=1)`: a loop whose iterations
/// must not depend on each other (two of them writing one HBM location is an error).
#[pyfunction]
#[pyo3(signature = (start, stop=None, step=1))]
fn affine_range(
    py: Python<'_>,
    start: usize,
    stop: Option<usize>,
    step: usize,
) -> PyResult<PyAffineRange> {
    let (start, stop, step) = range_args(start, stop, step);
    op(py, "nl.affine_range", || {
        PyAffineRange(Some(nl::affine_range_step(start, stop, step)))
    })
}

/// `range(start, stop, step)` as a Python `range`: `nl.sequential_range` and
/// `nl.static_range` are Python loops to nki-core too.
fn python_range<'py>(
    py: Python<'py>,
    api: &'static str,
    start: usize,
    stop: Option<usize>,
    step: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let (start, stop, step) = range_args(start, stop, step);
    if step == 0 {
        return Err(bad_arg(
            py,
            api,
            format!("{api}({start}, {stop}, 0): the step of a loop cannot be 0"),
        ));
    }
    py.import("builtins")?
        .getattr("range")?
        .call1((start, stop, step))
}

/// `nl.sequential_range(stop)` / `(start, stop, step=1)`: a loop whose iterations may
/// depend on each other.
#[pyfunction]
#[pyo3(signature = (start, stop=None, step=1))]
fn sequential_range<'py>(
    py: Python<'py>,
    start: usize,
    stop: Option<usize>,
    step: usize,
) -> PyResult<Bound<'py, PyAny>> {
    python_range(py, "nl.sequential_range", start, stop, step)
}

/// `nl.static_range(stop)` / `(start, stop, step=1)`: a loop unrolled when traced.
#[pyfunction]
#[pyo3(signature = (start, stop=None, step=1))]
fn static_range<'py>(
    py: Python<'py>,
    start: usize,
    stop: Option<usize>,
    step: usize,
) -> PyResult<Bound<'py, PyAny>> {
    python_range(py, "nl.static_range", start, stop, step)
}

/// An `nl` operator or function (`nl.add`, `nl.exp`, ...): an `op=` argument of the
/// instructions, and callable as NKI's value-returning form (`nl.add(x, y)`, `nl.exp(x)`),
/// which writes a new SBUF tile.
#[pyclass(name = "op", module = "nki_rs.language", frozen)]
pub(crate) struct PyOp {
    /// NKI's name.
    pub(crate) name: &'static str,
    /// The ALU operator of that name.
    pub(crate) alu: Option<AluOp>,
    /// The activation function of that name.
    pub(crate) act: Option<ActFn>,
}

#[pymethods]
impl PyOp {
    #[pyo3(signature = (x, y=None, dtype=None))]
    fn __call__(
        &self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        y: Option<&Bound<'_, PyAny>>,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        let dtype: Option<DType> = dtype.map(dtype_of).transpose()?;
        let api = self.name;
        match (y, self.alu, self.act) {
            (Some(y), Some(alu), _) => {
                let (x, y) = (Value::of(x)?, Value::of(y)?);
                op(py, api, || {
                    PyTensor::of_tile(nl::binary(alu, x.operand(), y.operand(), dtype))
                })
            }
            (None, _, Some(f)) => {
                let x = Value::of(x)?;
                op(py, api, || match &x {
                    Value::Tensor(t) => Ok(PyTensor::of_tile(nl::unary(f, t.tile_ref(), dtype))),
                    Value::Scalar { .. } => Err(()),
                })?
                .map_err(|()| bad_arg(py, api, format!("nl.{api} takes a tensor")))
            }
            _ => Err(bad_arg(
                py,
                api,
                format!(
                    "nl.{api} takes {} operand(s)",
                    if self.alu.is_some() { 2 } else { 1 }
                ),
            )),
        }
    }

    fn __repr__(&self) -> String {
        format!("nl.{}", self.name)
    }
}

/// The ALU operator an `op=` argument names (`nl.add`, ...).
pub(crate) fn alu_of(py: Python<'_>, api: &'static str, obj: &Bound<'_, PyAny>) -> PyResult<AluOp> {
    let o = obj.cast::<PyOp>().ok().and_then(|o| o.get().alu);
    o.ok_or_else(|| {
        bad_arg(
            py,
            api,
            format!("{obj} is not an ALU operator (nl.add, nl.multiply, ...)"),
        )
    })
}

/// The activation function an `op=` argument names (`nl.exp`, ...).
pub(crate) fn act_of(py: Python<'_>, api: &'static str, obj: &Bound<'_, PyAny>) -> PyResult<ActFn> {
    let o = obj.cast::<PyOp>().ok().and_then(|o| o.get().act);
    o.ok_or_else(|| {
        bad_arg(
            py,
            api,
            format!("{obj} is not an activation function (nl.exp, nl.tanh, ...)"),
        )
    })
}

/// The `nki_rs.language` module built in Rust.
pub(crate) fn module(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    let m = PyModule::new(py, "language")?;
    m.add_class::<PyTensor>()?;
    m.add_class::<PyDs>()?;
    m.add_class::<PyDType>()?;
    m.add_class::<PyBuffer>()?;
    m.add_class::<PyOp>()?;
    for f in [
        wrap_pyfunction!(ndarray, &m)?,
        wrap_pyfunction!(full, &m)?,
        wrap_pyfunction!(zeros, &m)?,
        wrap_pyfunction!(ones, &m)?,
        wrap_pyfunction!(load, &m)?,
        wrap_pyfunction!(store, &m)?,
        wrap_pyfunction!(program_id, &m)?,
        wrap_pyfunction!(num_programs, &m)?,
        wrap_pyfunction!(affine_range, &m)?,
        wrap_pyfunction!(sequential_range, &m)?,
        wrap_pyfunction!(broadcast_to, &m)?,
        wrap_pyfunction!(sum, &m)?,
        wrap_pyfunction!(max, &m)?,
        wrap_pyfunction!(min, &m)?,
        wrap_pyfunction!(prod, &m)?,
        wrap_pyfunction!(mean, &m)?,
        wrap_pyfunction!(all, &m)?,
        wrap_pyfunction!(matmul, &m)?,
        wrap_pyfunction!(transpose, &m)?,
        wrap_pyfunction!(static_range, &m)?,
    ] {
        m.add_function(f)?;
    }
    m.add("ds", py.get_type::<PyDs>())?;
    for d in DTYPES {
        m.add(d.name(), PyDType(d))?;
    }
    m.add("bool_", PyDType(DType::Bool))?;
    for (name, b) in [
        ("sbuf", Buffer::Sbuf),
        ("psum", Buffer::Psum),
        ("hbm", Buffer::PrivateHbm),
        ("private_hbm", Buffer::PrivateHbm),
        ("shared_hbm", Buffer::SharedHbm),
    ] {
        m.add(name, PyBuffer(b))?;
    }
    for alu in AluOp::ALL {
        let name = alu.name();
        m.add(
            name,
            PyOp {
                name,
                alu: Some(alu),
                act: ActFn::from_name(name),
            },
        )?;
    }
    for f in ActFn::ALL {
        let name = f.name();
        if AluOp::from_name(name).is_none() {
            m.add(
                name,
                PyOp {
                    name,
                    alu: None,
                    act: Some(f),
                },
            )?;
        }
    }
    let ts = PyDict::new(py);
    ts.set_item("pmax", nl::tile_size::PMAX)?;
    ts.set_item("psum_fmax", nl::tile_size::PSUM_FMAX)?;
    ts.set_item("gemm_stationary_fmax", nl::tile_size::GEMM_STATIONARY_FMAX)?;
    ts.set_item("gemm_moving_fmax", nl::tile_size::GEMM_MOVING_FMAX)?;
    ts.set_item("bn_stats_fmax", nl::tile_size::BN_STATS_FMAX)?;
    m.add("_tile_size", ts)?;
    Ok(m)
}
