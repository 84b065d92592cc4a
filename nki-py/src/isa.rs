//! `nki.isa` (`nisa`): the engine instructions, destination first, with NKI's keyword
//! arguments; each one the nki-core `nisa` call a Rust kernel makes.

use crate::call::op;
use crate::lang::{act_of, alu_of};
use crate::tensor::{bad_arg, tensor, writable, Value};
use nki_core::nisa::{
    self, ActivationOpts, AffineExpr, MatmulOpts, Opts, ReduceOpts, TensorScalarOpts,
};
use nki_core::Engine;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// An engine (`nisa.engine.vector`, `nisa.vector_engine`, ...); `unknown` lets the
/// compiler choose.
#[pyclass(name = "engine", module = "nki_rs.isa", frozen)]
pub(crate) struct PyEngine(Option<Engine>);

#[pymethods]
impl PyEngine {
    fn __repr__(&self) -> String {
        match self.0 {
            Some(e) => format!("nisa.engine.{}", engine_name(e)),
            None => "nisa.engine.unknown".into(),
        }
    }
}

/// NKI's name of an engine.
fn engine_name(e: Engine) -> &'static str {
    match e {
        Engine::Tensor => "tensor",
        Engine::Vector => "vector",
        Engine::Scalar => "scalar",
        Engine::GpSimd => "gpsimd",
        Engine::Sync => "sync",
        Engine::Dma => "dma",
    }
}

/// The engine an `engine=` argument names (`None` and `engine.unknown`: the default).
pub(crate) fn engine_of(
    py: Python<'_>,
    api: &'static str,
    e: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<Engine>> {
    match e {
        None => Ok(None),
        Some(e) => match e.cast::<PyEngine>() {
            Ok(e) => Ok(e.get().0),
            Err(_) => Err(bad_arg(
                py,
                api,
                format!("engine must be a nisa.engine, not {e}"),
            )),
        },
    }
}

/// `Opts` with `engine`.
fn opts(engine: Option<Engine>) -> Opts {
    let mut o = Opts::new();
    o.engine = engine;
    o
}

/// Runs `f` as instruction `api`, named `name` when given (NKI's `name=`).
fn instr<R>(
    py: Python<'_>,
    api: &'static str,
    name: Option<&str>,
    f: impl FnOnce() -> R,
) -> PyResult<R> {
    op(py, api, || match name {
        Some(n) => nisa::named(n, f),
        None => f(),
    })
}

/// `nisa.dma_copy(dst, src, ...)`: one DMA transfer between HBM and SBUF (either way) or
/// within one of them.
#[pyfunction]
#[pyo3(signature = (dst, src, oob_mode=None, dge_mode=None, engine=None, priority=None, name=None))]
#[allow(clippy::too_many_arguments)]
fn dma_copy(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    oob_mode: Option<&Bound<'_, PyAny>>,
    dge_mode: Option<&Bound<'_, PyAny>>,
    engine: Option<&Bound<'_, PyAny>>,
    priority: Option<u8>,
    name: Option<String>,
) -> PyResult<()> {
    const API: &str = "nisa.dma_copy";
    for (what, given) in [
        ("oob_mode", oob_mode),
        ("dge_mode", dge_mode),
        ("engine", engine),
    ] {
        if given.is_some_and(|g| !g.is_none()) {
            return Err(bad_arg(
                py,
                API,
                format!("nki_rs does not take dma_copy's {what}= yet"),
            ));
        }
    }
    let (d, s) = (tensor(dst, "dst")?, tensor(src, "src")?);
    writable(py, API, &d)?;
    let mut o = nisa::DmaOpts::new();
    o.priority = priority;
    instr(py, API, name.as_deref(), || {
        nisa::dma_copy(d.tref(), s.tref(), o)
    })
}

/// `nisa.tensor_tensor(dst, data1, data2, op, engine=None)`: `dst = data1 op data2`.
#[pyfunction]
#[pyo3(signature = (dst, data1, data2, op, engine=None, name=None))]
fn tensor_tensor(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    data1: &Bound<'_, PyAny>,
    data2: &Bound<'_, PyAny>,
    op: &Bound<'_, PyAny>,
    engine: Option<&Bound<'_, PyAny>>,
    name: Option<String>,
) -> PyResult<()> {
    const API: &str = "nisa.tensor_tensor";
    let (alu, e) = (alu_of(py, API, op)?, engine_of(py, API, engine)?);
    let (d, a, b) = (
        tensor(dst, "dst")?,
        tensor(data1, "data1")?,
        tensor(data2, "data2")?,
    );
    instr(py, API, name.as_deref(), || {
        nisa::tensor_tensor(d.tile_ref(), a.tile_ref(), b.tile_ref(), alu, opts(e))
    })
}

/// `nisa.tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None,
/// reverse1=False, engine=None)`: `dst = (data op0 operand0) op1 operand1`.
#[pyfunction]
#[pyo3(signature = (dst, data, op0, operand0, reverse0=false, op1=None, operand1=None, reverse1=false, engine=None, name=None))]
#[allow(clippy::too_many_arguments)]
fn tensor_scalar(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    data: &Bound<'_, PyAny>,
    op0: &Bound<'_, PyAny>,
    operand0: &Bound<'_, PyAny>,
    reverse0: bool,
    op1: Option<&Bound<'_, PyAny>>,
    operand1: Option<&Bound<'_, PyAny>>,
    reverse1: bool,
    engine: Option<&Bound<'_, PyAny>>,
    name: Option<String>,
) -> PyResult<()> {
    const API: &str = "nisa.tensor_scalar";
    let alu0 = alu_of(py, API, op0)?;
    let second = match (op1, operand1) {
        (Some(o), Some(v)) if !o.is_none() => Some((alu_of(py, API, o)?, Value::of(v)?)),
        (Some(o), None) if !o.is_none() => {
            return Err(bad_arg(py, API, "op1 needs an operand1".into()))
        }
        _ => None,
    };
    let e = engine_of(py, API, engine)?;
    let (d, x, v0) = (
        tensor(dst, "dst")?,
        tensor(data, "data")?,
        Value::of(operand0)?,
    );
    instr(py, API, name.as_deref(), || {
        let mut args = TensorScalarOpts::new();
        args.reverse0 = reverse0;
        args.reverse1 = reverse1;
        args.engine = e;
        if let Some((alu1, v1)) = &second {
            args.op1 = Some((*alu1, v1.operand()));
        }
        nisa::tensor_scalar(d.tile_ref(), x.tile_ref(), alu0, v0.operand(), args)
    })
}

/// `nisa.activation(dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None)`:
/// `dst = op(data * scale + bias)` on ScalarE.
#[pyfunction]
#[pyo3(signature = (dst, op, data, bias=None, scale=None, reduce_op=None, reduce_res=None, reduce_cmd=None, engine=None, name=None))]
#[allow(clippy::too_many_arguments)]
fn activation(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    op: &Bound<'_, PyAny>,
    data: &Bound<'_, PyAny>,
    bias: Option<&Bound<'_, PyAny>>,
    scale: Option<&Bound<'_, PyAny>>,
    reduce_op: Option<&Bound<'_, PyAny>>,
    reduce_res: Option<&Bound<'_, PyAny>>,
    reduce_cmd: Option<&Bound<'_, PyAny>>,
    engine: Option<&Bound<'_, PyAny>>,
    name: Option<String>,
) -> PyResult<()> {
    activate(
        py,
        "nisa.activation",
        [dst, op, data],
        [bias, scale, reduce_op, reduce_res, reduce_cmd, engine],
        name,
    )
}

/// `nisa.activation_reduce(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0)`:
/// [`activation`] with the add-reduction of each partition's results into `reduce_res`.
#[pyfunction]
#[pyo3(signature = (dst, op, data, reduce_op, reduce_res, bias=None, scale=None, name=None))]
#[allow(clippy::too_many_arguments)]
fn activation_reduce(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    op: &Bound<'_, PyAny>,
    data: &Bound<'_, PyAny>,
    reduce_op: &Bound<'_, PyAny>,
    reduce_res: &Bound<'_, PyAny>,
    bias: Option<&Bound<'_, PyAny>>,
    scale: Option<&Bound<'_, PyAny>>,
    name: Option<String>,
) -> PyResult<()> {
    activate(
        py,
        "nisa.activation_reduce",
        [dst, op, data],
        [bias, scale, Some(reduce_op), Some(reduce_res), None, None],
        name,
    )
}

/// `activation` and `activation_reduce` (`api`): `[dst, op, data]` and the keywords
/// `[bias, scale, reduce_op, reduce_res, reduce_cmd, engine]`.
fn activate(
    py: Python<'_>,
    api: &'static str,
    [dst, op, data]: [&Bound<'_, PyAny>; 3],
    [bias, scale, reduce_op, reduce_res, reduce_cmd, engine]: [Option<&Bound<'_, PyAny>>; 6],
    name: Option<String>,
) -> PyResult<()> {
    let f = act_of(py, api, op)?;
    let engine = engine_of(py, api, engine)?;
    if reduce_cmd.is_some_and(|c| !c.is_none()) {
        return Err(bad_arg(
            py,
            api,
            "nki_rs does not take activation's reduce_cmd= yet".into(),
        ));
    }
    let red_op = match reduce_op {
        Some(o) if !o.is_none() => Some(alu_of(py, api, o)?),
        _ => None,
    };
    let (d, x) = (tensor(dst, "dst")?, tensor(data, "data")?);
    let bias = bias.filter(|b| !b.is_none()).map(Value::of).transpose()?;
    let scale = scale.filter(|s| !s.is_none()).map(Value::of).transpose()?;
    let res = reduce_res
        .filter(|r| !r.is_none())
        .map(|r| tensor(r, "reduce_res"))
        .transpose()?;
    if red_op.is_some() != res.is_some() {
        return Err(bad_arg(
            py,
            api,
            "reduce_op and reduce_res go together".into(),
        ));
    }
    instr(py, api, name.as_deref(), || {
        let mut args = ActivationOpts::new();
        if let Some(e) = engine {
            args = args.engine(e);
        }
        if let Some(b) = &bias {
            args = args.bias(b.operand());
        }
        if let Some(s) = &scale {
            args = args.scale(s.operand());
        }
        match (red_op, &res) {
            (Some(o), Some(r)) => {
                nisa::activation_reduce(d.tile_ref(), f, x.tile_ref(), o, r.tile_ref(), args)
            }
            _ => nisa::activation(d.tile_ref(), f, x.tile_ref(), args),
        }
    })
}

/// A `(a, b)` keyword of `nc_matmul` (`tile_position`, `tile_size`; `()` for none).
fn pair(v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<(usize, usize)>> {
    match v {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => {
            let t: Vec<usize> = v.extract()?;
            match t.as_slice() {
                [] => Ok(None),
                [a, b] => Ok(Some((*a, *b))),
                _ => Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "expected a pair, got {t:?}"
                ))),
            }
        }
    }
}

/// `nisa.nc_matmul(dst, stationary, moving, ..., accumulate=None)`: `dst[M, N] (+)=
/// stationary[K, M].T @ moving[K, N]` on TensorE.
#[pyfunction]
#[pyo3(signature = (dst, stationary, moving, is_stationary_onezero=false, is_moving_onezero=false, is_transpose=false, tile_position=None, tile_size=None, accumulate=None, perf_mode=None, name=None))]
#[allow(clippy::too_many_arguments)]
fn nc_matmul(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    stationary: &Bound<'_, PyAny>,
    moving: &Bound<'_, PyAny>,
    is_stationary_onezero: bool,
    is_moving_onezero: bool,
    is_transpose: bool,
    tile_position: Option<&Bound<'_, PyAny>>,
    tile_size: Option<&Bound<'_, PyAny>>,
    accumulate: Option<bool>,
    perf_mode: Option<&Bound<'_, PyAny>>,
    name: Option<String>,
) -> PyResult<()> {
    const API: &str = "nisa.nc_matmul";
    if perf_mode.is_some_and(|p| !p.is_none()) {
        return Err(bad_arg(
            py,
            API,
            "nki_rs does not take nc_matmul's perf_mode= yet".into(),
        ));
    }
    let mut o = MatmulOpts::new();
    o.is_stationary_onezero = is_stationary_onezero;
    o.is_moving_onezero = is_moving_onezero;
    o.is_transpose = is_transpose;
    o.tile_position = pair(tile_position)?;
    o.tile_size = pair(tile_size)?;
    o.accumulate = accumulate;
    let (d, s, m) = (
        tensor(dst, "dst")?,
        tensor(stationary, "stationary")?,
        tensor(moving, "moving")?,
    );
    instr(py, API, name.as_deref(), || {
        nisa::nc_matmul(d.tile_ref(), s.tile_ref(), m.tile_ref(), o)
    })
}

/// `nisa.nc_transpose(dst, data, engine=None)`: `dst[F, P] = data[P, F]`.
#[pyfunction]
#[pyo3(signature = (dst, data, engine=None, name=None))]
fn nc_transpose(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    data: &Bound<'_, PyAny>,
    engine: Option<&Bound<'_, PyAny>>,
    name: Option<String>,
) -> PyResult<()> {
    const API: &str = "nisa.nc_transpose";
    let e = engine_of(py, API, engine)?;
    let (d, x) = (tensor(dst, "dst")?, tensor(data, "data")?);
    instr(py, API, name.as_deref(), || {
        nisa::nc_transpose(d.tile_ref(), x.tile_ref(), opts(e))
    })
}

/// `nisa.tensor_copy(dst, src, engine=None)`: copies (and casts) `src` into `dst`.
#[pyfunction]
#[pyo3(signature = (dst, src, engine=None, name=None))]
fn tensor_copy(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    engine: Option<&Bound<'_, PyAny>>,
    name: Option<String>,
) -> PyResult<()> {
    const API: &str = "nisa.tensor_copy";
    let e = engine_of(py, API, engine)?;
    let (d, s) = (tensor(dst, "dst")?, tensor(src, "src")?);
    instr(py, API, name.as_deref(), || {
        nisa::tensor_copy(d.tile_ref(), s.tile_ref(), opts(e))
    })
}

/// `nisa.memset(dst, value, engine=None)`: fills `dst` with `value`.
#[pyfunction]
#[pyo3(signature = (dst, value, engine=None, name=None))]
fn memset(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    value: f32,
    engine: Option<&Bound<'_, PyAny>>,
    name: Option<String>,
) -> PyResult<()> {
    const API: &str = "nisa.memset";
    let e = engine_of(py, API, engine)?;
    let d = tensor(dst, "dst")?;
    instr(py, API, name.as_deref(), || {
        nisa::memset(d.tile_ref(), value, opts(e))
    })
}

/// `nisa.iota(dst, pattern, offset=0, channel_multiplier=0)`: `dst[p, i...] = offset +
/// p * channel_multiplier + sum(step * i)` over `pattern = [[step, num], ...]`.
#[pyfunction]
#[pyo3(signature = (dst, pattern, offset=0, channel_multiplier=0, name=None))]
fn iota(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    pattern: Vec<Vec<i64>>,
    offset: i32,
    channel_multiplier: i32,
    name: Option<String>,
) -> PyResult<()> {
    const API: &str = "nisa.iota";
    let mut steps = Vec::with_capacity(pattern.len());
    for p in &pattern {
        match p.as_slice() {
            [step, num] => match (i32::try_from(*step), usize::try_from(*num)) {
                (Ok(s), Ok(n)) => steps.push((s, n)),
                _ => {
                    return Err(bad_arg(
                        py,
                        API,
                        format!("pattern entry {p:?} is out of range"),
                    ))
                }
            },
            _ => {
                return Err(bad_arg(
                    py,
                    API,
                    format!("a pattern entry is [step, num], not {p:?}"),
                ))
            }
        }
    }
    let d = tensor(dst, "dst")?;
    instr(py, API, name.as_deref(), || {
        let t = d.tile_ref();
        let mut expr = AffineExpr::new(t.shape()[0], channel_multiplier).offset(offset);
        for (step, num) in &steps {
            expr = expr.free(*step, *num);
        }
        nisa::iota(t, &expr, None)
    })
}

/// `nisa.tensor_reduce(dst, op, data, axis, negate=False, keepdims=False)`: reduces the
/// free axes `axis` of `data` into `dst`.
#[pyfunction]
#[pyo3(signature = (dst, op, data, axis, negate=false, keepdims=false, name=None))]
#[allow(clippy::too_many_arguments)]
fn tensor_reduce(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    op: &Bound<'_, PyAny>,
    data: &Bound<'_, PyAny>,
    axis: &Bound<'_, PyAny>,
    negate: bool,
    keepdims: bool,
    name: Option<String>,
) -> PyResult<()> {
    const API: &str = "nisa.tensor_reduce";
    let _ = keepdims; // dst gives the result's shape; keepdims only names it.
    let alu = alu_of(py, API, op)?;
    let axes: Vec<usize> = match axis.cast::<PyTuple>() {
        Ok(t) => t.extract()?,
        Err(_) => match axis.extract::<Vec<usize>>() {
            Ok(v) => v,
            Err(_) => vec![axis.extract::<usize>()?],
        },
    };
    let (d, x) = (tensor(dst, "dst")?, tensor(data, "data")?);
    let mut o = ReduceOpts::new();
    o.negate = negate;
    instr(py, API, name.as_deref(), || {
        nisa::tensor_reduce(d.tile_ref(), alu, x.tile_ref(), &axes, o)
    })
}

/// Declares the one-operand VectorE instructions `name(dst, data, engine=None)`.
macro_rules! dst_data {
    ($($(#[$doc:meta])* $name:ident, $api:literal;)*) => {$(
        $(#[$doc])*
        #[pyfunction]
        #[pyo3(signature = (dst, data, engine=None, name=None))]
        fn $name(
            py: Python<'_>,
            dst: &Bound<'_, PyAny>,
            data: &Bound<'_, PyAny>,
            engine: Option<&Bound<'_, PyAny>>,
            name: Option<String>,
        ) -> PyResult<()> {
            let e = engine_of(py, $api, engine)?;
            let (d, x) = (tensor(dst, "dst")?, tensor(data, "data")?);
            instr(py, $api, name.as_deref(), || nisa::$name(d.tile_ref(), x.tile_ref(), opts(e)))
        }
    )*};
}

dst_data! {
    /// `nisa.reciprocal(dst, data)`: `dst = 1 / data` on VectorE.
    reciprocal, "nisa.reciprocal";
    /// `nisa.bn_stats(dst, data)`: per-partition mean/variance statistics (six values).
    bn_stats, "nisa.bn_stats";
    /// `nisa.bn_aggr(dst, data)`: (mean, variance) per partition from `bn_stats` results.
    bn_aggr, "nisa.bn_aggr";
}

/// `nisa.scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0=False,
/// reverse1=False)`: `dst = (data op0 operand0) op1 operand1` with `operand1` a tensor.
#[pyfunction]
#[pyo3(signature = (dst, data, op0, operand0, op1, operand1, reverse0=false, reverse1=false, name=None))]
#[allow(clippy::too_many_arguments)]
fn scalar_tensor_tensor(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    data: &Bound<'_, PyAny>,
    op0: &Bound<'_, PyAny>,
    operand0: &Bound<'_, PyAny>,
    op1: &Bound<'_, PyAny>,
    operand1: &Bound<'_, PyAny>,
    reverse0: bool,
    reverse1: bool,
    name: Option<String>,
) -> PyResult<()> {
    const API: &str = "nisa.scalar_tensor_tensor";
    let (alu0, alu1) = (alu_of(py, API, op0)?, alu_of(py, API, op1)?);
    let (d, x, v0) = (
        tensor(dst, "dst")?,
        tensor(data, "data")?,
        Value::of(operand0)?,
    );
    let t1 = tensor(operand1, "operand1")?;
    let mut o = nisa::SttOpts::new();
    o.reverse0 = reverse0;
    o.reverse1 = reverse1;
    instr(py, API, name.as_deref(), || {
        nisa::scalar_tensor_tensor(
            d.tile_ref(),
            x.tile_ref(),
            alu0,
            v0.operand(),
            alu1,
            t1.tile_ref(),
            o,
        )
    })
}

/// `nisa.tensor_tensor_scan(dst, data0, data1, initial, op0, op1, reverse0=False,
/// reverse1=False)`: `r[i] = op1(op0(data0[i], r[i-1]), data1[i])` along each partition.
#[pyfunction]
#[pyo3(signature = (dst, data0, data1, initial, op0, op1, reverse0=false, reverse1=false, name=None))]
#[allow(clippy::too_many_arguments)]
fn tensor_tensor_scan(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    data0: &Bound<'_, PyAny>,
    data1: &Bound<'_, PyAny>,
    initial: &Bound<'_, PyAny>,
    op0: &Bound<'_, PyAny>,
    op1: &Bound<'_, PyAny>,
    reverse0: bool,
    reverse1: bool,
    name: Option<String>,
) -> PyResult<()> {
    const API: &str = "nisa.tensor_tensor_scan";
    let (alu0, alu1) = (alu_of(py, API, op0)?, alu_of(py, API, op1)?);
    let (d, a, b) = (
        tensor(dst, "dst")?,
        tensor(data0, "data0")?,
        tensor(data1, "data1")?,
    );
    let init = Value::of(initial)?;
    let mut o = nisa::ScanOpts::new();
    o.reverse0 = reverse0;
    o.reverse1 = reverse1;
    instr(py, API, name.as_deref(), || {
        nisa::tensor_tensor_scan(
            d.tile_ref(),
            a.tile_ref(),
            b.tile_ref(),
            init.operand(),
            alu0,
            alu1,
            o,
        )
    })
}

/// `nisa.max8(dst, src)`: the 8 largest values of each partition, descending.
#[pyfunction]
#[pyo3(signature = (dst, src, name=None))]
fn max8(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    name: Option<String>,
) -> PyResult<()> {
    const API: &str = "nisa.max8";
    let (d, s) = (tensor(dst, "dst")?, tensor(src, "src")?);
    instr(py, API, name.as_deref(), || {
        nisa::max8(d.tile_ref(), s.tile_ref())
    })
}

/// `nisa.nc_find_index8(dst, data, vals)`: the index in each partition of `data` of each of
/// its 8 `vals`.
#[pyfunction]
#[pyo3(signature = (dst, data, vals, name=None))]
fn nc_find_index8(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    data: &Bound<'_, PyAny>,
    vals: &Bound<'_, PyAny>,
    name: Option<String>,
) -> PyResult<()> {
    const API: &str = "nisa.nc_find_index8";
    let (d, x, v) = (
        tensor(dst, "dst")?,
        tensor(data, "data")?,
        tensor(vals, "vals")?,
    );
    instr(py, API, name.as_deref(), || {
        nisa::nc_find_index8(d.tile_ref(), x.tile_ref(), v.tile_ref())
    })
}

/// The `nki_rs.isa` module built in Rust.
pub(crate) fn module(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    let m = PyModule::new(py, "isa")?;
    m.add_class::<PyEngine>()?;
    for f in [
        wrap_pyfunction!(dma_copy, &m)?,
        wrap_pyfunction!(tensor_tensor, &m)?,
        wrap_pyfunction!(tensor_scalar, &m)?,
        wrap_pyfunction!(activation, &m)?,
        wrap_pyfunction!(activation_reduce, &m)?,
        wrap_pyfunction!(tensor_tensor_scan, &m)?,
        wrap_pyfunction!(max8, &m)?,
        wrap_pyfunction!(nc_find_index8, &m)?,
        wrap_pyfunction!(nc_matmul, &m)?,
        wrap_pyfunction!(nc_transpose, &m)?,
        wrap_pyfunction!(tensor_copy, &m)?,
        wrap_pyfunction!(memset, &m)?,
        wrap_pyfunction!(iota, &m)?,
        wrap_pyfunction!(tensor_reduce, &m)?,
        wrap_pyfunction!(reciprocal, &m)?,
        wrap_pyfunction!(bn_stats, &m)?,
        wrap_pyfunction!(bn_aggr, &m)?,
        wrap_pyfunction!(scalar_tensor_tensor, &m)?,
    ] {
        m.add_function(f)?;
    }
    for (name, e) in [
        ("tensor_engine", Some(Engine::Tensor)),
        ("vector_engine", Some(Engine::Vector)),
        ("scalar_engine", Some(Engine::Scalar)),
        ("gpsimd_engine", Some(Engine::GpSimd)),
        ("sync_engine", Some(Engine::Sync)),
        ("dma_engine", Some(Engine::Dma)),
        ("unknown_engine", None),
    ] {
        m.add(name, PyEngine(e))?;
    }
    Ok(m)
}
