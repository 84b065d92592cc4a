//! ScalarE instructions: `activation` and `activation_reduce` (`f(data * scale + bias)`, with
//! an optional per-partition add-reduction of the result).

use super::base::{dst_forms, per_partition_shape, short, Dst, Output, Site};
use super::{ActFn, Operand};
use crate::context::Op;
use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::record::{Engine, MemKind, Opcode};
use crate::target::Target;
use crate::tile::{Tile, TileRef};

/// The keyword arguments of [`activation`] / [`activation_reduce`]: `bias` (a `[P, 1]`
/// fp32/fp16/bf16 tile), `scale` (an fp32 scalar or a `[P, 1]` fp32 tile; default 1.0) and the
/// output `dtype` (default: `data`'s).
///
/// ```ignore
/// let y = nisa::activation(ActFn::Exp, &x, ActivationArgs::new().bias(&b).scale(0.5));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct ActivationArgs<'a> {
    /// Per-partition bias added after scaling.
    pub bias: Option<TileRef<'a>>,
    /// Scalar or per-partition multiplier applied first.
    pub scale: Operand<'a>,
    /// Output dtype.
    pub dtype: Option<DType>,
}

impl Default for ActivationArgs<'_> {
    fn default() -> Self {
        ActivationArgs {
            bias: None,
            scale: Operand::Scalar {
                value: 1.0,
                float: true,
            },
            dtype: None,
        }
    }
}

impl<'a> ActivationArgs<'a> {
    /// No bias, scale 1.0, `data`'s dtype.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the `[P, 1]` bias.
    pub fn bias(mut self, bias: impl Into<TileRef<'a>>) -> Self {
        self.bias = Some(bias.into());
        self
    }
    /// Sets the scale: an `f32` or a `[P, 1]` fp32 tile.
    pub fn scale(mut self, scale: impl Into<Operand<'a>>) -> Self {
        self.scale = scale.into();
        self
    }
    /// Sets the output dtype.
    pub fn dtype(mut self, dtype: DType) -> Self {
        self.dtype = Some(dtype);
        self
    }
}

dst_forms! {
    /// `op(data * scale + bias)` on ScalarE into a new SBUF tile (NKI `nisa.activation`). All math
    /// is fp32 (`data * scale` and `+ bias` each rounded to fp32, then the function), rounded once
    /// to the output dtype.
    ///
    /// Errors: `op` not in the activation table; `bias` not `[P, 1]` or not fp32/fp16/bf16
    /// (`err_activation_bias_invalid_type`); `scale` not an fp32 scalar or `[P, 1]` fp32 tile
    /// (`err_activation_scale_invalid_type`, `err_activation_scale_scalar_or_vector`); a bias on
    /// `reciprocal` on trn1.
    pub fn activation;
    /// [`activation`] writing into `dst` (a view with `data`'s partitions and elements per
    /// partition; the result is rounded to its dtype, `args.dtype` is not used): NKI's
    /// `out[...] = nisa.activation(...)`. One instruction.
    pub fn activation_into;
    "nisa.activation" <'a>(
        op: ActFn,
        data: impl Into<TileRef<'a>>,
        args: ActivationArgs<'a>
    ) new(args.dtype)
    |ins, out| activate(ins, out, op, data.into(), args, false).0
}

/// [`activation`] plus the add-reduction of the activated values along the free dimension
/// (NKI `nisa.activation_reduce` / `activation(reduce_cmd=reset_reduce)`): returns
/// `(out, reduce_res)` where `reduce_res` is a new `[P, 1]` fp32 SBUF tile holding the sum of
/// each partition's fp32 results (before rounding to the output dtype). One instruction.
#[track_caller]
pub fn activation_reduce<'a>(
    op: ActFn,
    data: impl Into<TileRef<'a>>,
    args: ActivationArgs<'a>,
) -> (Tile, Tile) {
    let ins = Op::begin("nisa.activation_reduce");
    let dst = Dst::New(args.dtype);
    let (out, red) = activate(&ins, dst, op, data.into(), args, true);
    (out.tile(), red.expect("reduce requested"))
}

/// The `activation` builder (`reduce`: also the per-partition sum into a new `[P, 1]` tile).
fn activate<'d, 'a>(
    ins: &Op,
    dst: Dst<'d>,
    op: ActFn,
    x: TileRef<'a>,
    args: ActivationArgs<'a>,
    reduce: bool,
) -> (Output<'d>, Option<Tile>) {
    let api = ins.api;
    ins.operand("data", &x);
    if !op.in_activation_table() {
        ins.fail(ErrorKind::InvalidArgument, format!(
                "'{op}' is not in the Scalar Engine activation table of '{}'; use the nl function or a Vector Engine instruction",
                short(ins.api)
            ));
    }
    let p = x.partitions();
    if let Some(b) = &args.bias {
        ins.check(per_partition_shape(api, "bias", b, p));
        ins.operand("bias", b);
        if !matches!(b.dtype(), DType::F32 | DType::F16 | DType::BF16) {
            ins.fail(ErrorKind::DType, format!(
                    "bias {} of '{}' must be float32, float16 or bfloat16 (err_activation_bias_invalid_type)",
                    b.describe(),
                    short(ins.api)
                ));
        }
        if op == ActFn::Reciprocal && ins.target() == Target::Trn1 {
            ins.fail(
                ErrorKind::InvalidArgument,
                format!(
                    "activation 'reciprocal' of '{}' cannot take a bias on NeuronCore-v2 (trn1)",
                    short(ins.api)
                ),
            );
        }
    }
    let scale_tile = match args.scale {
        Operand::Scalar { .. } => None,
        Operand::Tile(s) => {
            if s.partitions() != p || s.free_size() != 1 {
                ins.fail(ErrorKind::ShapeMismatch, format!(
                        "scale of '{}' must be a scalar or a vector of shape [{p}, 1], got {} (err_activation_scale_scalar_or_vector)",
                        short(ins.api),
                        s.describe()
                    ));
            }
            ins.operand("scale", &s);
            if s.dtype() != DType::F32 {
                ins.fail(
                    ErrorKind::DType,
                    format!(
                        "scale {} of '{}' must be float32 (err_activation_scale_invalid_type)",
                        s.describe(),
                        short(ins.api)
                    ),
                );
            }
            Some(s)
        }
    };
    let out = ins.output(dst, MemKind::Sbuf, x.dtype(), x.shape(), true);
    let red = reduce.then(|| ins.alloc(MemKind::Sbuf, DType::F32, &[p, 1]));
    let ov = out.view();
    let rv = red.as_ref().map(|t| t.view());
    let extra: Vec<&TileRef> = args.bias.iter().chain(scale_tile.iter()).collect();
    let outs: Vec<&TileRef> = std::iter::once(&ov).chain(rv.iter()).collect();
    let site = Site::new(Engine::Scalar, Opcode::Activation).accumulating(reduce);
    ins.compute(site, &[&x], &extra, &outs, || {
        let v = x.gather(api, ins.loc);
        let scale = match (&args.scale, &scale_tile) {
            (_, Some(s)) => s.gather(api, ins.loc),
            (Operand::Scalar { value, .. }, None) => vec![*value as f32; p],
            (Operand::Tile(_), None) => unreachable!("scale tile resolved above"),
        };
        let bias = match &args.bias {
            Some(b) => b.gather(api, ins.loc),
            None => vec![0.0; p],
        };
        let f = x.free_size().max(1);
        let mut r = Vec::with_capacity(v.len());
        let mut sums = Vec::with_capacity(p);
        for (part, row) in v.chunks(f).enumerate() {
            let mut acc = 0.0f64;
            for &d in row {
                let y = op.eval(d * scale[part] + bias[part]);
                acc += y as f64;
                r.push(y);
            }
            sums.push(acc as f32);
        }
        ov.scatter(r);
        if let Some(rv) = &rv {
            rv.scatter(sums);
        }
    });
    (out, red)
}
