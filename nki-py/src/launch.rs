//! Launching a Python kernel: its HBM arguments from NumPy bit patterns, one call of the
//! Python function per program instance under nki-core's launcher, its returned tensors back
//! as bit patterns, and the modelled profile.

use crate::call::{clear_pending, resume_pending, to_py};
use crate::tensor::{dtype_named, PyTensor};
use nki_core::frontend::{self, AnyHbm};
use nki_core::{DType, Dialect, ErrorKind, Launch, Mode, NkiError, Profile, SourceLoc, Target};
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::sync::Mutex;

/// A tensor in device HBM: a kernel argument, or an output the kernel returned.
#[pyclass(name = "HbmTensor", module = "nki_rs", frozen)]
pub struct PyHbm(AnyHbm);

#[pymethods]
impl PyHbm {
    /// A tensor of `dtype` (NKI's name) and `shape` holding `bits`, one bit pattern per
    /// element, row-major: a 1-D `uint8`, `uint16` or `uint32` array of the dtype's width.
    #[staticmethod]
    fn from_bits(dtype: &str, shape: Vec<usize>, bits: &Bound<'_, PyAny>) -> PyResult<PyHbm> {
        let d = dtype_of_name(dtype)?;
        let made = if let Ok(a) = bits.extract::<PyReadonlyArray1<'_, u32>>() {
            AnyHbm::from_bits(d, &shape, a.as_array().iter().copied())
        } else if let Ok(a) = bits.extract::<PyReadonlyArray1<'_, u16>>() {
            AnyHbm::from_bits(d, &shape, a.as_array().iter().map(|&b| u32::from(b)))
        } else if let Ok(a) = bits.extract::<PyReadonlyArray1<'_, u8>>() {
            AnyHbm::from_bits(d, &shape, a.as_array().iter().map(|&b| u32::from(b)))
        } else {
            return Err(PyValueError::new_err(
                "bits must be a 1-D uint8, uint16 or uint32 array",
            ));
        };
        made.map(PyHbm).map_err(|e| to_py(bits.py(), &e))
    }

    /// A tensor with a shape and a dtype but no values (for estimates).
    #[staticmethod]
    fn shape_only(py: Python<'_>, dtype: &str, shape: Vec<usize>) -> PyResult<PyHbm> {
        let d = dtype_of_name(dtype)?;
        AnyHbm::shape_only(d, &shape)
            .map(PyHbm)
            .map_err(|e| to_py(py, &e))
    }

    /// The values' bit patterns, row-major, as a 1-D array of the dtype's width.
    fn bits<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let bits = self.0.to_bits().map_err(|e| to_py(py, &e))?;
        Ok(match self.0.dtype().size() {
            1 => PyArray1::from_vec(py, bits.into_iter().map(|b| b as u8).collect()).into_any(),
            2 => PyArray1::from_vec(py, bits.into_iter().map(|b| b as u16).collect()).into_any(),
            _ => PyArray1::from_vec(py, bits).into_any(),
        })
    }

    /// NKI's name of the dtype.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.0.dtype().name()
    }

    /// The shape.
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.0.shape().to_vec()
    }

    /// The name in errors and profiles.
    #[getter]
    fn name(&self) -> String {
        self.0.name()
    }

    /// Names the tensor in errors and profiles.
    fn set_name(&self, name: &str) {
        self.0.set_name(name)
    }
}

/// The dtype named `name`, or a `ValueError`.
fn dtype_of_name(name: &str) -> PyResult<DType> {
    dtype_named(name).ok_or_else(|| PyValueError::new_err(format!("{name} is not an NKI dtype")))
}

/// The modelled timeline of a launch: latency, what bounds it, engines, DMA, the kernel's
/// busiest lines; a JSON summary, a Chrome trace and an HTML page.
#[pyclass(name = "Profile", module = "nki_rs", unsendable)]
pub struct PyProfile(Profile);

#[pymethods]
impl PyProfile {
    /// Modelled latency in ns (the kernel's whole time on the device).
    #[getter]
    fn latency_ns(&self) -> f64 {
        self.0.latency_ns
    }

    /// Modelled latency in µs.
    #[getter]
    fn latency_us(&self) -> f64 {
        self.0.latency_us()
    }

    /// What takes the largest share of the latency (`"TensorE"`, `"DMA bandwidth"`, ...).
    #[getter]
    fn bottleneck(&self) -> Option<String> {
        self.0.bounds.first().map(|b| b.bound.to_string())
    }

    /// The latency split by what bounds it: `(what, ns, percent)`, largest first.
    #[getter]
    fn bounds(&self) -> Vec<(String, f64, f64)> {
        self.0
            .bounds
            .iter()
            .map(|b| (b.bound.to_string(), b.ns, b.percent))
            .collect()
    }

    /// The kernel's performance bounds in AWS's vocabulary (as the Rust `Profile::bounds()`):
    /// a dict with `table` (`[(name, ns, percent_of_active)]` for `memory_bound`,
    /// `memory_bound_ideal`, `compute_bound`, `compute_bound_ideal`, `perfect_pipeline`), the
    /// quantities behind them (`active_ns`, `dma_peak_gbps`, `bytes_moved`, `bytes_ideal`,
    /// `useful_flops_adjusted`, `tensor_peak_tflops`, each bound's `*_ns`) and `findings`
    /// (dicts of `kind`, `location` — the kernel's file:line:column —, `api`, `count`,
    /// `bytes`, `detail`).
    #[getter]
    fn performance_bounds<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let b = self.0.bounds();
        let d = PyDict::new(py);
        d.set_item("active_ns", b.active_ns)?;
        d.set_item("dma_peak_gbps", b.dma_peak_gbps)?;
        d.set_item("bytes_moved", b.bytes_moved)?;
        d.set_item("bytes_ideal", b.bytes_ideal)?;
        d.set_item("useful_flops_adjusted", b.useful_flops_adjusted)?;
        d.set_item("tensor_peak_tflops", b.tensor_peak_tflops)?;
        d.set_item("memory_bound_ns", b.memory_bound_ns)?;
        d.set_item("memory_bound_ideal_ns", b.memory_bound_ideal_ns)?;
        d.set_item("compute_bound_ns", b.compute_bound_ns)?;
        d.set_item("compute_bound_ideal_ns", b.compute_bound_ideal_ns)?;
        d.set_item("perfect_pipeline_ns", b.perfect_pipeline_ns)?;
        let table: Vec<(&str, f64, f64)> = b
            .table
            .iter()
            .map(|r| (r.name, r.ns, r.percent_of_active))
            .collect();
        d.set_item("table", table)?;
        let findings = PyList::empty(py);
        for f in &b.findings {
            let x = PyDict::new(py);
            x.set_item("kind", f.kind.name())?;
            x.set_item("location", &f.location)?;
            x.set_item("api", f.api)?;
            x.set_item("count", f.count)?;
            x.set_item("bytes", f.bytes)?;
            x.set_item("detail", &f.detail)?;
            findings.append(x)?;
        }
        d.set_item("findings", findings)?;
        Ok(d)
    }

    /// Instructions recorded.
    #[getter]
    fn instructions(&self) -> usize {
        self.0.instructions
    }

    /// Peak SBUF bytes per partition held by live tiles.
    #[getter]
    fn sbuf_peak_bytes(&self) -> usize {
        self.0.memory.sbuf_bytes_per_partition
    }

    /// Peak PSUM bytes per partition held by live tiles.
    #[getter]
    fn psum_peak_bytes(&self) -> usize {
        self.0.memory.psum_bytes_per_partition
    }

    /// Model FLOPs utilisation in percent.
    #[getter]
    fn mfu_percent(&self) -> f64 {
        self.0.mfu_percent
    }

    /// The target modelled (`trn1`, `trn2`, `trn3`).
    #[getter]
    fn target(&self) -> String {
        format!("{:?}", self.0.target).to_lowercase()
    }

    /// The kernel lines taking the most time: `(file:line:column, api, engine, ns, percent)`.
    #[getter]
    fn top_lines(&self) -> Vec<(String, &'static str, &'static str, f64, f64)> {
        self.0
            .top_lines
            .iter()
            .map(|l| (l.location.clone(), l.api, l.engine, l.time_ns, l.percent))
            .collect()
    }

    /// The summary as JSON.
    fn to_json(&self) -> String {
        self.0.to_json()
    }

    /// Writes the timeline as a Chrome trace (open it in Perfetto).
    fn write_chrome_trace(&self, path: std::path::PathBuf) -> PyResult<()> {
        self.0
            .write_chrome_trace(&path)
            .map_err(|e| PyOSError::new_err(format!("{}: {e}", path.display())))
    }

    /// Writes the profile as an HTML page.
    fn write_html(&self, path: std::path::PathBuf) -> PyResult<()> {
        self.0
            .write_html(&path)
            .map_err(|e| PyOSError::new_err(format!("{}: {e}", path.display())))
    }

    fn __str__(&self) -> String {
        self.0.to_string()
    }

    fn __repr__(&self) -> String {
        format!(
            "Profile(target={}, latency_us={:.3}, bottleneck={:?})",
            self.target(),
            self.0.latency_us(),
            self.bottleneck().unwrap_or_default()
        )
    }
}

/// Runs `kernel(*args, **kwargs)` as an NKI 0.7/0.8 kernel on `grid` (NKI's `kernel[grid]`:
/// 1, or 2 for a logical NeuronCore of two physical cores, LNC=2, each running the kernel
/// with `nl.program_id(0)` its index) in `mode` (`"execute"`, `"simulate"`, `"estimate"`) on
/// `target`; arguments that are `HbmTensor`s reach the kernel as read-only HBM tensors, other
/// values as they are. Returns the tensors the kernel returned and, for a modelled mode, the
/// profile.
///
/// The launch runs with the GIL released: each instance takes it to run the kernel's Python
/// (at LNC=2 the two cores run on two threads, as NKI's simulator runs them) and lets go of
/// it while it waits for the other core (see [`crate::call::release_gil_while_waiting`]).
#[pyfunction]
#[pyo3(signature = (kernel, args, kwargs=None, grid=1, mode="simulate", target="trn2"))]
pub(crate) fn launch(
    py: Python<'_>,
    kernel: Py<PyAny>,
    args: Vec<Py<PyAny>>,
    kwargs: Option<Py<PyDict>>,
    grid: usize,
    mode: &str,
    target: &str,
) -> PyResult<(Vec<PyHbm>, Option<PyProfile>)> {
    let mode = match mode {
        "execute" => Mode::Execute,
        "simulate" => Mode::Simulate,
        "estimate" => Mode::Estimate,
        other => {
            return Err(PyValueError::new_err(format!(
                "mode {other:?}: execute, simulate or estimate"
            )))
        }
    };
    let target = Target::parse(target)
        .ok_or_else(|| PyValueError::new_err(format!("target {target:?}: trn1, trn2 or trn3")))?;
    let defined_at = definition(kernel.bind(py))?;
    let slot = frontend::ReturnSlot::new();
    // The Python exception each failing instance raised, with its program id.
    let raised: Mutex<Vec<(usize, PyErr)>> = Mutex::new(Vec::new());
    let run = py.detach(|| {
        Launch::new(grid)
            .dialect(Dialect::Nki07)
            .target(target)
            .mode(mode)
            .host_threads(1)
            .run(|| {
                Python::attach(|py| {
                    let outcome = call_kernel(py, &kernel, &args, kwargs.as_ref());
                    // An op that failed inside the call reports its own error, even if the
                    // kernel caught the exception.
                    resume_pending();
                    match outcome {
                        Ok(ret) => defined_at.at(|| return_of(py, &slot, &ret)),
                        Err(e) => {
                            // The kernel's tensors its frames hold belong to this thread:
                            // dropped here, not with the exception on the launching thread.
                            clear_frames(py, &e);
                            let me = nki_core::nl::program_id(0);
                            raised
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .push((me, e));
                            defined_at.at(|| {
                                frontend::fail(NkiError::new(
                                    ErrorKind::KernelPanic,
                                    "kernel",
                                    "the kernel raised a Python exception",
                                ))
                            })
                        }
                    }
                })
            })
    });
    clear_pending();
    let mut raised = raised.into_inner().unwrap_or_else(|p| p.into_inner());
    let report = match run {
        Ok(report) => report,
        Err(e) => {
            // The launch reports the failure of the lowest program id; when that instance
            // raised a Python exception, the exception itself.
            let failed = e.program_id().and_then(|p| p.first().copied());
            let own = raised.iter().position(|(me, _)| Some(*me) == failed);
            return Err(match own {
                Some(i) if e.kind() == ErrorKind::KernelPanic => raised.swap_remove(i).1,
                _ => to_py(py, &e),
            });
        }
    };
    let outputs = frontend::returned(slot).map_err(|e| to_py(py, &e))?;
    Ok((
        outputs.into_iter().map(PyHbm).collect(),
        report.profile.map(PyProfile),
    ))
}

/// Clears the local variables of the frames of exception `e`'s traceback (Python's
/// `traceback.clear_frames`; the traceback itself stays).
fn clear_frames(py: Python<'_>, e: &PyErr) {
    if let Some(tb) = e.traceback(py) {
        let cleared = py
            .import("traceback")
            .and_then(|m| m.call_method1("clear_frames", (tb,)));
        // Without it the exception still reaches the caller (its tensors then outlive it).
        drop(cleared);
    }
}

/// Calls the kernel with its HBM arguments as tensors of this instance.
fn call_kernel<'py>(
    py: Python<'py>,
    kernel: &Py<PyAny>,
    args: &[Py<PyAny>],
    kwargs: Option<&Py<PyDict>>,
) -> PyResult<Bound<'py, PyAny>> {
    let arg = |a: &Py<PyAny>| -> PyResult<Bound<'py, PyAny>> {
        let a = a.bind(py);
        match a.cast::<PyHbm>() {
            Ok(h) => Ok(Bound::new(py, PyTensor::of_input(&h.get().0))?.into_any()),
            Err(_) => Ok(a.clone()),
        }
    };
    let positional = args.iter().map(arg).collect::<PyResult<Vec<_>>>()?;
    let named = match kwargs {
        None => None,
        Some(k) => {
            let d = PyDict::new(py);
            for (key, v) in k.bind(py).iter() {
                d.set_item(key, arg(&v.unbind())?)?;
            }
            Some(d)
        }
    };
    kernel
        .bind(py)
        .call(PyTuple::new(py, positional)?, named.as_ref())
}

/// Notes what the instance returned: `None`, a tensor, or a tuple or list of tensors (each a
/// whole `nl.shared_hbm` tensor); anything else fails the kernel.
fn return_of(py: Python<'_>, slot: &frontend::ReturnSlot, ret: &Bound<'_, PyAny>) {
    let items: Vec<Bound<'_, PyAny>> = if ret.is_none() {
        Vec::new()
    } else if let Ok(t) = ret.cast::<PyTuple>() {
        t.iter().collect()
    } else if let Ok(l) = ret.cast::<PyList>() {
        l.iter().collect()
    } else {
        vec![ret.clone()]
    };
    let held: Vec<PyRef<'_, PyTensor>> = items
        .iter()
        .map(|i| match i.cast::<PyTensor>() {
            Ok(t) => t.borrow(),
            Err(_) => frontend::fail(NkiError::new(
                ErrorKind::InvalidArgument,
                "return",
                format!(
                    "a kernel returns nl.shared_hbm tensors (or a tuple of them), not {}",
                    crate::tensor::type_name(i)
                ),
            )),
        })
        .collect();
    let tensors: Vec<&nki_core::nl::Tensor> = held
        .iter()
        .map(|t| match t.whole_tensor() {
            Some(t) => t,
            None => frontend::fail(NkiError::new(
                ErrorKind::WrongMemory,
                "return",
                "a kernel returns whole tensors it allocated in nl.shared_hbm, not a view or an input",
            )),
        })
        .collect();
    frontend::returns(slot, &tensors);
    let _ = py;
}

/// Where the kernel function is defined (its file and `def` line), for errors of the launch
/// itself (what it returned).
fn definition(kernel: &Bound<'_, PyAny>) -> PyResult<SourceLoc> {
    let code = kernel.getattr("__code__")?;
    let file: String = code.getattr("co_filename")?.extract()?;
    let line: u32 = code.getattr("co_firstlineno")?.extract()?;
    Ok(SourceLoc::new(&file, line, 1))
}
