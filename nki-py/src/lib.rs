//! The native module of the `nki_rs` Python package: NKI Python kernels traced onto
//! nki-core. A kernel runs as Python; each of its `nki.language` / `nki.isa` calls is the
//! nki-core call a Rust kernel makes (nothing here implements an instruction), under the
//! kernel's own file and line.
//!
//! - `call`: the kernel's line, and failing ops carried through Python as exceptions;
//! - `tensor`: `NkiTensor` and its views, dtypes, buffers;
//! - `lang` and `isa`: `nki.language` and `nki.isa`; `lnc`: `nki.lnc` (and 0.7's LNC calls
//!   in `nki.isa`);
//! - `launch`: arguments and outputs as NumPy bit patterns, the launch, the profile.

mod call;
mod isa;
mod lang;
mod launch;
mod lnc;
mod tensor;

use pyo3::prelude::*;

/// True while a kernel runs on this thread (a kernel called inside another is a plain call).
#[pyfunction]
fn in_kernel() -> bool {
    nki_core::frontend::in_kernel()
}

/// The `nki_rs._nki` module.
#[pymodule]
fn _nki(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    // Registered once per process (a second import of the module finds it set).
    let _ = nki_core::frontend::set_wait_hook(call::release_gil_while_waiting);
    m.add_class::<launch::PyHbm>()?;
    m.add_class::<launch::PyProfile>()?;
    m.add_function(wrap_pyfunction!(launch::launch, m)?)?;
    m.add_function(wrap_pyfunction!(call::_set_package_dir, m)?)?;
    m.add_function(wrap_pyfunction!(in_kernel, m)?)?;
    m.add_submodule(&lang::module(py)?)?;
    let isa = isa::module(py)?;
    lnc::add_to_isa(&isa)?;
    m.add_submodule(&isa)?;
    m.add_submodule(&lnc::module(py)?)?;
    Ok(())
}
