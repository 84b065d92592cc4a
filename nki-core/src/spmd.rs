//! SPMD launch: grids of 1 to 3 dimensions, `spmd_dim`/`nc` placement of instances on logical
//! NeuronCores, and the launcher that runs the instances (one pinned rayon worker per
//! NeuronCore; instances of one core in order, cores side by side), collects their instruction
//! records and turns the first failure into an `Err`.

use crate::abort::{self, Stop};
use crate::context::{InstanceCtx, LaunchShared, Mode};
use crate::error::{ErrorKind, NkiError, Result};
use crate::memory::MemoryPeak;
use crate::profile::Profile;
use crate::target::Target;
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};

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
    /// Number of instances along this dimension.
    pub fn size(&self) -> usize {
        self.outer.size() * self.inner.size()
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

    fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(NkiError::new(ErrorKind::InvalidGrid, "launch", m));
        if self.dims.is_empty() || self.dims.len() > 3 {
            return bad(format!(
                "a launch grid has 1 to 3 dimensions, got {}",
                self.dims.len()
            ));
        }
        if self.dims.iter().any(|d| d.size() == 0) {
            return bad(format!("grid {self} has an empty dimension"));
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

    /// Every instance: (program id, NeuronCore), in launch order.
    pub fn instances(&self) -> Vec<(Vec<usize>, usize)> {
        let shape = self.shape();
        let total: usize = shape.iter().product();
        let mut out = Vec::with_capacity(total);
        let mut idx = vec![0usize; shape.len()];
        for _ in 0..total {
            let mut core = 0;
            for (d, &i) in self.dims.iter().zip(&idx) {
                let inner = d.inner.size();
                let (io, ii) = (i / inner, i % inner);
                if let Factor::Nc(_) = d.outer {
                    core = io;
                }
                if let Factor::Nc(_) = d.inner {
                    core = ii;
                }
            }
            out.push((idx.clone(), core));
            for d in (0..shape.len()).rev() {
                idx[d] += 1;
                if idx[d] < shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        out
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
    /// Every instance with its core, in grid order.
    pub instances: Vec<InstanceInfo>,
    /// Peak on-chip usage over all instances.
    pub memory: MemoryPeak,
    /// The modelled timeline (simulate and estimate modes).
    pub profile: Option<Profile>,
}

pub use crate::record::CoreStream;

/// A launch under construction: grid, target and mode (the builder form of `launch!`).
#[derive(Clone, Debug)]
pub struct Launch {
    grid: Grid,
    target: Target,
    mode: Mode,
}

impl Launch {
    /// A launch of `grid` in execute mode on the default target (trn2).
    pub fn new(grid: impl Into<Grid>) -> Launch {
        Launch {
            grid: grid.into(),
            target: Target::default(),
            mode: Mode::Execute,
        }
    }

    /// Sets the target.
    pub fn target(mut self, t: Target) -> Launch {
        self.target = t;
        self
    }

    /// Sets the mode.
    pub fn mode(mut self, m: Mode) -> Launch {
        self.mode = m;
        self
    }

    /// Runs `kernel` once per program instance and returns the report (with a profile in
    /// simulate and estimate modes). The first failing instance cancels the rest; its error
    /// (with program id and source line) is returned.
    pub fn run<F: Fn() + Sync>(&self, kernel: F) -> Result<LaunchReport> {
        self.grid.validate()?;
        abort::quiet_kernel_unwinds();
        let ncores = self.grid.num_cores();
        let shared = LaunchShared::new();
        let mut per_core: Vec<Vec<(u32, Vec<usize>)>> = vec![Vec::new(); ncores];
        let mut infos = Vec::new();
        for (i, (pid, core)) in self.grid.instances().into_iter().enumerate() {
            infos.push(InstanceInfo {
                program_id: pid.clone(),
                nc: core,
                order: per_core[core].len(),
            });
            per_core[core].push((i as u32, pid));
        }
        let grid_shape = self.grid.shape();
        let first_error: Mutex<Option<(u32, NkiError)>> = Mutex::new(None);
        let results: Vec<Mutex<(CoreStream, MemoryPeak)>> = (0..ncores)
            .map(|nc| {
                Mutex::new((
                    CoreStream {
                        nc,
                        instances: vec![],
                    },
                    MemoryPeak::default(),
                ))
            })
            .collect();
        let run_core = |core: usize| {
            let mut stream = CoreStream {
                nc: core,
                instances: Vec::new(),
            };
            let mut peak = MemoryPeak::default();
            for (index, pid) in &per_core[core] {
                if shared.cancelled.load(Ordering::SeqCst) {
                    break;
                }
                let ctx = InstanceCtx::new(
                    pid.clone(),
                    grid_shape.clone(),
                    *index,
                    core,
                    self.mode,
                    self.target,
                    shared.clone(),
                );
                match abort::run_instance(ctx, &kernel) {
                    (ctx, Ok(())) => {
                        peak = peak.max(ctx.mem.peak);
                        stream.instances.push((pid.clone(), ctx.records));
                    }
                    (_, Err(stop)) => {
                        if let Stop::Failed(e) = stop {
                            let mut g = first_error.lock().unwrap_or_else(|p| p.into_inner());
                            if g.as_ref().is_none_or(|(i, _)| *index < *i) {
                                *g = Some((*index, e));
                            }
                        }
                        shared.cancelled.store(true, Ordering::SeqCst);
                        break;
                    }
                }
            }
            *results[core].lock().unwrap_or_else(|p| p.into_inner()) = (stream, peak);
        };
        if ncores == 1 {
            core_pool(0).install(|| run_core(0));
        } else {
            std::thread::scope(|s| {
                for core in 0..ncores {
                    let run_core = &run_core;
                    s.spawn(move || core_pool(core).install(|| run_core(core)));
                }
            });
        }
        if let Some((_, e)) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(e);
        }
        let mut streams = Vec::with_capacity(ncores);
        let mut memory = MemoryPeak::default();
        for r in results {
            let (s, p) = r.into_inner().unwrap_or_else(|p| p.into_inner());
            memory = memory.max(p);
            streams.push(s);
        }
        let profile = if self.mode.records() {
            Some(crate::timing::model(&streams, self.target, memory))
        } else {
            None
        };
        Ok(LaunchReport {
            grid: self.grid.clone(),
            target: self.target,
            mode: self.mode,
            instances: infos,
            memory,
            profile,
        })
    }
}

/// The rayon pool (one worker, pinned to a CPU where the OS allows) of logical NeuronCore `nc`.
fn core_pool(nc: usize) -> Arc<rayon::ThreadPool> {
    static POOLS: OnceLock<Mutex<Vec<Arc<rayon::ThreadPool>>>> = OnceLock::new();
    let pools = POOLS.get_or_init(|| Mutex::new(Vec::new()));
    let mut g = pools.lock().unwrap_or_else(|p| p.into_inner());
    while g.len() <= nc {
        let idx = g.len();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .thread_name(move |_| format!("nki-nc{idx}"))
            .start_handler(move |_| pin_to_cpu(idx))
            .build()
            .or_else(|_| rayon::ThreadPoolBuilder::new().num_threads(1).build())
            .expect("a one-thread rayon pool can be built");
        g.push(Arc::new(pool));
    }
    g[nc].clone()
}

/// Best-effort pinning of the current thread to CPU `nc % cpus`; never fails.
fn pin_to_cpu(nc: usize) {
    if let Some(ids) = core_affinity::get_core_ids() {
        if !ids.is_empty() {
            let _ = core_affinity::set_for_current(ids[nc % ids.len()]);
        }
    }
}
