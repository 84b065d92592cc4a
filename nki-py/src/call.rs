//! How a Python call reaches nki-core: under the kernel's own Python file and line, with a
//! failing op carried back through the kernel's Python frames as an exception.
//!
//! An op that fails inside a kernel stops the instance by unwinding (nki-core's `raise`),
//! which must never cross the interpreter. [`op`] runs each call under
//! [`frontend::guard`]: a failure becomes a Python `NkiError` (so `try`/`finally` blocks of
//! the kernel run as for any exception) and the unwind itself waits in this thread's pending
//! slot until the launch's instance closure, back in Rust, resumes it ([`resume_pending`]).

use nki_core::frontend::{self, Abort};
use nki_core::{ErrorKind, NkiError, SourceLoc};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

thread_local! {
    /// True while this thread runs an nki-core call of a kernel (inside [`op`], holding the
    /// GIL).
    static IN_OP: Cell<bool> = const { Cell::new(false) };
    /// The unwind of an op that failed and is on its way out of the kernel as an exception.
    static PENDING: RefCell<Option<Abort>> = const { RefCell::new(None) };
    /// Per code object: its instructions' (line, column) (Python 3.11+ `co_positions`),
    /// the code object kept alive so that its address names it.
    static POSITIONS: RefCell<HashMap<usize, CodePositions>> = RefCell::new(HashMap::new());
}

/// A code object (kept alive, so that its address keeps naming it) and the (line, column) of
/// each of its instructions.
type CodePositions = (Py<PyAny>, Vec<(u32, u32)>);

/// The folder of the `nki_rs` package: frames there are the package's, not the kernel's.
static PACKAGE_DIR: PyOnceLock<String> = PyOnceLock::new();

/// Sets the `nki_rs` package folder (called once by its `__init__`).
#[pyfunction]
pub(crate) fn _set_package_dir(py: Python<'_>, dir: String) {
    let _ = PACKAGE_DIR.set(py, dir);
}

/// Runs `f`, one `nl.*` / `nisa.*` call of the kernel, under the kernel's current line. A
/// failing op becomes an `NkiError` exception (its unwind kept for [`resume_pending`]); a
/// call outside a kernel is an `OutsideKernel` error.
pub(crate) fn op<R>(py: Python<'_>, api: &'static str, f: impl FnOnce() -> R) -> PyResult<R> {
    if !frontend::in_kernel() {
        let e = NkiError::new(
            ErrorKind::OutsideKernel,
            api,
            format!(
                "{api} called outside of a kernel launch (err_nki_api_outside_of_nki_kernel): \
                 run the kernel with nki_rs.simulate or nki_rs.estimate"
            ),
        );
        return Err(to_py(py, &e));
    }
    let loc = kernel_loc(py)?;
    let outer = IN_OP.with(|c| c.replace(true));
    let done = frontend::guard(|| loc.at(f));
    IN_OP.with(|c| c.set(outer));
    match done {
        Ok(r) => Ok(r),
        Err(abort) => Err(pending(py, abort)),
    }
}

/// nki-core's wait hook ([`frontend::set_wait_hook`]): an instance that waits for another
/// inside one of its kernel's calls (a core of an LNC=2 launch at `sendrecv` /
/// `core_barrier`) lets go of the GIL while it waits, so the other instance's Python can run
/// to the call that ends the wait. Elsewhere the wait runs as it is.
pub(crate) fn release_gil_while_waiting(wait: &mut dyn FnMut()) {
    if !IN_OP.with(Cell::get) {
        return wait();
    }
    /// Takes the GIL back when the wait ends.
    struct Retake(*mut pyo3::ffi::PyThreadState);
    impl Drop for Retake {
        fn drop(&mut self) {
            // SAFETY: the thread state this thread saved below.
            unsafe { pyo3::ffi::PyEval_RestoreThread(self.0) }
        }
    }
    // SAFETY: inside `op` this thread holds the GIL; the wait (a condition variable of
    // nki-core) touches no Python object until the GIL is back.
    let _retake = Retake(unsafe { pyo3::ffi::PyEval_SaveThread() });
    wait();
}

/// Fails the running kernel with `e` at the kernel's current line (a mistake the front end
/// finds itself: an argument of the wrong kind).
pub(crate) fn fail(py: Python<'_>, e: NkiError) -> PyErr {
    match op(py, e.op(), || -> () { frontend::fail(e.clone()) }) {
        Err(err) => err,
        Ok(()) => unreachable!("frontend::fail does not return"),
    }
}

/// Keeps `abort` for the instance closure and returns the exception the kernel sees.
fn pending(py: Python<'_>, abort: Abort) -> PyErr {
    let err = match abort.error() {
        Some(e) => to_py(py, e),
        None => to_py(
            py,
            &NkiError::new(
                ErrorKind::KernelPanic,
                "kernel",
                "the kernel instance stopped (cancelled, or a panic inside nki-core)",
            ),
        ),
    };
    PENDING.with(|p| {
        let mut p = p.borrow_mut();
        // The first failure wins: a kernel that caught one exception and failed again
        // still reports the first.
        if p.is_none() {
            *p = Some(abort);
        }
    });
    err
}

/// Resumes the unwind of an op that failed during the kernel's Python call, if any.
pub(crate) fn resume_pending() {
    if let Some(abort) = PENDING.with(|p| p.borrow_mut().take()) {
        abort.resume();
    }
}

/// Drops an unwind left pending (a launch that ended without resuming it).
pub(crate) fn clear_pending() {
    PENDING.with(|p| p.borrow_mut().take());
}

/// A code object (kept alive, so that its address keeps naming it) and the variable the
/// result of one of its calls is stored into, if any.
type Assigned = (Py<PyAny>, Option<String>);

thread_local! {
    /// Per (code object, instruction offset) of a call: where its result goes.
    static ASSIGNED: RefCell<HashMap<(usize, i64), Assigned>> = RefCell::new(HashMap::new());
}

/// The Python variable the kernel stores the result of its current call into (`x` in
/// `x = nl.ndarray(...)`): the instruction after the call in the kernel's frame, when it is a
/// plain store of a name. `None` for a result used otherwise (an argument, an item, a
/// tuple).
pub(crate) fn assigned_name(py: Python<'_>) -> PyResult<Option<String>> {
    let frame = kernel_frame(py)?;
    let code = frame.getattr("f_code")?;
    let lasti: i64 = frame.getattr("f_lasti")?.extract()?;
    let key = (code.as_ptr() as usize, lasti);
    if let Some(name) = ASSIGNED.with(|a| a.borrow().get(&key).map(|(_, n)| n.clone())) {
        return Ok(name);
    }
    let dis = py.import("dis")?;
    let mut after_call = false;
    let mut name = None;
    for ins in dis.call_method1("get_instructions", (&code,))?.try_iter()? {
        let ins = ins?;
        if after_call {
            let op: String = ins.getattr("opname")?.extract()?;
            if matches!(
                op.as_str(),
                "STORE_FAST" | "STORE_NAME" | "STORE_GLOBAL" | "STORE_DEREF"
            ) {
                name = ins.getattr("argval")?.extract::<String>().ok();
            }
            break;
        }
        let offset: i64 = ins.getattr("offset")?.extract()?;
        after_call = offset == lasti;
    }
    ASSIGNED.with(|a| {
        a.borrow_mut()
            .insert(key, (code.clone().unbind(), name.clone()))
    });
    Ok(name)
}

/// The kernel's current frame: the innermost Python frame outside the `nki_rs` package.
fn kernel_frame(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    static GETFRAME: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let getframe = GETFRAME.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
        Ok(py.import("sys")?.getattr("_getframe")?.unbind())
    })?;
    let ours = PACKAGE_DIR.get(py).map(String::as_str);
    let mut frame = getframe.bind(py).call1((0,))?;
    loop {
        let code = frame.getattr("f_code")?;
        let file: String = code.getattr("co_filename")?.extract()?;
        let inside = ours.is_some_and(|d| file.starts_with(d));
        let back = frame.getattr("f_back")?;
        if !inside || back.is_none() {
            return Ok(frame);
        }
        frame = back;
    }
}

/// The kernel's current file, line and column: the innermost Python frame outside the
/// `nki_rs` package.
fn kernel_loc(py: Python<'_>) -> PyResult<SourceLoc> {
    let frame = kernel_frame(py)?;
    let code = frame.getattr("f_code")?;
    let file: String = code.getattr("co_filename")?.extract()?;
    let line: Option<u32> = frame.getattr("f_lineno")?.extract()?;
    let lasti: i64 = frame.getattr("f_lasti")?.extract()?;
    let column = column_of(py, &code, lasti).unwrap_or(1);
    Ok(SourceLoc::new(&file, line.unwrap_or(0), column))
}

/// The 1-based column of the instruction at byte offset `lasti` of `code` (Python 3.11+).
fn column_of(py: Python<'_>, code: &Bound<'_, PyAny>, lasti: i64) -> Option<u32> {
    let key = code.as_ptr() as usize;
    let index = usize::try_from(lasti / 2).ok()?;
    let cached = POSITIONS.with(|p| p.borrow().get(&key).map(|(_, v)| v.get(index).copied()));
    if let Some(c) = cached {
        return c.map(|(_, col)| col);
    }
    let positions = code.call_method0("co_positions").ok()?;
    let mut v = Vec::new();
    for item in positions.try_iter().ok()? {
        let t = item.ok()?;
        let t = t.cast::<PyTuple>().ok()?;
        let line: Option<u32> = t.get_item(0).ok()?.extract().ok()?;
        let col: Option<u32> = t.get_item(2).ok()?.extract().ok()?;
        v.push((line.unwrap_or(0), col.map_or(1, |c| c + 1)));
    }
    let col = v.get(index).map(|&(_, c)| c);
    POSITIONS.with(|p| p.borrow_mut().insert(key, (code.clone().unbind(), v)));
    let _ = py;
    col
}

/// The Python exception of `e`: the `nki_rs.errors` class named after its kind
/// (`ShapeMismatchError`, ...; `NkiError` for a kind without one), with the attributes
/// `kind`, `op`, `program_id`, `file`, `line` and `column`.
pub(crate) fn to_py(py: Python<'_>, e: &NkiError) -> PyErr {
    match build(py, e) {
        Ok(err) => err,
        Err(err) => err,
    }
}

fn build(py: Python<'_>, e: &NkiError) -> PyResult<PyErr> {
    let errors = py.import("nki_rs.errors")?;
    let kind = format!("{:?}", e.kind());
    let class = errors
        .getattr(format!("{kind}Error").as_str())
        .or_else(|_| errors.getattr("NkiError"))?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("kind", &kind)?;
    kwargs.set_item("op", e.op())?;
    kwargs.set_item("message", e.message())?;
    kwargs.set_item("program_id", e.program_id().map(<[usize]>::to_vec))?;
    if let Some(l) = e.location() {
        kwargs.set_item("file", l.file)?;
        kwargs.set_item("line", l.line)?;
        kwargs.set_item("column", l.column)?;
    }
    let exc = class.call((e.to_string(),), Some(&kwargs))?;
    Ok(PyErr::from_value(exc))
}
