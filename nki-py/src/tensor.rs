//! `NkiTensor`: what a kernel holds, an nki-core tensor or a view of one (a slice, a
//! reshape, an access pattern), and the dtype and buffer objects of `nki.language`.
//!
//! An on-chip tensor `nl.ndarray` allocates is made in nki-core at its first use ([`Lazy`]):
//! in `x = nl.ndarray(...)` inside a loop, Python still holds the previous iteration's `x`
//! while the call runs and drops it only when the result is stored, where a Rust kernel's
//! `let x` dropped it at the end of the iteration. Made at first use, the new tile is
//! allocated after the old one is gone, so the live tiles, the capacity checks and the
//! profile's SBUF/PSUM peak are a Rust kernel's.

use crate::call::{fail, op};
use nki_core::frontend::{attach, detach, AnyHbm, ChipView};
use nki_core::nl::Operand;
use nki_core::nl::{Alloc, Buffer, Tensor, TensorRef};
use nki_core::{DType, ErrorKind, HbmView, Ix, NkiError, SourceLoc, Tile, TileRef};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyEllipsis, PySlice, PyTuple};
use std::cell::OnceCell;
use std::rc::Rc;

/// A tensor the kernel allocated: made at once, or (unwritten on-chip tensors) at its first
/// use.
pub(crate) struct Lazy {
    made: OnceCell<Tensor>,
    /// What to allocate and the kernel line that asked for it (`None`: made at once).
    spec: Option<Spec>,
}

/// An `nl.ndarray` call not made yet.
pub(crate) struct Spec {
    pub(crate) shape: Vec<usize>,
    pub(crate) dtype: DType,
    pub(crate) alloc: Alloc,
    pub(crate) loc: SourceLoc,
}

impl Lazy {
    /// The tensor, made now if it is not yet (inside [`op`]: its allocation may fail the
    /// kernel, at the line of the `nl.ndarray` call).
    fn get(&self) -> &Tensor {
        self.made.get_or_init(|| match &self.spec {
            Some(s) => s
                .loc
                .at(|| nki_core::nl::ndarray(&s.shape, s.dtype, s.alloc.clone())),
            None => unreachable!("a tensor made at once is set when it is made"),
        })
    }

    /// The shape and dtype, without making the tensor.
    fn shape_dtype(&self) -> (Vec<usize>, DType) {
        match (self.made.get(), &self.spec) {
            (Some(t), _) => (t.shape().to_vec(), t.dtype()),
            (None, Some(s)) => (s.shape.clone(), s.dtype),
            (None, None) => unreachable!("a tensor made at once is set when it is made"),
        }
    }
}

/// What a Python tensor object stands on.
#[derive(Clone)]
enum Base {
    /// A tensor the kernel allocated (`nl.ndarray`, ...), in any memory.
    Tensor(Rc<Lazy>),
    /// A tile an `nl` operator returned.
    Tile(Rc<Tile>),
    /// A kernel argument in HBM (read-only).
    Input(Rc<AnyHbm>),
}

/// The part of the base a Python tensor object sees.
#[derive(Clone)]
enum View {
    /// All of it.
    Whole,
    /// A view of an on-chip base.
    Chip(ChipView),
    /// A view of an HBM base.
    Hbm(HbmView),
}

/// An NKI tensor (`NkiTensor`) or a view of one, in SBUF, PSUM or HBM.
#[pyclass(unsendable, name = "NkiTensor", module = "nki_rs")]
#[derive(Clone)]
pub struct PyTensor {
    base: Base,
    view: View,
}

impl PyTensor {
    /// A whole tensor the kernel allocated.
    pub(crate) fn of_tensor(t: Tensor) -> PyTensor {
        PyTensor {
            base: Base::Tensor(Rc::new(Lazy {
                made: OnceCell::from(t),
                spec: None,
            })),
            view: View::Whole,
        }
    }

    /// A whole on-chip tensor made at its first use.
    pub(crate) fn of_spec(spec: Spec) -> PyTensor {
        PyTensor {
            base: Base::Tensor(Rc::new(Lazy {
                made: OnceCell::new(),
                spec: Some(spec),
            })),
            view: View::Whole,
        }
    }

    /// A whole tile an operator returned.
    pub(crate) fn of_tile(t: Tile) -> PyTensor {
        PyTensor {
            base: Base::Tile(Rc::new(t)),
            view: View::Whole,
        }
    }

    /// The kernel argument `t`.
    pub(crate) fn of_input(t: &AnyHbm) -> PyTensor {
        PyTensor {
            base: Base::Input(Rc::new(t.clone())),
            view: View::Whole,
        }
    }

    /// The tensor the object is, when it is a whole kernel-allocated tensor (what a kernel
    /// returns).
    pub(crate) fn whole_tensor(&self) -> Option<&Tensor> {
        match (&self.base, &self.view) {
            (Base::Tensor(t), View::Whole) => Some(t.get()),
            _ => None,
        }
    }

    /// The tensor's name (`NkiTensor.name`).
    pub(crate) fn name_of(&self) -> String {
        match &self.base {
            Base::Tensor(t) => match (t.made.get(), &t.spec) {
                (Some(t), _) => t.name(),
                (_, Some(s)) => s.alloc.name.clone().unwrap_or_default(),
                (None, None) => String::new(),
            },
            Base::Tile(_) => String::new(),
            Base::Input(t) => t.name(),
        }
    }

    /// True for a kernel argument (or a view of one): read-only.
    pub(crate) fn is_input(&self) -> bool {
        matches!(self.base, Base::Input(_))
    }

    /// The shape and dtype (without making a tensor not made yet).
    fn shape_dtype(&self) -> (Vec<usize>, DType) {
        match (&self.base, &self.view) {
            (Base::Tensor(t), View::Whole) => t.shape_dtype(),
            _ => {
                let r = self.tref();
                (r.shape().to_vec(), r.dtype())
            }
        }
    }

    /// The nki-core view the object stands for. Inside [`op`] only: a tensor's on-chip
    /// view of an HBM tensor fails the op.
    pub(crate) fn tref(&self) -> TensorRef<'_> {
        match (&self.base, &self.view) {
            (_, View::Hbm(v)) => TensorRef::Hbm(v.clone()),
            (Base::Input(t), _) => TensorRef::Hbm(t.input_view()),
            (Base::Tensor(t), View::Whole) => t.get().view(),
            (Base::Tensor(t), View::Chip(c)) => TensorRef::Chip(attach(t.get().tile(), c)),
            (Base::Tile(t), View::Whole) => TensorRef::Chip(t.view()),
            (Base::Tile(t), View::Chip(c)) => TensorRef::Chip(attach(t, c)),
        }
    }

    /// The object's view as a tile view (inside [`op`]: an HBM tensor fails the op).
    pub(crate) fn tile_ref(&self) -> TileRef<'_> {
        TileRef::from(self.tref())
    }

    /// A new object over the same base seeing `r` (a view made from [`PyTensor::tref`]).
    fn derived(&self, r: TensorRef<'_>) -> Result<PyTensor, NkiError> {
        let view = match r {
            TensorRef::Hbm(v) => View::Hbm(v),
            TensorRef::Chip(t) => View::Chip(detach(&t)?),
        };
        Ok(PyTensor {
            base: self.base.clone(),
            view,
        })
    }

    /// Makes a view of `self` with `f` under op `api`.
    fn view_op(
        &self,
        py: Python<'_>,
        api: &'static str,
        f: impl FnOnce(TensorRef<'_>) -> TensorRef<'_>,
    ) -> PyResult<PyTensor> {
        let made = op(py, api, || self.derived(f(self.tref())))?;
        made.map_err(|e| fail(py, e))
    }
}

#[pymethods]
impl PyTensor {
    /// The shape, a tuple.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.shape_dtype().0)
    }

    /// The dtype.
    #[getter]
    fn dtype(&self) -> PyDType {
        PyDType(self.shape_dtype().1)
    }

    /// The number of dimensions.
    #[getter]
    fn ndim(&self) -> usize {
        self.shape_dtype().0.len()
    }

    /// The number of elements.
    #[getter]
    fn size(&self) -> usize {
        self.shape_dtype().0.iter().product()
    }

    /// The memory the tensor lives in.
    #[getter]
    fn buffer(&self) -> PyBuffer {
        PyBuffer(match &self.base {
            Base::Tensor(t) => match (t.made.get(), &t.spec) {
                (Some(t), _) => t.buffer(),
                (None, Some(s)) => s.alloc.buffer,
                (None, None) => unreachable!("a tensor made at once is set when it is made"),
            },
            Base::Tile(t) if t.mem() == nki_core::MemKind::Psum => Buffer::Psum,
            Base::Tile(_) => Buffer::Sbuf,
            Base::Input(_) => Buffer::SharedHbm,
        })
    }

    /// The tensor's name.
    #[getter]
    fn name(&self) -> String {
        self.name_of()
    }
    /// `t[...]`: integer indices, slices (`start:stop:step`), `nl.ds(start, size)` and `...`.
    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let shape = self.shape_dtype().0;
        let index = index_of(key, &shape)?;
        self.view_op(py, "slice", |t| t.slice(index))
    }

    /// The tensor viewed with another shape (NKI `tensor.reshape`).
    fn reshape(&self, py: Python<'_>, shape: Vec<usize>) -> PyResult<PyTensor> {
        self.view_op(py, "reshape", |t| t.reshape(&shape))
    }

    /// The tensor with its dimensions reordered (NKI `tensor.permute`).
    #[pyo3(signature = (*dims))]
    fn permute(&self, py: Python<'_>, dims: Vec<usize>) -> PyResult<PyTensor> {
        self.view_op(py, "permute", |t| t.permute(&dims))
    }

    /// An access pattern over the tensor's storage (NKI `tensor.ap(pattern, offset, dtype)`).
    #[pyo3(signature = (pattern, offset=0, dtype=None))]
    fn ap(
        &self,
        py: Python<'_>,
        pattern: Vec<[usize; 2]>,
        offset: usize,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        match dtype {
            None => self.view_op(py, "ap", |t| t.ap(&pattern, offset)),
            Some(d) => {
                let d = dtype_of(d)?;
                self.view_op(py, "ap", |t| t.ap_as(&pattern, offset, d))
            }
        }
    }

    /// The view with a new size-1 dimension at `dim` (NKI `tensor.expand_dim`).
    fn expand_dim(&self, py: Python<'_>, dim: usize) -> PyResult<PyTensor> {
        self.view_op(py, "expand_dim", |t| t.expand_dim(dim))
    }

    /// The view without its size-1 dimension `dim` (NKI `tensor.squeeze_dim`).
    fn squeeze_dim(&self, py: Python<'_>, dim: usize) -> PyResult<PyTensor> {
        self.view_op(py, "squeeze_dim", |t| t.squeeze_dim(dim))
    }

    /// The view's size-1 dimension `dim` repeated `size` times (NKI `tensor.broadcast`).
    fn broadcast(&self, py: Python<'_>, dim: usize, size: usize) -> PyResult<PyTensor> {
        self.view_op(py, "broadcast", |t| t.broadcast(dim, size))
    }

    /// The same bytes read as `dtype` (NKI `tensor.view(dtype)`).
    fn view(&self, py: Python<'_>, dtype: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let d = dtype_of(dtype)?;
        self.view_op(py, "view", |t| t.view_as(d))
    }

    fn __repr__(&self) -> String {
        let (shape, dtype) = self.shape_dtype();
        format!(
            "NkiTensor({}, {:?}, buffer={})",
            dtype.name(),
            shape,
            self.buffer().0.nki_name()
        )
    }
}

/// The index a Python key (`t[key]`) stands for over a tensor of `shape`.
fn index_of(key: &Bound<'_, PyAny>, shape: &[usize]) -> PyResult<Vec<Ix>> {
    let items: Vec<Bound<'_, PyAny>> = match key.cast::<PyTuple>() {
        Ok(t) => t.iter().collect(),
        Err(_) => vec![key.clone()],
    };
    let ellipses = items
        .iter()
        .filter(|i| i.is(PyEllipsis::get(key.py())))
        .count();
    if ellipses > 1 {
        return Err(PyValueError::new_err(
            "an index can have only one ellipsis ('...')",
        ));
    }
    let named = items.len() - ellipses;
    let mut out = Vec::with_capacity(shape.len());
    for item in &items {
        if item.is(PyEllipsis::get(key.py())) {
            let fill = shape.len().saturating_sub(named);
            out.extend((0..fill).map(|_| Ix::Range {
                start: 0,
                end: None,
                step: 1,
            }));
            continue;
        }
        let dim = shape.get(out.len()).copied().unwrap_or(0) as i64;
        out.push(one_index(item, dim)?);
    }
    Ok(out)
}

/// One entry of an index over a dimension of `dim` elements (negative positions count from
/// its end, as in Python).
fn one_index(item: &Bound<'_, PyAny>, dim: i64) -> PyResult<Ix> {
    let pos = |v: i64| -> PyResult<usize> {
        let v = if v < 0 { v + dim } else { v };
        usize::try_from(v).map_err(|_| {
            PyValueError::new_err(format!(
                "index {v} is before the start of a dimension of {dim}"
            ))
        })
    };
    if let Ok(s) = item.cast::<PySlice>() {
        let get = |name: &str| -> PyResult<Option<i64>> { s.getattr(name)?.extract() };
        let step = get("step")?.unwrap_or(1);
        if step < 1 {
            return Err(PyValueError::new_err(format!(
                "slice step {step}: NKI slices step forward (step >= 1)"
            )));
        }
        return Ok(Ix::Range {
            start: get("start")?.map(pos).transpose()?.unwrap_or(0),
            end: get("stop")?.map(pos).transpose()?,
            step: step as usize,
        });
    }
    if let Ok(ds) = item.cast::<PyDs>() {
        let ds = ds.borrow();
        return Ok(nki_core::ds(ds.start, ds.size));
    }
    if let Ok(i) = item.extract::<i64>() {
        return Ok(Ix::At(pos(i)?));
    }
    Err(PyTypeError::new_err(format!(
        "a tensor index takes integers, slices, nl.ds(start, size) and '...', not {}",
        item.get_type().name()?
    )))
}

/// `nl.ds(start, size)`: the slice `start:start + size`.
#[pyclass(name = "ds", module = "nki_rs.language", frozen)]
pub struct PyDs {
    start: usize,
    size: usize,
}

#[pymethods]
impl PyDs {
    #[new]
    fn new(start: usize, size: usize) -> PyDs {
        PyDs { start, size }
    }

    fn __repr__(&self) -> String {
        format!("ds({}, {})", self.start, self.size)
    }
}

/// An NKI dtype (`nl.float32`, `nl.bfloat16`, ...).
#[pyclass(name = "dtype", module = "nki_rs.language", frozen, eq, hash)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PyDType(pub(crate) DType);

#[pymethods]
impl PyDType {
    /// NKI's name of the dtype (`float32`, `bfloat16`, ...).
    #[getter]
    fn name(&self) -> &'static str {
        self.0.name()
    }

    /// Bytes per element.
    #[getter]
    fn itemsize(&self) -> usize {
        self.0.size()
    }

    fn __repr__(&self) -> String {
        format!("nl.{}", self.0.name())
    }

    fn __str__(&self) -> &'static str {
        self.0.name()
    }
}

/// Every dtype by NKI's name.
pub(crate) const DTYPES: [DType; 18] = [
    DType::F32,
    DType::BF16,
    DType::F16,
    DType::F8E4M3,
    DType::F8E5M2,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::Bool,
    DType::F8E4M3FN,
    DType::F8E8M0,
    DType::F8E4M3FNx4,
    DType::F8E5M2x4,
    DType::F4E2M1FNx4,
    DType::TF32,
];

/// The dtype `name` names (NKI's names; NumPy's `bool` and `float8_e4m3` spellings too).
pub(crate) fn dtype_named(name: &str) -> Option<DType> {
    let name = match name {
        "bool_" => "bool",
        other => other,
    };
    DTYPES.into_iter().find(|d| d.name() == name)
}

/// The dtype a Python object stands for: an `nl` dtype, a name, a NumPy dtype or scalar type
/// (`np.float32`, `ml_dtypes.bfloat16`).
pub(crate) fn dtype_of(obj: &Bound<'_, PyAny>) -> PyResult<DType> {
    if let Ok(d) = obj.cast::<PyDType>() {
        return Ok(d.get().0);
    }
    let name: Option<String> = if let Ok(s) = obj.extract::<String>() {
        Some(s)
    } else if let Ok(n) = obj.getattr("name").and_then(|n| n.extract::<String>()) {
        Some(n)
    } else {
        obj.getattr("__name__")
            .and_then(|n| n.extract::<String>())
            .ok()
    };
    name.as_deref().and_then(dtype_named).ok_or_else(|| {
        PyTypeError::new_err(format!(
            "{obj} is not an NKI dtype (nl.float32, nl.bfloat16, ...)"
        ))
    })
}

/// An NKI buffer (`nl.sbuf`, `nl.psum`, `nl.hbm`, `nl.private_hbm`, `nl.shared_hbm`).
#[pyclass(name = "buffer", module = "nki_rs.language", frozen, eq)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PyBuffer(pub(crate) Buffer);

#[pymethods]
impl PyBuffer {
    fn __repr__(&self) -> String {
        format!("nl.{}", self.0.nki_name())
    }
}

/// A value an instruction reads: a tensor, or a Python number (its kind decides NKI's type
/// promotion).
pub(crate) enum Value<'py> {
    /// A tensor or view.
    Tensor(PyRef<'py, PyTensor>),
    /// A number; `float` for Python floats.
    Scalar { value: f64, float: bool },
}

impl<'py> Value<'py> {
    /// The value `obj` is (a tensor, a bool, an int or a float).
    pub(crate) fn of(obj: &Bound<'py, PyAny>) -> PyResult<Value<'py>> {
        if let Ok(t) = obj.cast::<PyTensor>() {
            return Ok(Value::Tensor(t.borrow()));
        }
        if let Ok(b) = obj.extract::<bool>() {
            if obj.is_instance_of::<pyo3::types::PyBool>() {
                return Ok(Value::Scalar {
                    value: b as u8 as f64,
                    float: false,
                });
            }
        }
        if obj.is_instance_of::<pyo3::types::PyInt>() {
            let value: i64 = obj.extract()?;
            return Ok(Value::Scalar {
                value: value as f64,
                float: false,
            });
        }
        if let Ok(value) = obj.extract::<f64>() {
            return Ok(Value::Scalar { value, float: true });
        }
        Err(PyTypeError::new_err(format!(
            "expected a tensor or a number, not {}",
            obj.get_type().name()?
        )))
    }

    /// The nki-core operand (inside [`op`]: an HBM tensor fails the op).
    pub(crate) fn operand(&self) -> Operand<'_> {
        match self {
            Value::Tensor(t) => Operand::Tile(t.tile_ref()),
            Value::Scalar { value, float } => Operand::Scalar {
                value: *value,
                float: *float,
            },
        }
    }
}

/// The tensor argument `obj`, or a `TypeError` naming `what`.
pub(crate) fn tensor<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<PyRef<'py, PyTensor>> {
    obj.cast::<PyTensor>().map(|t| t.borrow()).map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be an NKI tensor, not {}",
            type_name(obj)
        ))
    })
}

/// The type name of `obj`, for messages.
pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// Fails the kernel when `dst`, written by `api`, is a kernel argument: nki_rs's kernel
/// arguments are read-only (the outputs are the `nl.shared_hbm` tensors a kernel returns).
pub(crate) fn writable(py: Python<'_>, api: &'static str, dst: &PyTensor) -> PyResult<()> {
    if dst.is_input() {
        return Err(fail(
            py,
            NkiError::new(
                ErrorKind::ImmutableInput,
                api,
                format!(
                    "{api} writes kernel argument '{}', which nki_rs keeps read-only \
                     (err_cannot_update_immutable_parameter): write a tensor the kernel \
                     allocates in nl.shared_hbm and return it",
                    dst.name_of()
                ),
            ),
        ));
    }
    Ok(())
}

/// An invalid-argument error of `api`, failing the kernel at its line.
pub(crate) fn bad_arg(py: Python<'_>, api: &'static str, message: String) -> PyErr {
    fail(py, NkiError::new(ErrorKind::InvalidArgument, api, message))
}
