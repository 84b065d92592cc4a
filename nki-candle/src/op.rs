//! [`KernelOp`]: an nki-rs kernel as a candle custom op (`CustomOp1/2/3`), with an optional
//! backward for autograd.

use crate::error::op_error;
use crate::kernel::{NkiKernel, NoKernel};
use crate::profile::Profiler;
use crate::storage::{self, to_hbm, with_element, BridgeElement};
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, CustomOp3, Layout, Shape, Tensor};
use nki_core::prelude::*;
use std::sync::Arc;

/// The launch grid of a kernel as a function of its input tensors' shapes.
pub type GridFn = dyn Fn(&[&[usize]]) -> Grid + Send + Sync;

/// The output shape as a function of the input shapes, or a message saying why the inputs do
/// not fit the kernel.
pub type OutputShapeFn = dyn Fn(&[&[usize]]) -> Result<Vec<usize>, String> + Send + Sync;

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
/// shapes; [`output_shape`](KernelOp::output_shape) says what the output is (default: the first
/// input's shape; the dtype is always the inputs' dtype). A backward —
/// [`backward_pass_through`](KernelOp::backward_pass_through) or a
/// [`backward`](KernelOp::backward) kernel — makes the op differentiable, so `Var`s upstream
/// get gradients from `backward()`. [`profiled`](KernelOp::profiled) turns on modelled device
/// time.
///
/// Apply it with [`apply1`](KernelOp::apply1), [`apply2`](KernelOp::apply2) or
/// [`apply3`](KernelOp::apply3) (or candle's own `Tensor::apply_op2(…, op.clone())`). Inputs
/// must be CPU tensors of one dtype among f32, bf16 and f16, of rank 1 to 5; anything else, a
/// shape the output function rejects, or a kernel error (out-of-bounds tile, SBUF overflow, …)
/// is a `candle_core::Error` whose message names the op and carries nki-rs's message.
pub struct KernelOp<F, B = NoKernel> {
    name: &'static str,
    forward: F,
    grid: Arc<GridFn>,
    output: Arc<OutputShapeFn>,
    backward: Backward<B>,
    profiler: Option<Profiler>,
}

impl<F: Clone, B: Clone> Clone for KernelOp<F, B> {
    fn clone(&self) -> Self {
        KernelOp {
            name: self.name,
            forward: self.forward.clone(),
            grid: self.grid.clone(),
            output: self.output.clone(),
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
            output: Arc::new(|shapes: &[&[usize]]| Ok(shapes[0].to_vec())),
            backward: Backward::None,
            profiler: None,
        }
    }

    /// Backward through a kernel: `kernel` gets the forward inputs, the forward output and the
    /// output gradient (in that order) and writes one gradient per forward input, shaped like
    /// that input; `grid` is its launch grid as a function of the forward input shapes.
    pub fn backward<B: NkiKernel + Clone>(
        self,
        kernel: B,
        grid: impl Fn(&[&[usize]]) -> Grid + Send + Sync + 'static,
    ) -> KernelOp<F, B> {
        KernelOp {
            name: self.name,
            forward: self.forward,
            grid: self.grid,
            output: self.output,
            backward: Backward::Kernel {
                kernel,
                grid: Arc::new(grid),
            },
            profiler: self.profiler,
        }
    }
}

impl<F: NkiKernel + Clone, B: NkiKernel + Clone> KernelOp<F, B> {
    /// Sets the output shape function; returning `Err(message)` rejects the inputs with that
    /// message.
    pub fn output_shape(
        mut self,
        f: impl Fn(&[&[usize]]) -> Result<Vec<usize>, String> + Send + Sync + 'static,
    ) -> Self {
        self.output = Arc::new(f);
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

    /// The launch of a kernel on `grid`, simulated on the profiler's target when profiling.
    fn launch(&self, grid: Grid) -> Launch {
        match &self.profiler {
            Some(p) => Launch::new(grid).target(p.target()).mode(Mode::Simulate),
            None => Launch::new(grid),
        }
    }

    /// Runs `kernel` on `inputs` into zero-filled outputs of `out_shapes`, recording the
    /// profile under `stat` when profiling.
    fn run<K: NkiKernel, T: BridgeElement>(
        &self,
        stat: &str,
        kernel: &K,
        grid: Grid,
        inputs: &[Hbm<T>],
        out_shapes: &[&[usize]],
    ) -> candle_core::Result<Vec<Hbm<T>>> {
        let mut outputs = out_shapes
            .iter()
            .map(|s| Hbm::<T>::zeros_dyn(s))
            .collect::<Result<Vec<_>, NkiError>>()
            .map_err(|e| op_error(stat, format!("output: {e}")))?;
        let refs: Vec<&Hbm<T>> = inputs.iter().collect();
        let report = kernel
            .launch(self.launch(grid), &refs, &mut outputs)
            .map_err(|e| op_error(stat, e))?;
        if let (Some(profiler), Some(profile)) = (&self.profiler, &report.profile) {
            profiler.record(stat, profile);
        }
        Ok(outputs)
    }

    /// `cpu_fwd` of every arity.
    fn forward_cpu(
        &self,
        inputs: &[(&CpuStorage, &Layout)],
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        with_element!(self.name, inputs[0].0.dtype(), T => self.forward_typed::<T>(inputs))
    }

    fn forward_typed<T: BridgeElement>(
        &self,
        inputs: &[(&CpuStorage, &Layout)],
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let hbms = inputs
            .iter()
            .enumerate()
            .map(|(i, (s, l))| to_hbm::<T>(self.name, i, s, l))
            .collect::<candle_core::Result<Vec<_>>>()?;
        let shapes: Vec<&[usize]> = inputs.iter().map(|(_, l)| l.dims()).collect();
        let out_shape = (self.output)(&shapes).map_err(|m| op_error(self.name, m))?;
        let grid = (self.grid)(&shapes);
        let out = self.run(self.name, &self.forward, grid, &hbms, &[&out_shape])?;
        let storage = storage::to_storage(self.name, &out[0])?;
        Ok((storage, Shape::from_dims(&out_shape)))
    }

    /// `bwd` of every arity: one gradient per input.
    fn backward_grads(
        &self,
        args: &[&Tensor],
        res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<Vec<Option<Tensor>>> {
        match &self.backward {
            Backward::None => Err(candle_core::Error::BackwardNotSupported { op: self.name }),
            Backward::PassThrough => args
                .iter()
                .map(|a| {
                    if a.dims() == grad.dims() {
                        return Ok(Some(grad.clone()));
                    }
                    let message = format!(
                        "the pass-through backward needs inputs shaped like the output gradient \
                         {:?}, got {:?}",
                        grad.dims(),
                        a.dims()
                    );
                    Err(op_error(self.name, message))
                })
                .collect(),
            Backward::Kernel { kernel, grid } => {
                with_element!(self.name, grad.dtype(), T => {
                    self.backward_typed::<T, B>(kernel, grid.as_ref(), args, res, grad)
                })
            }
        }
    }

    fn backward_typed<T: BridgeElement, K: NkiKernel>(
        &self,
        kernel: &K,
        grid: &GridFn,
        args: &[&Tensor],
        res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<Vec<Option<Tensor>>> {
        let stat = format!("{}.bwd", self.name);
        let tensors = args.iter().copied().chain([res, grad]);
        let hbms = tensors
            .enumerate()
            .map(|(i, t)| storage::tensor_to_hbm::<T>(&stat, i, t))
            .collect::<candle_core::Result<Vec<_>>>()?;
        let shapes: Vec<&[usize]> = args.iter().map(|t| t.dims()).collect();
        let grads = self.run(&stat, kernel, grid(&shapes), &hbms, &shapes)?;
        grads
            .iter()
            .zip(&shapes)
            .map(|(g, s)| {
                let values = g.to_vec().map_err(|e| op_error(&stat, e))?;
                Tensor::from_vec(values, *s, grad.device()).map(Some)
            })
            .collect()
    }
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
