//! `nki.lnc` (NKI 0.8) and the deprecated `nisa.core_barrier` / `nisa.sendrecv` (0.7): the
//! two physical cores of an LNC=2 launch (`kernel[2]`) exchanging tiles and waiting for each
//! other, each the nki-core call a Rust kernel makes. A call waits for the other core's call
//! of the same number with the GIL released (see `call::release_gil_while_waiting`).

use crate::call::op;
use crate::isa::engine_of;
use crate::lang::alu_of;
use crate::tensor::{bad_arg, tensor, writable};
use nki_core::nisa::DmaEngine;
use nki_core::{lnc, nisa};
use pyo3::prelude::*;

/// A DMA engine of `sendrecv` (`nisa.dma_engine.dma`, `nisa.dma_engine.gpsimd_dma`).
#[pyclass(name = "dma_engine", module = "nki_rs.isa", frozen)]
pub(crate) struct PyDmaEngine(DmaEngine);

#[pymethods]
impl PyDmaEngine {
    fn __repr__(&self) -> &'static str {
        match self.0 {
            DmaEngine::Dma => "nisa.dma_engine.dma",
            DmaEngine::GpsimdDma => "nisa.dma_engine.gpsimd_dma",
        }
    }
}

/// The engine a `dma_engine=` argument names (`None`: the shared DMA engines).
fn dma_engine_of(
    py: Python<'_>,
    api: &'static str,
    e: Option<&Bound<'_, PyAny>>,
) -> PyResult<DmaEngine> {
    match e {
        None => Ok(DmaEngine::Dma),
        Some(e) if e.is_none() => Ok(DmaEngine::Dma),
        Some(e) => e.cast::<PyDmaEngine>().map(|d| d.get().0).map_err(|_| {
            bad_arg(
                py,
                api,
                format!("dma_engine must be a nisa.dma_engine, not {e}"),
            )
        }),
    }
}

/// Checks `cores=`: the two physical cores of the logical NeuronCore, `(0, 1)`.
fn check_cores(py: Python<'_>, api: &'static str, cores: Option<Vec<usize>>) -> PyResult<()> {
    match cores {
        None => Ok(()),
        Some(c) if c == [0, 1] || c == [1, 0] => Ok(()),
        Some(c) => Err(bad_arg(
            py,
            api,
            format!("cores={c:?}: a barrier is between the two physical cores (0, 1)"),
        )),
    }
}

/// The barrier of `api` over `data` on `engine`.
fn barrier(
    py: Python<'_>,
    api: &'static str,
    data: &Bound<'_, PyAny>,
    cores: Option<Vec<usize>>,
    engine: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    check_cores(py, api, cores)?;
    let e = engine_of(py, api, engine)?;
    let d = tensor(data, "data")?;
    op(py, api, || {
        if api == "nisa.core_barrier" {
            #[allow(deprecated)]
            nisa::core_barrier(d.tref(), e)
        } else {
            lnc::core_barrier(d.tref(), e)
        }
    })
}

/// `nki.lnc.core_barrier(data, cores=(0, 1), engine=None)`: both cores wait here for each
/// other; `data` is the tensor they share.
#[pyfunction]
#[pyo3(signature = (data, cores=None, engine=None))]
fn core_barrier(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    cores: Option<Vec<usize>>,
    engine: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    barrier(py, "nki.lnc.core_barrier", data, cores, engine)
}

/// `nisa.core_barrier(data, cores=(0, 1), engine=None)` (0.7; deprecated in 0.8 for
/// `nki.lnc.core_barrier`).
#[pyfunction(name = "core_barrier")]
#[pyo3(signature = (data, cores=None, engine=None))]
fn isa_core_barrier(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    cores: Option<Vec<usize>>,
    engine: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    barrier(py, "nisa.core_barrier", data, cores, engine)
}

/// `nki.lnc.sendrecv(src, dst, send_to_rank, recv_from_rank, dma_engine=None,
/// priority=None)`: sends `src` to the other core and receives its `src` into `dst`.
#[pyfunction]
#[pyo3(signature = (src, dst, send_to_rank, recv_from_rank, dma_engine=None, priority=None))]
fn sendrecv(
    py: Python<'_>,
    src: &Bound<'_, PyAny>,
    dst: &Bound<'_, PyAny>,
    send_to_rank: usize,
    recv_from_rank: usize,
    dma_engine: Option<&Bound<'_, PyAny>>,
    priority: Option<u8>,
) -> PyResult<()> {
    const API: &str = "nki.lnc.sendrecv";
    let engine = dma_engine_of(py, API, dma_engine)?;
    let (s, d) = (tensor(src, "src")?, tensor(dst, "dst")?);
    writable(py, API, &d)?;
    let mut o = lnc::SendRecvOpts::new().dma_engine(engine);
    o.priority = priority;
    op(py, API, || {
        lnc::sendrecv(s.tile_ref(), d.tile_ref(), send_to_rank, recv_from_rank, o)
    })
}

/// `nisa.sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id=None, dma_engine=None)`
/// (0.7; deprecated in 0.8 for `nki.lnc.sendrecv`).
#[pyfunction(name = "sendrecv")]
#[pyo3(signature = (src, dst, send_to_rank, recv_from_rank, pipe_id=None, dma_engine=None))]
#[allow(clippy::too_many_arguments)]
fn isa_sendrecv(
    py: Python<'_>,
    src: &Bound<'_, PyAny>,
    dst: &Bound<'_, PyAny>,
    send_to_rank: usize,
    recv_from_rank: usize,
    pipe_id: Option<usize>,
    dma_engine: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    const API: &str = "nisa.sendrecv";
    // `pipe_id` names the hardware pipe of the exchange: no effect on values or time here.
    let _ = pipe_id;
    let engine = dma_engine_of(py, API, dma_engine)?;
    let (s, d) = (tensor(src, "src")?, tensor(dst, "dst")?);
    writable(py, API, &d)?;
    op(py, API, || {
        #[allow(deprecated)]
        nisa::sendrecv_on(
            s.tile_ref(),
            d.tile_ref(),
            send_to_rank,
            recv_from_rank,
            engine,
        )
    })
}

/// `nki.lnc.sendrecv_compute(src, dst, send_to_rank, recv_from_rank, reduce_op,
/// priority=None)`: `dst = reduce_op(src, the other core's src)`.
#[pyfunction]
#[pyo3(signature = (src, dst, send_to_rank, recv_from_rank, reduce_op, priority=None))]
fn sendrecv_compute(
    py: Python<'_>,
    src: &Bound<'_, PyAny>,
    dst: &Bound<'_, PyAny>,
    send_to_rank: usize,
    recv_from_rank: usize,
    reduce_op: &Bound<'_, PyAny>,
    priority: Option<u8>,
) -> PyResult<()> {
    const API: &str = "nki.lnc.sendrecv_compute";
    let alu = alu_of(py, API, reduce_op)?;
    let (s, d) = (tensor(src, "src")?, tensor(dst, "dst")?);
    writable(py, API, &d)?;
    op(py, API, || {
        lnc::sendrecv_compute(
            s.tile_ref(),
            d.tile_ref(),
            send_to_rank,
            recv_from_rank,
            alu,
            priority,
        )
    })
}

/// The `nki_rs.lnc` module built in Rust.
pub(crate) fn module(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    let m = PyModule::new(py, "lnc")?;
    m.add_function(wrap_pyfunction!(core_barrier, &m)?)?;
    m.add_function(wrap_pyfunction!(sendrecv, &m)?)?;
    m.add_function(wrap_pyfunction!(sendrecv_compute, &m)?)?;
    Ok(m)
}

/// Adds the 0.7 LNC calls and the `dma_engine` enum to the `nki_rs.isa` module `m`.
pub(crate) fn add_to_isa(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDmaEngine>()?;
    m.add_function(wrap_pyfunction!(isa_core_barrier, m)?)?;
    m.add_function(wrap_pyfunction!(isa_sendrecv, m)?)?;
    m.add("_dma_engine_dma", PyDmaEngine(DmaEngine::Dma))?;
    m.add("_dma_engine_gpsimd_dma", PyDmaEngine(DmaEngine::GpsimdDma))?;
    Ok(())
}
