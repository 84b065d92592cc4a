//! SPMD launch: grids of 1 to 3 dimensions, `spmd_dim`/`nc` placement of instances on logical
//! NeuronCores, and the launcher that runs the instances on every host core (each thread a
//! contiguous share of the launch order, whatever their NeuronCore), collects each core's
//! instruction records in program-id order and turns the failure of the lowest program id into
//! an `Err`.

use crate::abort;
use crate::builder::setters;
use crate::context::{InstanceCtx, LaunchShared, Mode};
pub use crate::dialect::Dialect;
use crate::error::{ErrorKind, NkiError, Result, SourceLoc};
use crate::isa::lnc_state::Link;
use crate::lang::loop_state::Loops;
use crate::memory::MemoryPeak;
use crate::profile::Profile;
use crate::target::Target;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// Most physical NeuronCores `nc(k)` can spread a grid over: one logical core of LNC=2.
pub const MAX_LOGICAL_CORES: usize = 2;

/// A factor of a grid dimension: a plain count, or `nc(k)` (k logical NeuronCores).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Factor {
    /// A plain count of instances.
    Count(usize),
    /// `nl.nc(k)`: instances along this factor go to k different NeuronCores.
    Nc(usize),
}

impl Factor {
    fn size(self) -> usize {
        match self {
            Factor::Count(n) | Factor::Nc(n) => n,
        }
    }
}

impl From<usize> for Factor {
    fn from(n: usize) -> Factor {
        Factor::Count(n)
    }
}

/// NKI's `nl.nc(k)`: a logical NeuronCore dimension of size k.
pub fn nc(k: usize) -> Factor {
    Factor::Nc(k)
}

/// One dimension of a launch grid: `outer * inner` instances, with program id
/// `i_outer * inner + i_inner` (NKI's `spmd_dim(outer, inner)`; a plain size is `spmd_dim(n, 1)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GridDim {
    /// Outer factor.
    pub outer: Factor,
    /// Inner factor.
    pub inner: Factor,
}

impl GridDim {
    /// Number of instances along this dimension (`usize::MAX` when the product overflows,
    /// which a launch rejects).
    pub fn size(&self) -> usize {
        self.checked_size().unwrap_or(usize::MAX)
    }

    fn checked_size(&self) -> Option<usize> {
        self.outer.size().checked_mul(self.inner.size())
    }
}

/// NKI's `nl.spmd_dim(a, b)`: a grid dimension of size `a * b`, with either factor possibly
/// `nc(k)`. `spmd_dim(grid, nc(2))` puts even ids on core 0 and odd on core 1;
/// `spmd_dim(nc(2), k)` puts the first k on core 0.
pub fn spmd_dim(a: impl Into<Factor>, b: impl Into<Factor>) -> GridDim {
    GridDim {
        outer: a.into(),
        inner: b.into(),
    }
}

impl From<usize> for GridDim {
    fn from(n: usize) -> GridDim {
        spmd_dim(n, 1)
    }
}

impl From<Factor> for GridDim {
    fn from(f: Factor) -> GridDim {
        spmd_dim(f, 1)
    }
}

/// The launch grid a kernel of `dialect` means: an NKI 0.7 kernel's `grid` means: `[k]` or `[nc(k)]` with `k` 1 or 2
/// is [`Grid::lnc`]`(k)`; anything else is an [`ErrorKind::InvalidGrid`] error. A Beta 1
/// grid is taken as it is.
fn resolve(dialect: Dialect, grid: &Grid) -> Result<Grid> {
    if !dialect.grid_is_lnc_degree() {
        return Ok(grid.clone());
    }
    let degree = match grid.dims.as_slice() {
        [GridDim {
            outer: Factor::Count(k) | Factor::Nc(k),
            inner: Factor::Count(1),
        }] => Some(*k),
        _ => None,
    };
    match degree {
        Some(k @ 1..=MAX_LOGICAL_CORES) => Ok(Grid::lnc(k)),
        _ => Err(NkiError::new(
            ErrorKind::InvalidGrid,
            "launch",
            format!(
                "grid {grid} for an {name} kernel: {name} has no SPMD grid, such a kernel \
                 launches as kernel[1] or kernel[2] (the logical NeuronCore's degree, LNC=2 \
                 runs it once per physical core with nl::program_id(0) the core index); \
                 split work across instances with a loop over nl::program_id(0) and \
                 nl::num_programs(0), or write the kernel as #[nki_kernel] (Beta 1) to \
                 launch it on a grid",
                name = dialect.name()
            ),
        )),
    }
}

/// A launch grid of 1 to 3 dimensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grid {
    dims: Vec<GridDim>,
}

impl Grid {
    /// A grid from its dimensions (plain sizes, `nc(k)` or `spmd_dim(..)`).
    pub fn new<D: Into<GridDim>, const N: usize>(dims: [D; N]) -> Grid {
        Grid {
            dims: dims.into_iter().map(Into::into).collect(),
        }
    }

    /// The grid of a logical NeuronCore of `k` physical cores (NKI 0.7 `kernel[k]`, `k` 1 or
    /// 2): one instance per physical core, `nl::program_id(0)` the core index. It is Beta 1's
    /// `[nc(k)]`; with `k = 2` the two instances run side by side (each on its own host thread)
    /// and may exchange tiles with [`nisa::sendrecv`](crate::isa::sendrecv) and wait for each
    /// other with [`nisa::core_barrier`](crate::isa::core_barrier).
    pub fn lnc(k: usize) -> Grid {
        Grid::new([nc(k)])
    }

    /// `k` for a one-dimensional grid `[k]` of plain instances on one NeuronCore (no `nc`):
    /// the grid an NKI 0.7 kernel would read as a logical NeuronCore of `k` cores.
    pub(crate) fn plain_1d(&self) -> Option<usize> {
        match self.dims.as_slice() {
            [GridDim {
                outer: Factor::Count(k),
                inner: Factor::Count(1),
            }] => Some(*k),
            _ => None,
        }
    }

    /// True for the grid of a logical NeuronCore of two physical cores (one instance on each).
    pub fn is_lnc2(&self) -> bool {
        self.num_instances() == 2 && self.num_cores() == 2
    }

    /// A grid from a list of dimensions.
    pub fn from_dims(dims: Vec<GridDim>) -> Grid {
        Grid { dims }
    }

    /// The size of each dimension.
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().map(GridDim::size).collect()
    }

    /// Number of logical NeuronCores the grid asks for (1 without `nc`).
    pub fn num_cores(&self) -> usize {
        self.dims
            .iter()
            .flat_map(|d| [d.outer, d.inner])
            .map(|f| match f {
                Factor::Nc(k) => k,
                Factor::Count(_) => 1,
            })
            .product()
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(NkiError::new(ErrorKind::InvalidGrid, "launch", m));
        if self.dims.is_empty() || self.dims.len() > 3 {
            return bad(format!(
                "a launch grid has 1 to 3 dimensions, got {}",
                self.dims.len()
            ));
        }
        let mut factors = self.dims.iter().flat_map(|d| [d.outer, d.inner]);
        if factors.clone().any(|f| f.size() == 0) {
            return bad(format!("grid {self} has an empty dimension"));
        }
        let total = factors.try_fold(1usize, |n, f| n.checked_mul(f.size()));
        if total.is_none() {
            return bad(format!(
                "grid {self}: the instance count overflows (more than {} instances)",
                usize::MAX
            ));
        }
        let ncs = self
            .dims
            .iter()
            .flat_map(|d| [d.outer, d.inner])
            .filter(|f| matches!(f, Factor::Nc(_)))
            .count();
        if ncs > 1 {
            return bad(format!("grid {self} uses nc() more than once"));
        }
        let cores = self.num_cores();
        if cores > MAX_LOGICAL_CORES {
            return bad(format!(
                "grid {self} asks for nc({cores}); a logical NeuronCore (LNC=2) has at most {MAX_LOGICAL_CORES} physical cores"
            ));
        }
        Ok(())
    }

    /// Number of program instances (the product of the dimension sizes). Only meaningful for
    /// a grid that validated: then it fits in a `usize`.
    pub fn num_instances(&self) -> usize {
        self.dims.iter().map(GridDim::size).product()
    }

    /// The `linear`-th instance in launch (row-major) order: its program id and NeuronCore.
    pub fn instance(&self, linear: usize) -> (Vec<usize>, usize) {
        let mut pid = vec![0usize; self.dims.len()];
        let mut rest = linear;
        for (d, p) in self.dims.iter().zip(pid.iter_mut()).rev() {
            *p = rest % d.size();
            rest /= d.size();
        }
        let mut core = 0;
        for (d, &i) in self.dims.iter().zip(&pid) {
            let inner = d.inner.size();
            if let Factor::Nc(_) = d.outer {
                core = i / inner;
            }
            if let Factor::Nc(_) = d.inner {
                core = i % inner;
            }
        }
        (pid, core)
    }

    /// Every instance: (program id, NeuronCore), in launch order.
    pub fn instances(&self) -> Vec<(Vec<usize>, usize)> {
        (0..self.num_instances())
            .map(|i| self.instance(i))
            .collect()
    }
}

impl fmt::Display for Grid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fac = |x: Factor| match x {
            Factor::Count(n) => n.to_string(),
            Factor::Nc(k) => format!("nc({k})"),
        };
        write!(f, "[")?;
        for (i, d) in self.dims.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            match d.inner {
                Factor::Count(1) => write!(f, "{}", fac(d.outer))?,
                _ => write!(f, "spmd_dim({}, {})", fac(d.outer), fac(d.inner))?,
            }
        }
        write!(f, "]")
    }
}

impl<D: Into<GridDim>, const N: usize> From<[D; N]> for Grid {
    fn from(d: [D; N]) -> Grid {
        Grid::new(d)
    }
}

impl From<usize> for Grid {
    fn from(n: usize) -> Grid {
        Grid::new([n])
    }
}

/// Where and in which order one instance ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceInfo {
    /// Program id.
    pub program_id: Vec<usize>,
    /// Logical NeuronCore it ran on.
    pub nc: usize,
    /// Position in its core's run order.
    pub order: usize,
}

/// The outcome of a successful launch.
#[derive(Debug)]
pub struct LaunchReport {
    /// The grid launched.
    pub grid: Grid,
    /// The target checked and modelled against.
    pub target: Target,
    /// The launch mode.
    pub mode: Mode,
    /// The dialect of the kernel launched (what `grid` was read as).
    pub dialect: Dialect,
    /// What the compiler was asked to do (the launch's, else the kernel's, else the
    /// dialect's default: [`Launch::effective_compile_config`]).
    pub compile_config: crate::compiler::config::CompileConfig,
    /// Every instance with its core, in grid order.
    pub instances: Vec<InstanceInfo>,
    /// Peak on-chip usage over all instances.
    pub memory: MemoryPeak,
    /// The modelled timeline (simulate and estimate modes).
    pub profile: Option<Profile>,
}

pub use crate::record::CoreStream;

/// Fails the calling kernel instance, when there is one, with an [`ErrorKind::NestedLaunch`]
/// error of `op` at `loc`: `what()` names the launch refused (NKI rejects nested launches).
pub(crate) fn refuse_nested_launch(
    op: &'static str,
    what: impl FnOnce() -> String,
    loc: SourceLoc,
) {
    if crate::context::in_kernel() {
        crate::context::raise(
            NkiError::new(
                ErrorKind::NestedLaunch,
                op,
                format!(
                    "{} inside a kernel: NKI rejects nested launches; launch kernels from host code",
                    what()
                ),
            ),
            loc,
        );
    }
}

/// A launch under construction: grid, target and mode (the builder form of `launch!`).
#[derive(Clone, Debug)]
pub struct Launch {
    grid: Grid,
    target: Target,
    mode: Mode,
    /// The kernel's dialect (set by the kernel's `run` from its `#[nki_kernel]` attribute).
    dialect: Dialect,
    host_threads: Option<usize>,
    /// Estimate mode: the trip counts of device loops whose bounds have no value.
    trip_counts: Option<std::sync::Arc<crate::lang::TripCounts>>,
    /// Whether every element of the outputs must be written (see
    /// [`Launch::outputs_uninitialised`]).
    uninitialised_outputs: bool,
    /// Whether an estimate's profile keeps its records (see [`Launch::keep_records`]).
    keep_records: bool,
    /// The most instruction records an instance may keep (see [`Launch::max_records`]).
    max_records: usize,
    /// The most iterations of one device loop run (see [`Launch::max_loop_iterations`]).
    max_loop_iterations: u64,
    /// The `compiler` stage's transformations (see [`Launch::compiler`]).
    compiler: crate::compiler::stage::CompilerStage,
    /// The compile configuration set on the launch (see [`Launch::compile_config`]).
    config: Option<crate::compiler::config::CompileConfig>,
    /// The kernel's own compile configuration (`#[nki_kernel(compile_config = ..)]`).
    kernel_config: Option<crate::compiler::config::CompileConfig>,
    /// Where the user launched the kernel when a launcher closure stands between that call and
    /// [`Launch::run`] (see `launcher`): errors of the launch itself point there.
    pub(crate) called_at: Option<crate::error::SourceLoc>,
    /// Where an emit launch traces the kernel's calls ([`crate::emit`]).
    pub(crate) emit: Option<std::sync::Arc<crate::emit::trace::Sink>>,
}

impl Launch {
    /// A launch of `grid` in execute mode on the default target (trn2).
    pub fn new(grid: impl Into<Grid>) -> Launch {
        Launch {
            grid: grid.into(),
            target: Target::default(),
            mode: Mode::Execute,
            dialect: Dialect::Beta1,
            host_threads: None,
            trip_counts: None,
            uninitialised_outputs: false,
            keep_records: false,
            max_records: crate::record::DEFAULT_MAX_RECORDS,
            max_loop_iterations: crate::lang::MAX_DEVICE_LOOP_ITERATIONS,
            compiler: crate::compiler::stage::current(),
            config: crate::compiler::config::current(),
            kernel_config: None,
            called_at: None,
            emit: None,
        }
    }

    setters! {
        /// The transformations the `compiler` stage applies to the recorded program of a Beta-1
        /// kernel before it is costed (simulate and estimate modes; an NKI 0.7 kernel is costed
        /// as written): duplicate-load removal, hoisting of
        /// loop-invariant loads and transposes out of `affine_range` loops, one buffer per
        /// iteration for tiles every iteration rewrites, PSUM zero fills folded into the first
        /// matmul. The default is the stage of
        /// [`with_compiler_stage`](crate::with_compiler_stage), [`CompilerStage::BETA1`] unless
        /// set: the program as the compiler runs it. [`CompilerStage::OFF`], or
        /// [`CompileConfig::as_written`](crate::compiler::config::CompileConfig::as_written) on
        /// the launch, costs the kernel exactly as written. The profile lists what the stage did
        /// ([`Profile::compiler`]).
        ///
        /// [`CompilerStage::OFF`]: crate::CompilerStage::OFF
        /// [`CompilerStage::BETA1`]: crate::CompilerStage::BETA1
        compiler(stage: crate::compiler::stage::CompilerStage) => compiler = stage;
        /// What the compiler is asked to do (NKI 0.8 `CompileConfig`: allocation, address
        /// rotation, scheduling heuristic, transformations), for simulate and estimate modes.
        /// It overrides the kernel's own (`#[nki_kernel(compile_config = ..)]`); without
        /// either, the compiler's default for the kernel's dialect
        /// ([`CompileConfig::for_dialect`](crate::CompileConfig::for_dialect)).
        compile_config(c: crate::compiler::config::CompileConfig) => config = Some(c);
        /// The kernel's own compile configuration (`#[nki_kernel(compile_config = ..)]`, set
        /// by the kernel's `run`): used when the launch sets none
        /// ([`Launch::compile_config`]).
        kernel_compile_config(c: crate::compiler::config::CompileConfig) => kernel_config = Some(c);
        /// Sets the target.
        target(t: Target) => target = t;
        /// Sets the mode.
        mode(m: Mode) => mode = m;
        /// Sets the dialect the kernel is written in (default [`Dialect::Beta1`]); it decides what
        /// the grid means. A `#[nki_kernel]`'s `run` sets its own kernel's dialect, so this matters
        /// only for closures run with [`Launch::run`].
        dialect(d: Dialect) => dialect = d;
    }

    /// The dialect the launched kernel is written in (see [`Launch::dialect`]).
    pub fn kernel_dialect(&self) -> Dialect {
        self.dialect
    }

    /// The compile configuration the launch runs with: the launch's
    /// ([`Launch::compile_config`]), else the kernel's, else its dialect's default.
    pub fn effective_compile_config(&self) -> crate::compiler::config::CompileConfig {
        self.config
            .or(self.kernel_config)
            .unwrap_or_else(|| crate::compiler::config::CompileConfig::for_dialect(self.dialect))
    }

    setters! {
        /// The trip counts of the kernel's device loops (`nl::fori_loop`, `nl::while_loop`) for
        /// estimate mode, where bounds and conditions read from tiles have no value (execute and
        /// simulate modes run the loops on the values and ignore them).
        trip_counts(trips: crate::lang::TripCounts) =>
            trip_counts = Some(std::sync::Arc::new(trips));
        /// Runs the program instances on at most `n` host threads (default: one per host CPU, see
        /// [`host_threads`]). Only host speed changes: values, records, the modelled placement on
        /// NeuronCores and the reported errors are the same for every `n`. `n = 0` is an
        /// [`ErrorKind::InvalidArgument`] error of the launch.
        host_threads(n: usize) => host_threads = Some(n);
        /// Treats the outputs (`&mut Hbm` parameters) as freshly allocated device memory, as a
        /// framework's output allocation is (the candle bridge launches so): an element the launch
        /// leaves unwritten is an [`ErrorKind::OutputNotWritten`] error naming it, where by default
        /// it keeps the value the host gave it (the seeds' form: outputs are tensors the caller
        /// owns, and writing part of one is allowed).
        outputs_uninitialised() => uninitialised_outputs = true;
        /// Keeps the instruction records of an estimate in its profile, for the instruction
        /// dump ([`Profile::ir`](crate::Profile::ir), [`Profile::write_ir`](crate::Profile::write_ir)).
        /// Simulate launches always keep them; estimates drop them by default (a sweep of many
        /// estimates would hold every launch's records).
        keep_records() => keep_records = true;
        /// The most instruction records one program instance may keep in simulate and estimate
        /// modes (default [`DEFAULT_MAX_RECORDS`](crate::DEFAULT_MAX_RECORDS)): the record past
        /// it fails the instance with an [`ErrorKind::Budget`] error naming the device loop
        /// running and its line (or the last instruction's line), before the host's memory runs
        /// out. Execute mode keeps no records.
        max_records(n: usize) => max_records = n;
        /// The most iterations one run of a device loop (`nl::fori_loop`, `nl::while_loop`) may
        /// take, in every mode (default [`MAX_DEVICE_LOOP_ITERATIONS`](crate::nl::MAX_DEVICE_LOOP_ITERATIONS)):
        /// the next fails the instance with an [`ErrorKind::Budget`] error naming the loop and
        /// its line.
        max_loop_iterations(n: u64) => max_loop_iterations = n;
    }

    /// Runs `kernel` once per program instance and returns the report (with a profile in
    /// simulate and estimate modes).
    ///
    /// The instances run on the host threads whatever NeuronCore they are placed on: each
    /// thread takes its own contiguous share of the launch order, in order, then helps with
    /// the shares of the others (see `Handout`); the model keeps NKI's placement (each core's
    /// records are its instances' streams in program-id order). When instances fail, the one
    /// with the lowest linear program id is reported, whatever the host order: a failure
    /// cancels only the instances after it in launch order, so every instance before it
    /// still runs.
    ///
    /// Called from inside a kernel body, it launches nothing and fails the calling instance
    /// with an [`ErrorKind::NestedLaunch`] error at the caller's line (NKI rejects nested
    /// launches).
    #[track_caller]
    pub fn run<F: Fn() + Sync>(&self, kernel: F) -> Result<LaunchReport> {
        let here = crate::error::SourceLoc::caller();
        let what = || format!("a kernel launch (grid {})", self.grid);
        refuse_nested_launch("launch", what, self.called_at.unwrap_or(here));
        // The outputs borrowed for this launch belong to it even when it is refused below: a
        // refused launch must not hand them to the next launch on this thread.
        let outputs = crate::hbm::take_pending_outputs();
        // An error of the launch itself (its grid, an output left unwritten) points at the
        // user's launch; one inside the kernel keeps its own line.
        let at = self.called_at.unwrap_or(here);
        match self.dialect {
            Dialect::Beta1 => self.run_on(outputs, kernel),
            Dialect::Nki07 | Dialect::Nki08 => match resolve(self.dialect, &self.grid) {
                Ok(grid) => Launch {
                    grid,
                    ..self.clone()
                }
                .run_on(outputs, kernel),
                Err(e) => Err(e),
            },
        }
        .map_err(|e| e.with_loc(at))
    }

    /// [`Launch::run`] once the launch is known to be no nested launch and its grid is the one
    /// the kernel's dialect means: runs the instances, whose outputs are `outputs`, and hands
    /// their records over to the pipeline (compiler, allocation, schedule, profile).
    fn run_on<F: Fn() + Sync>(
        &self,
        outputs: Vec<std::sync::Arc<crate::hbm::HbmStorage>>,
        kernel: F,
    ) -> Result<LaunchReport> {
        self.grid.validate()?;
        let threads = self.threads()?;
        abort::quiet_kernel_unwinds();
        let total = self.grid.num_instances();
        let mut load = HostLoad::enter(threads.min(total));
        let feed = Mutex::new(self.record_feed(total, &mut load));
        let shared = LaunchShared::with_outputs(outputs);
        // LNC=2: both cores' instances at once, each on its own thread (they may wait for
        // each other at sendrecv / core_barrier).
        let pair = self.grid.is_lnc2().then(crate::isa::lnc_state::Pair::new);
        let mut finished = match &pair {
            Some(pair) => self.run_pair(pair, &shared, &kernel)?,
            None => self.run_shares(threads.min(total), &feed, &shared, &kernel),
        };
        if let Some(e) = shared.cancelled.take_first() {
            return Err(e);
        }
        finished.sort_unstable_by_key(|p| p.index);
        check_outputs(&shared, self.uninitialised_outputs, self.mode)?;
        let instances = self.instance_infos(&finished);
        let config = self.effective_compile_config();
        let plan = crate::pipeline::Plan {
            target: self.target,
            dialect: self.dialect,
            stage: self.stage_of(config),
            config,
            models: self.mode.records(),
            cores: self.grid.num_cores(),
            keep_records: self.mode == Mode::Simulate || self.keep_records,
            pair: pair.as_ref().map(|p| p.edges()),
        };
        let programs = finished.into_iter().map(|f| f.program).collect();
        let (memory, profile) = crate::pipeline::run(&plan, programs)?;
        Ok(LaunchReport {
            grid: self.grid.clone(),
            target: self.target,
            mode: self.mode,
            dialect: self.dialect,
            compile_config: plan.config,
            instances,
            memory,
            profile,
        })
    }

    /// Runs the instances on `threads` host threads, each taking instances from its share
    /// of the launch order, then from the others, until none is left, a failure cancels the
    /// rest or its own instance fails (failures are reported to `shared.cancelled`); returns
    /// those that ran to their end.
    fn run_shares<F: Fn() + Sync>(
        &self,
        threads: usize,
        feed: &Mutex<Option<crate::timing::RecordFeed>>,
        shared: &std::sync::Arc<LaunchShared>,
        kernel: &F,
    ) -> Vec<Finished> {
        let grid_shape = self.grid.shape();
        // A Beta-1 kernel on a grid `[k]`, k >= 2: its NKI 0.7 calls are a dialect mistake.
        let beta1_grid_of_07 = match (self.dialect, self.grid.plain_1d()) {
            (Dialect::Beta1, Some(k)) if k >= 2 => Some(k),
            _ => None,
        };
        let handout = Handout::new(self.grid.num_instances(), threads);
        let worker = || {
            let mut done = Vec::new();
            let share = handout.join();
            while let Some(i) = handout.next(share, |i| shared.cancelled.cancels(i as u64)) {
                let index = i as u64;
                let (pid, core) = self.grid.instance(i);
                let mut ctx = InstanceCtx::new(
                    pid,
                    grid_shape.clone(),
                    index,
                    core,
                    self.mode,
                    self.target,
                    shared.clone(),
                );
                ctx.feed = feed.lock().unwrap_or_else(|p| p.into_inner()).take();
                ctx.state.get::<Loops>().trips = self.trip_counts.clone();
                self.configure(&mut ctx);
                ctx.beta1_grid_of_07 = beta1_grid_of_07;
                if self.compiler.fuse || self.compiler.hoist_compute {
                    // The stage may keep tiles the kernel dropped: the capacity resolution
                    // then needs them all.
                    ctx.mem.all = Some(Vec::new());
                }
                match crate::context::run_instance(ctx, kernel) {
                    (ctx, Ok(())) => done.push(Finished::of(index, ctx)),
                    (_, Err(_)) => break,
                }
            }
            done
        };
        on_host_threads(threads, worker)
    }

    /// Where and in which order each of the `finished` instances (in launch order) ran.
    fn instance_infos(&self, finished: &[Finished]) -> Vec<InstanceInfo> {
        let mut order = vec![0usize; self.grid.num_cores()];
        finished
            .iter()
            .map(|f| {
                let nc = f.program.core;
                order[nc] += 1;
                InstanceInfo {
                    program_id: f.program.pid.clone(),
                    nc,
                    order: order[nc] - 1,
                }
            })
            .collect()
    }

    /// Runs the two instances of an LNC=2 launch side by side, each on its own host thread
    /// (they meet at `pair`); returns those that ran to their end.
    /// Hands an instance's context what the launch decides for every instance: the estimate
    /// trip counts, the kernel's dialect and the budgets of records and loop iterations.
    fn configure(&self, ctx: &mut InstanceCtx) {
        let loops = ctx.state.get::<Loops>();
        loops.trips = self.trip_counts.clone();
        loops.max_iterations = self.max_loop_iterations;
        ctx.set_dialect(self.dialect);
        ctx.set_record_budget(self.max_records);
        if let Some(sink) = &self.emit {
            sink.set_launch(self.dialect, self.grid.num_instances());
            ctx.emit = Some(sink.clone());
        }
    }

    fn run_pair<F: Fn() + Sync>(
        &self,
        pair: &std::sync::Arc<crate::isa::lnc_state::Pair>,
        shared: &std::sync::Arc<LaunchShared>,
        kernel: &F,
    ) -> Result<Vec<Finished>> {
        let grid_shape = self.grid.shape();
        let one = |i: usize| {
            let (pid, core) = self.grid.instance(i);
            let mut ctx = InstanceCtx::new(
                pid,
                grid_shape.clone(),
                i as u64,
                core,
                self.mode,
                self.target,
                shared.clone(),
            );
            self.configure(&mut ctx);
            ctx.state.set(Link(Some(pair.clone())));
            let (ctx, outcome) = crate::context::run_instance(ctx, kernel);
            pair.finish(core, outcome.is_ok());
            outcome.ok().map(|()| Finished::of(i as u64, ctx))
        };
        std::thread::scope(|s| {
            let other = std::thread::Builder::new()
                .name("nki-lnc-core1".into())
                .spawn_scoped(s, || one(1))
                .map_err(|e| {
                    NkiError::new(
                        ErrorKind::HostMemory,
                        "launch",
                        format!(
                            "could not start the host thread of core 1 of an LNC=2 launch: {e}"
                        ),
                    )
                })?;
            let a = one(0);
            let b = other.join().ok().flatten();
            Ok(a.into_iter().chain(b).collect())
        })
    }

    /// The modelling thread that follows the records of a one-instance recording launch as
    /// they are made, when a host core is idle (no launch uses it; `load` then counts it): the
    /// record-only model work (dependencies, costs, DMA plans, queues) then overlaps the
    /// kernel instead of following it, and that core later builds the per-op rows beside
    /// placement, walks the critical path and drops the records. `None` otherwise
    /// (launches of many instances keep the cores busy with instances).
    /// When the compiler stage will rewrite the records (a Beta-1 kernel with the stage on,
    /// no LNC=2 pair), the thread waits for the records as recorded and prepares them beside
    /// the stage, which stops it at its first change (see `RecordFeed::deferred`).
    fn record_feed(&self, total: usize, load: &mut HostLoad) -> Option<crate::timing::RecordFeed> {
        (self.mode.records() && total == 1 && load.claim_idle_core()).then(|| {
            let feed = crate::timing::RecordFeed::new(self.target, self.grid.instance(0).1);
            let stage = self.stage_of(self.effective_compile_config());
            let transforms =
                self.dialect == Dialect::Beta1 && !stage.is_off() && !self.grid.is_lnc2();
            if transforms {
                feed.deferred()
            } else {
                feed
            }
        })
    }

    /// The compiler stage of the launch under compile configuration `config`:
    /// `CompileConfig::as_written()` (no transformations) turns the stage off; without address
    /// rotation the stage's buffer per iteration (the same renaming) is off too.
    fn stage_of(&self, config: crate::compiler::config::CompileConfig) -> crate::CompilerStage {
        if config.transformations {
            crate::CompilerStage {
                multi_buffer: self.compiler.multi_buffer && config.address_rotation.rotates(),
                ..self.compiler
            }
        } else {
            crate::CompilerStage::OFF
        }
    }

    /// The number of host threads this launch may use.
    fn threads(&self) -> Result<usize> {
        match self.host_threads {
            None => Ok(host_threads()),
            Some(0) => Err(NkiError::new(
                ErrorKind::InvalidArgument,
                "launch",
                "Launch::host_threads(0): a launch needs at least one host thread",
            )),
            Some(n) => Ok(n.min(host_threads())),
        }
    }
}

/// What a host worker keeps of an instance that ran to its end.
struct Finished {
    /// Linear program id (launch order).
    index: u64,
    /// Its program, for the pipeline.
    program: crate::pipeline::Program,
}

impl Finished {
    /// What is kept of instance `index`, whose context is `ctx`.
    fn of(index: u64, mut ctx: InstanceCtx) -> Finished {
        Finished {
            index,
            program: crate::pipeline::Program {
                pid: std::mem::take(&mut ctx.program_id),
                core: ctx.nc,
                feed: ctx.feed.take(),
                loops: ctx.state.take::<Loops>().log,
                records: ctx.records,
                peak: ctx.mem.peak,
                over: ctx.mem.over.take(),
                all_tiles: ctx.mem.all.take().unwrap_or_default(),
                tiles: std::mem::take(&mut ctx.mem.allocated),
                waits: Vec::new(),
                loop_lines: std::mem::take(&mut ctx.loop_lines),
                private_hbm: std::mem::take(&mut ctx.private_hbm),
            },
        }
    }
}

/// Checks the launch's outputs: each written at all, and every element of each that starts
/// uninitialised — the tensors a kernel allocates in shared HBM (what a 0.7 kernel returns),
/// outputs passed in when they count as fresh device memory (`uninitialised`) — unless the
/// kernel marked it as written in part on purpose. Element by element only where values tell
/// which elements a DMA wrote (estimate mode's dynamic offsets have none).
fn check_outputs(shared: &LaunchShared, uninitialised: bool, mode: Mode) -> Result<()> {
    let base = shared.writers.base();
    for out in &shared.outputs {
        out.check_output(base, shared.id, uninitialised)?;
    }
    for out in shared
        .kernel_outputs
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
    {
        out.check_output(base, shared.id, mode.executes())?;
    }
    Ok(())
}

/// Host threads running launches in this process right now (summed over running launches).
static HOST_THREADS_BUSY: AtomicUsize = AtomicUsize::new(0);

/// A running launch's share of [`HOST_THREADS_BUSY`], given back when the launch ends (also by
/// unwinding).
struct HostLoad(usize);

impl HostLoad {
    /// Counts `threads` more busy host threads until the guard is dropped.
    fn enter(threads: usize) -> HostLoad {
        HOST_THREADS_BUSY.fetch_add(threads, Ordering::Relaxed);
        HostLoad(threads)
    }

    /// Counts one more busy host thread when that leaves none of the host's CPUs
    /// oversubscribed; false (nothing counted) otherwise.
    fn claim_idle_core(&mut self) -> bool {
        let cpus = host_cpus();
        let before = HOST_THREADS_BUSY.fetch_add(1, Ordering::Relaxed);
        if before < cpus {
            self.0 += 1;
            true
        } else {
            HOST_THREADS_BUSY.fetch_sub(1, Ordering::Relaxed);
            false
        }
    }
}

impl Drop for HostLoad {
    fn drop(&mut self) {
        HOST_THREADS_BUSY.fetch_sub(self.0, Ordering::Relaxed);
    }
}

/// The host CPUs this process may use (asked once: the query reads the OS's CPU and cgroup
/// limits, too slow to repeat per launch); 1 when the OS does not say.
fn host_cpus() -> usize {
    static CPUS: OnceLock<usize> = OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The number of host threads launches run instances on by default: one per host CPU, and at
/// least [`MAX_LOGICAL_CORES`], so the NeuronCores of an `nc` grid can always run side by side
/// (1 if the OS refuses to start threads).
pub fn host_threads() -> usize {
    host_pool().map_or(1, rayon::ThreadPool::current_num_threads)
}

/// Runs `worker` on `n` host threads at once and returns everything they produced. With one
/// thread it runs on the caller's own; with more, on `n` workers of the launch thread pool
/// while the caller waits, so a launch never has more busy threads than the pool has workers
/// (one per CPU, each pinned to its own: see [`host_pool`]).
fn on_host_threads<T: Send>(n: usize, worker: impl Fn() -> Vec<T> + Sync) -> Vec<T> {
    let Some(pool) = host_pool().filter(|_| n > 1) else {
        return worker();
    };
    let out = Mutex::new(Vec::new());
    let collect = |mine: Vec<T>| out.lock().unwrap_or_else(|p| p.into_inner()).extend(mine);
    // The caller only waits: were it to run instances too, unpinned, next to a worker pinned
    // to the CPU it happens to be on, two busy threads would share one CPU while another
    // idles (the scheduler cannot move the pinned one, and wakes the caller where the last
    // worker ran).
    pool.in_place_scope(|s| {
        for _ in 0..n {
            s.spawn(|_| collect(worker()));
        }
    });
    out.into_inner().unwrap_or_else(|p| p.into_inner())
}

/// Hands the instance indices `0..total` (launch order) out to the host threads of a launch.
///
/// The launch order is cut into one contiguous share per thread: a thread takes the
/// instances of its own share in order, then those of the following shares (wrapping
/// around), also in order. So threads work on distant parts of the grid, which for the usual
/// kernels means distant parts of the tensors (two threads on neighbouring tiles of the same
/// rows slow each other down on the machine's memory), and an uneven share is still helped
/// by the other threads at its end.
///
/// Cancellation: the indices of a share are taken in increasing order, so once a share's next
/// index is cancelled (after the lowest failing instance), every later one is too, and the
/// share is skipped. Every instance before the lowest failure still runs: each share has a
/// thread that starts on it and stays on it until it is done, cancelled, or that thread's
/// own instance in it fails (every later index of the share is then after a failure).
struct Handout {
    shares: Vec<Share>,
    /// How many threads joined (the next one gets that share).
    joined: AtomicUsize,
}

/// One share of a [`Handout`], alone on its cache line (the threads' counters do not
/// false-share).
#[repr(align(128))]
struct Share {
    /// The next index to hand out (past `end` once the share is done).
    next: AtomicUsize,
    end: usize,
}

impl Handout {
    /// Shares of `0..total` for `threads` threads (at least one).
    fn new(total: usize, threads: usize) -> Handout {
        let n = threads.max(1);
        // `k * total / n` without overflow for any grid that fits in a `usize`.
        let bound = |k: usize| (k as u128 * total as u128 / n as u128) as usize;
        let shares = (0..n)
            .map(|k| Share {
                next: AtomicUsize::new(bound(k)),
                end: bound(k + 1),
            })
            .collect();
        Handout {
            shares,
            joined: AtomicUsize::new(0),
        }
    }

    /// The share of the calling thread (its own; the threads that join beyond the share
    /// count start on the shares again from the first).
    fn join(&self) -> usize {
        self.joined.fetch_add(1, Ordering::Relaxed) % self.shares.len()
    }

    /// The next instance for the thread of share `mine`: from its own share, else from the
    /// following ones; `None` when every share is done or `cancelled` (whose next index
    /// comes after a failure).
    fn next(&self, mine: usize, cancelled: impl Fn(usize) -> bool) -> Option<usize> {
        let n = self.shares.len();
        (0..n).find_map(|k| {
            let s = &self.shares[(mine + k) % n];
            if s.next.load(Ordering::Relaxed) >= s.end {
                return None;
            }
            let i = s.next.fetch_add(1, Ordering::Relaxed);
            (i < s.end && !cancelled(i)).then_some(i)
        })
    }
}

/// The rayon pool that runs the instances of launches on more than one host thread (threads
/// named `nki-host<i>`): [`host_threads`] workers, one per host CPU.
/// `None` when the OS refuses to start threads (launches then run on the caller's thread
/// alone).
///
/// Pinning (best effort): worker `i` is pinned to host CPU `i` (modulo the CPUs the process
/// may use), so a worker stays on one CPU and its caches. Workers are not tied to logical
/// NeuronCores (a worker runs the instances of its share of the launch order, whatever their
/// core; the model keeps NKI's placement). The launching thread belongs to the caller and is not
/// pinned, so it runs no instance while workers do (see `on_host_threads`): a launch has at
/// most one busy thread per CPU. Where pinning is unavailable (no CPU list, or the OS
/// refuses), workers run unpinned; nothing fails.
fn host_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let cpus = host_cpus();
        let core_ids = core_affinity::get_core_ids().unwrap_or_default();
        rayon::ThreadPoolBuilder::new()
            .num_threads(cpus.max(MAX_LOGICAL_CORES))
            .thread_name(|i| format!("nki-host{i}"))
            .start_handler(move |i| {
                if !core_ids.is_empty() {
                    // Best effort: a refusal leaves the worker unpinned.
                    let _ = core_affinity::set_for_current(core_ids[i % core_ids.len()]);
                }
            })
            .build()
            .ok()
    })
    .as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every index a thread of share `mine` takes, in order, until none is left.
    fn drain(h: &Handout, mine: usize, cancelled: impl Fn(usize) -> bool) -> Vec<usize> {
        std::iter::from_fn(|| h.next(mine, &cancelled)).collect()
    }

    #[test]
    fn a_thread_takes_its_own_share_in_order_then_the_following_ones() {
        let h = Handout::new(10, 3);
        let shares: Vec<usize> = (0..3).map(|_| h.join()).collect();
        assert_eq!(shares, [0, 1, 2]);
        // Shares [0, 3), [3, 6), [6, 10); share 1's thread alone takes everything.
        assert_eq!(h.next(1, |_| false), Some(3));
        assert_eq!(h.next(2, |_| false), Some(6));
        assert_eq!(drain(&h, 1, |_| false), [4, 5, 7, 8, 9, 0, 1, 2]);
        assert_eq!(h.next(0, |_| false), None);
    }

    #[test]
    fn every_index_is_taken_once_whatever_the_threads() {
        for (total, threads) in [(1, 1), (7, 2), (256, 2), (256, 3), (5, 8), (1000, 4)] {
            let h = Handout::new(total, threads);
            let mut got: Vec<usize> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..threads)
                    .map(|_| {
                        s.spawn(|| {
                            let mine = h.join();
                            drain(&h, mine, |_| false)
                        })
                    })
                    .collect();
                hs.into_iter().flat_map(|t| t.join().unwrap()).collect()
            });
            got.sort_unstable();
            assert_eq!(got, (0..total).collect::<Vec<_>>(), "{total} on {threads}");
        }
    }

    #[test]
    fn shares_of_the_largest_grids_do_not_overflow() {
        let h = Handout::new(usize::MAX, 3);
        let ends: Vec<usize> = h.shares.iter().map(|s| s.end).collect();
        assert_eq!(ends, [usize::MAX / 3, usize::MAX / 3 * 2, usize::MAX]);
        assert_eq!(h.next(2, |_| false), Some(usize::MAX / 3 * 2));
    }

    #[test]
    fn a_cancelled_share_is_skipped_but_earlier_instances_still_run() {
        // Shares [0, 4), [4, 8); instances after 2 are cancelled.
        let h = Handout::new(8, 2);
        let after_failure = |i: usize| i > 2;
        assert_eq!(h.next(0, after_failure), Some(0));
        // Share 1's thread finds its own share cancelled and helps with share 0's instances
        // before the failure, and no other.
        assert_eq!(drain(&h, 1, after_failure), [1, 2]);
        assert_eq!(h.next(0, after_failure), None);
    }
}
