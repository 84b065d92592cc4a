//! [`KernelOp`]: an nki-rs kernel as a candle custom op (`CustomOp1/2/3`), with an optional
//! backward for autograd.

use crate::error::op_error;
use crate::kernel::{NkiKernel, NoKernel};
use crate::profile::Profiler;
use crate::storage::{self, Source};
use candle_core::op::BackpropOp;
use candle_core::{
    CpuStorage, CustomOp1, CustomOp2, CustomOp3, DType, Device, Error, Layout, Shape, Storage,
    Tensor,
};
use nki_core::prelude::*;
use std::sync::Arc;

/// The launch grid of a kernel as a function of its input tensors' shapes.
pub type GridFn = dyn Fn(&[&[usize]]) -> Grid + Send + Sync;

/// The output shape as a function of the input shapes, or the (typed) error saying why the
/// inputs do not fit the kernel.
pub type OutputShapeFn = dyn Fn(&[&[usize]]) -> candle_core::Result<Vec<usize>> + Send + Sync;

/// The shape and dtype of every output as a function of the input shapes and dtypes, or the
/// error saying why the inputs do not fit the kernel.
pub type OutputsFn =
    dyn Fn(&[&[usize]], &[DType]) -> candle_core::Result<Vec<(Vec<usize>, DType)>> + Send + Sync;

/// How gradients flow back through the op.
#[derive(Clone)]
enum Backward<B> {
    /// No backward: `backward()` through the op is candle's "backward not supported" error.
    None,
    /// Every input's gradient is the output's gradient (the backward of an addition).
    PassThrough,
    /// A backward kernel with its grid (a function of the forward input shapes).
    Kernel { kernel: B, grid: Arc<GridFn> },
}

/// An nki-rs kernel as a candle custom op.
///
/// Built from a name, a forward [`NkiKernel`] and its launch grid as a function of the input
/// shapes. [`output_shape`](KernelOp::output_shape) says what the output is (default: the
/// first input's shape, with the first input's dtype); [`outputs`](KernelOp::outputs) gives
/// several outputs, each with its own shape and dtype. A backward —
/// [`backward_pass_through`](KernelOp::backward_pass_through) or a
/// [`backward`](KernelOp::backward) kernel — makes the op differentiable, so `Var`s upstream
/// get gradients from `backward()`. [`profiled`](KernelOp::profiled) turns on modelled device
/// time.
///
/// Apply a one-output op with [`apply1`](KernelOp::apply1), [`apply2`](KernelOp::apply2) or
/// [`apply3`](KernelOp::apply3) (or candle's own `Tensor::apply_op2(…, op.clone())`), any op
/// with [`apply`](KernelOp::apply) (every output; no autograd). Inputs are CPU tensors of
/// rank 1 to 5 in f32, bf16, f16, u8, u32, i16 or i32, all of one dtype unless
/// [`mixed_dtypes`](KernelOp::mixed_dtypes) is set; contiguous f32/i32/u32 inputs are read in
/// place and outputs moved into candle storage without a copy (see `storage.rs`). Errors are
/// typed (see the crate's error module): `UnsupportedDTypeForOp` for f64, i64 and the 8-bit
/// floats, `DTypeMismatchBinaryOp` for mixed dtypes, the shape errors the output function
/// returns, and a kernel error (out-of-bounds tile, SBUF overflow, …) wrapped with its
/// [`NkiError`] ([`nki_error`](crate::nki_error)).
pub struct KernelOp<F, B = NoKernel> {
    name: &'static str,
    forward: F,
    grid: Arc<GridFn>,
    outputs: Arc<OutputsFn>,
    mixed_dtypes: bool,
    backward: Backward<B>,
    profiler: Option<Profiler>,
}

impl<F: Clone, B: Clone> Clone for KernelOp<F, B> {
    fn clone(&self) -> Self {
        KernelOp {
            name: self.name,
            forward: self.forward.clone(),
            grid: self.grid.clone(),
            outputs: self.outputs.clone(),
            mixed_dtypes: self.mixed_dtypes,
            backward: self.backward.clone(),
            profiler: self.profiler.clone(),
        }
    }
}

impl<F: NkiKernel + Clone> KernelOp<F> {
    /// An op named `name` launching `forward` on the grid `grid(input shapes)`, without a
    /// backward.
    pub fn new(
        name: &'static str,
        forward: F,
        grid: impl Fn(&[&[usize]]) -> Grid + Send + Sync + 'static,
    ) -> Self {
        KernelOp {
            name,
            forward,
            grid: Arc::new(grid),
            outputs: Arc::new(|shapes: &[&[usize]], dtypes: &[DType]| {
                Ok(vec![(shapes[0].to_vec(), dtypes[0])])
            }),
            mixed_dtypes: false,
            backward: Backward::None,
            profiler: None,
        }
    }

    /// Backward through a kernel: `kernel` gets the forward inputs, the forward output and the
    /// output gradient (in that order) and writes one gradient per forward input, shaped like
    /// that input and of its dtype; `grid` is its launch grid as a function of the forward
    /// input shapes.
    pub fn backward<B: NkiKernel + Clone>(
        self,
        kernel: B,
        grid: impl Fn(&[&[usize]]) -> Grid + Send + Sync + 'static,
    ) -> KernelOp<F, B> {
        KernelOp {
            name: self.name,
            forward: self.forward,
            grid: self.grid,
            outputs: self.outputs,
            mixed_dtypes: self.mixed_dtypes,
            backward: Backward::Kernel {
                kernel,
                grid: Arc::new(grid),
            },
            profiler: self.profiler,
        }
    }
}

impl<F: NkiKernel + Clone, B: NkiKernel + Clone> KernelOp<F, B> {
    /// Sets the shape of the (one) output, of the first input's dtype; an error rejects the
    /// inputs (return candle's shape errors, e.g. `Error::UnexpectedShape`, so callers can
    /// match on them).
    pub fn output_shape(
        mut self,
        f: impl Fn(&[&[usize]]) -> candle_core::Result<Vec<usize>> + Send + Sync + 'static,
    ) -> Self {
        self.outputs = Arc::new(move |shapes: &[&[usize]], dtypes: &[DType]| {
            Ok(vec![(f(shapes)?, dtypes[0])])
        });
        self
    }

    /// Sets the outputs: `f(input shapes, input dtypes)` gives each output's shape and dtype
    /// (the kernel gets them zero-filled, in this order). An op with other than one output is
    /// applied with [`apply`](KernelOp::apply).
    pub fn outputs(
        mut self,
        f: impl Fn(&[&[usize]], &[DType]) -> candle_core::Result<Vec<(Vec<usize>, DType)>>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        self.outputs = Arc::new(f);
        self
    }

    /// Lets the inputs have different dtypes (the kernel checks them: see
    /// [`kernel!`](crate::kernel!)'s typed form). Without it, inputs of mixed dtypes are a
    /// `DTypeMismatchBinaryOp` error.
    pub fn mixed_dtypes(mut self) -> Self {
        self.mixed_dtypes = true;
        self
    }

    /// Backward without a kernel: every input's gradient is the output gradient itself (what
    /// an element-wise addition needs; NKI's custom-op guide returns `dy, dy`). Backpropagating
    /// into an input of another shape than the output is an error.
    pub fn backward_pass_through(mut self) -> Self {
        self.backward = Backward::PassThrough;
        self
    }

    /// Simulates every call (forward and backward) on `profiler`'s target and records its
    /// modelled latency and bottleneck there. Values are the same as without it.
    pub fn profiled(mut self, profiler: &Profiler) -> Self {
        self.profiler = Some(profiler.clone());
        self
    }

    /// The op's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Applies the op to one tensor.
    pub fn apply1(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        x.apply_op1(self.clone())
    }

    /// Applies the op to two tensors.
    pub fn apply2(&self, a: &Tensor, b: &Tensor) -> candle_core::Result<Tensor> {
        a.apply_op2(b, self.clone())
    }

    /// Applies the op to three tensors.
    pub fn apply3(&self, a: &Tensor, b: &Tensor, c: &Tensor) -> candle_core::Result<Tensor> {
        a.apply_op3(b, c, self.clone())
    }

    /// Applies the op to any number of CPU tensors and returns every output (in the order
    /// of [`outputs`](KernelOp::outputs)). The outputs are new leaf tensors: candle's custom
    /// ops have one output, so gradients do not flow back through this call (use
    /// [`apply2`](KernelOp::apply2) and friends for that).
    pub fn apply(&self, inputs: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let outs = with_cpu(self.name, inputs, |pairs| {
            self.run(
                self.name,
                &self.forward,
                self.grid.as_ref(),
                pairs,
                |s, d| self.output_specs(s, d),
            )
        })?;
        Ok(outs
            .into_iter()
            .map(|(storage, shape)| {
                Tensor::from_storage(Storage::Cpu(storage), shape, BackpropOp::none(), false)
            })
            .collect())
    }

    /// The launch of a kernel on `grid`, simulated on the profiler's target when profiling.
    /// The outputs are fresh allocations candle reads whole: an element the kernel leaves
    /// unwritten is an error, not a zero (on the device it would hold garbage).
    fn launch(&self, grid: Grid) -> Launch {
        let launch = Launch::new(grid).outputs_uninitialised();
        match &self.profiler {
            Some(p) => launch.target(p.target()).mode(Mode::Simulate),
            None => launch,
        }
    }

    /// The op's output shapes and dtypes for inputs of `shapes` and `dtypes`.
    fn output_specs(
        &self,
        shapes: &[&[usize]],
        dtypes: &[DType],
    ) -> candle_core::Result<Vec<(Vec<usize>, DType)>> {
        (self.outputs)(shapes, dtypes)
    }

    /// Runs `kernel` (on the grid `grid(input shapes)`) on `inputs` into outputs of the
    /// shapes and dtypes `outputs` gives, recording the profile under `stat` when profiling.
    /// Inputs are lent in place where their layout allows; outputs come back as candle
    /// storage with their shapes.
    fn run<K: NkiKernel>(
        &self,
        stat: &str,
        kernel: &K,
        grid: &GridFn,
        inputs: &[(&CpuStorage, &Layout)],
        outputs: impl FnOnce(&[&[usize]], &[DType]) -> candle_core::Result<Vec<(Vec<usize>, DType)>>,
    ) -> candle_core::Result<Vec<(CpuStorage, Shape)>> {
        let sources = inputs
            .iter()
            .map(|(s, l)| Source::new(self.name, s, l))
            .collect::<candle_core::Result<Vec<_>>>()?;
        let dtypes: Vec<DType> = sources.iter().map(Source::dtype).collect();
        if let Some(&other) = dtypes.iter().find(|d| **d != dtypes[0]) {
            if !self.mixed_dtypes {
                return Err(Error::DTypeMismatchBinaryOp {
                    lhs: dtypes[0],
                    rhs: other,
                    op: self.name,
                });
            }
        }
        let shapes: Vec<&[usize]> = sources.iter().map(Source::dims).collect();
        // The op's output and grid functions are the user's: a panic in one is an error of
        // the op naming the function, not a panic of the caller's graph.
        let user = |what: &str| format!("the {what} function of nki op `{}`", self.name);
        let specs = nki_core::call_user_closure(&user("output"), || outputs(&shapes, &dtypes))
            .map_err(|e| op_error(stat, e))??;
        let grid = nki_core::call_user_closure(&user("grid"), || grid(&shapes))
            .map_err(|e| op_error(stat, e))?;
        nki_core::with_borrowed(|lend| {
            let hbms = sources
                .iter()
                .map(|s| s.lend(self.name, lend))
                .collect::<candle_core::Result<Vec<_>>>()?;
            let mut outs = specs
                .iter()
                .map(|(shape, dtype)| storage::output(self.name, shape, *dtype))
                .collect::<candle_core::Result<Vec<_>>>()?;
            let report = kernel
                .launch(self.launch(grid), &hbms, &mut outs)
                .map_err(|e| op_error(stat, e))?;
            if let (Some(profiler), Some(profile)) = (&self.profiler, &report.profile) {
                profiler.record(stat, profile);
            }
            // Let the launch and the inputs go first: the outputs' buffers then move out.
            drop((report, hbms));
            outs.into_iter()
                .zip(&specs)
                .map(|(o, (shape, _))| {
                    let storage = storage::into_storage(stat, o)?;
                    Ok((storage, Shape::from_dims(shape)))
                })
                .collect()
        })
    }

    /// `cpu_fwd` of every arity: the op's one output.
    fn forward_cpu(
        &self,
        inputs: &[(&CpuStorage, &Layout)],
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let mut outs = self.run(
            self.name,
            &self.forward,
            self.grid.as_ref(),
            inputs,
            |s, d| {
                let specs = self.output_specs(s, d)?;
                if specs.len() != 1 {
                    return Err(Error::Msg(format!(
                        "nki op `{}` has {} outputs; a candle custom op has one: apply it with \
                     KernelOp::apply",
                        self.name,
                        specs.len()
                    )));
                }
                Ok(specs)
            },
        )?;
        Ok(outs.remove(0))
    }

    /// `bwd` of every arity: one gradient per input.
    fn backward_grads(
        &self,
        args: &[&Tensor],
        res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<Vec<Option<Tensor>>> {
        match &self.backward {
            Backward::None => Err(Error::BackwardNotSupported { op: self.name }),
            Backward::PassThrough => args
                .iter()
                .map(|a| {
                    if a.dims() == grad.dims() {
                        return Ok(Some(grad.clone()));
                    }
                    Err(Error::UnexpectedShape {
                        msg: format!(
                            "nki op `{}`: the pass-through backward needs inputs shaped like \
                             the output gradient",
                            self.name
                        ),
                        expected: grad.shape().clone(),
                        got: a.shape().clone(),
                    })
                })
                .collect(),
            Backward::Kernel { kernel, grid } => {
                let stat = format!("{}.bwd", self.name);
                let tensors: Vec<&Tensor> = args.iter().copied().chain([res, grad]).collect();
                let arg_dtypes: Vec<DType> = args.iter().map(|t| t.dtype()).collect();
                let grads = with_cpu(self.name, &tensors, |pairs| {
                    self.run(&stat, kernel, grid.as_ref(), pairs, |s, _| {
                        Ok(s[..args.len()]
                            .iter()
                            .zip(&arg_dtypes)
                            .map(|(s, d)| (s.to_vec(), *d))
                            .collect())
                    })
                })?;
                Ok(grads
                    .into_iter()
                    .map(|(storage, shape)| {
                        Some(Tensor::from_storage(
                            Storage::Cpu(storage),
                            shape,
                            BackpropOp::none(),
                            false,
                        ))
                    })
                    .collect())
            }
        }
    }
}

/// Runs `f` on the CPU storages and layouts of `tensors`; a tensor on another device is an
/// error of op `op`.
fn with_cpu<R>(
    op: &'static str,
    tensors: &[&Tensor],
    f: impl FnOnce(&[(&CpuStorage, &Layout)]) -> candle_core::Result<R>,
) -> candle_core::Result<R> {
    let guards: Vec<_> = tensors.iter().map(|t| t.storage_and_layout()).collect();
    let mut pairs = Vec::with_capacity(guards.len());
    for ((storage, layout), t) in guards.iter().zip(tensors) {
        match &**storage {
            Storage::Cpu(cpu) => pairs.push((cpu, *layout)),
            _ => {
                return Err(Error::DeviceMismatchBinaryOp {
                    lhs: Device::Cpu.location(),
                    rhs: t.device().location(),
                    op,
                })
            }
        }
    }
    f(&pairs)
}

impl<F: NkiKernel + Clone, B: NkiKernel + Clone> CustomOp1 for KernelOp<F, B> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        self.forward_cpu(&[(s, l)])
    }

    fn bwd(
        &self,
        arg: &Tensor,
        res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<Option<Tensor>> {
        let [g] = <[Option<Tensor>; 1]>::try_from(self.backward_grads(&[arg], res, grad)?)
            .expect("one gradient per input");
        Ok(g)
    }
}

impl<F: NkiKernel + Clone, B: NkiKernel + Clone> CustomOp2 for KernelOp<F, B> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        self.forward_cpu(&[(s1, l1), (s2, l2)])
    }

    fn bwd(
        &self,
        a: &Tensor,
        b: &Tensor,
        res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let [ga, gb] = <[Option<Tensor>; 2]>::try_from(self.backward_grads(&[a, b], res, grad)?)
            .expect("one gradient per input");
        Ok((ga, gb))
    }
}

impl<F: NkiKernel + Clone, B: NkiKernel + Clone> CustomOp3 for KernelOp<F, B> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        self.forward_cpu(&[(s1, l1), (s2, l2), (s3, l3)])
    }

    fn bwd(
        &self,
        a: &Tensor,
        b: &Tensor,
        c: &Tensor,
        res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let grads = self.backward_grads(&[a, b, c], res, grad)?;
        let [ga, gb, gc] = <[Option<Tensor>; 3]>::try_from(grads).expect("one gradient per input");
        Ok((ga, gb, gc))
    }
}
