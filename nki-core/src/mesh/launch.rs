//! The mesh launcher (shard_map style): one thread per device, each running the kernel over
//! its own SPMD grid on its own shards, concurrently; then the end-of-kernel checks (copies
//! never waited on, semaphores left non-zero) and the [`MeshReport`].

use super::device::{self, DeviceState};
use super::links::Topology;
use super::report::{CollectiveStat, MeshReport};
use super::shared::MeshShared;
use super::sync::MeshSync;
use super::topology::Mesh;
use crate::abort::Stop;
use crate::builder::setters;
use crate::context::run_instance;
use crate::context::{InstanceCtx, LaunchShared, Mode};
use crate::error::{ErrorKind, NkiError, Result, SourceLoc};
use crate::lang::loop_state::Loops;
use crate::spmd::Grid;
use crate::target::Target;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// What a device thread hands back: its error.
type DeviceOutcome = Option<NkiError>;

/// A launch over a mesh: the kernel runs once per device (each with `grid` program
/// instances), on one thread per device.
///
/// ```
/// use nki_core::mesh::{self, Mesh, MeshLaunch, PartitionSpec, ShardedHbm};
/// let m = Mesh::new([2], ["x"])?;
/// let ids = ShardedHbm::<f32>::zeros(&m, &[2], PartitionSpec::new([Some("x")]))?;
/// MeshLaunch::new(&m).run(|| {
///     let v = nki_core::nl::full(&[1, 1], mesh::device_id() as f32, nki_core::DType::F32,
///         nki_core::MemKind::Sbuf);
///     nki_core::nl::store(ids.local_out().view().slice(0..1), &v);
/// })?;
/// assert_eq!(ids.to_array()?.as_slice().unwrap(), &[0.0, 1.0]);
/// # Ok::<(), nki_core::NkiError>(())
/// ```
#[derive(Clone, Debug)]
pub struct MeshLaunch<'m> {
    mesh: &'m Mesh,
    grid: Grid,
    target: Target,
    mode: Mode,
    engine_spans: bool,
    topology: Option<Topology>,
    /// The most instruction records a program instance may keep ([`MeshLaunch::max_records`]).
    max_records: usize,
    /// The most iterations of one device-loop run ([`MeshLaunch::max_loop_iterations`]).
    max_loop_iterations: u64,
    /// The logical NeuronCore configuration ([`MeshLaunch::lnc`]); `None`: the target's.
    lnc: Option<u8>,
}

impl<'m> MeshLaunch<'m> {
    /// A launch over `mesh` with a one-instance grid per device, in execute mode on trn2.
    pub fn new(mesh: &'m Mesh) -> Self {
        MeshLaunch {
            mesh,
            grid: Grid::new([1]),
            target: Target::default(),
            mode: Mode::Execute,
            engine_spans: true,
            topology: None,
            max_records: crate::record::DEFAULT_MAX_RECORDS,
            max_loop_iterations: crate::lang::MAX_DEVICE_LOOP_ITERATIONS,
            lnc: None,
        }
    }

    /// The logical NeuronCore configuration of the devices (NKI's LNC): `lnc(1)` makes each
    /// device one physical NeuronCore, as at LNC=1 on trn2 and trn3 (8 devices per chip in
    /// the target's layout instead of 4; a [`topology`](MeshLaunch::topology) given is taken
    /// as it is), and pairs device `d` with the device on the other core of its HBM stack
    /// (the layout's slot `slot(d) ^ 1`) for [`nki_core::lnc::core_barrier`](crate::lnc::core_barrier),
    /// which NKI 0.8 also runs at LNC=1. `lnc(2)` is the trn2/trn3 default (each device a
    /// logical NeuronCore of two physical cores; `Grid::lnc(2)` launches pair those); trn1 has
    /// LNC=1 only. Any other value, or `lnc(2)` on trn1, fails the launch
    /// ([`ErrorKind::InvalidGrid`]).
    pub fn lnc(mut self, lnc: u8) -> Self {
        self.lnc = Some(lnc);
        self
    }

    setters! {
        /// The layout the launch is timed on (what-if studies: placement, link and DMA figures);
        /// by default the target's own ([`Topology::of`]). The engines' costs stay the target's.
        topology(t: Topology) => topology = Some(t);
        /// The SPMD grid every device runs.
        grid(g: impl Into<Grid>) => grid = g.into();
        /// The target modelled.
        target(t: Target) => target = t;
        /// The launch mode (simulate and estimate model time).
        mode(m: Mode) => mode = m;
        /// Whether the report keeps every engine instruction span (for the trace; default on).
        /// Off, each kernel segment is one span: less memory on large meshes.
        engine_spans(on: bool) => engine_spans = on;
        /// The most instruction records one program instance of a device may keep in simulate
        /// and estimate modes (default [`DEFAULT_MAX_RECORDS`](crate::DEFAULT_MAX_RECORDS)), as
        /// [`Launch::max_records`](crate::spmd::Launch::max_records): the record past it fails
        /// the launch with an [`ErrorKind::Budget`] error naming the device, the device loop
        /// running and its line (or the last instruction's line).
        max_records(n: usize) => max_records = n;
        /// The most iterations one run of a device loop (`nl::fori_loop`, `nl::while_loop`) may
        /// take on a device, in every mode (default
        /// [`MAX_DEVICE_LOOP_ITERATIONS`](crate::nl::MAX_DEVICE_LOOP_ITERATIONS)), as
        /// [`Launch::max_loop_iterations`](crate::spmd::Launch::max_loop_iterations): the next
        /// fails the launch with an [`ErrorKind::Budget`] error naming the device, the loop and
        /// its line.
        max_loop_iterations(n: u64) => max_loop_iterations = n;
    }

    /// Runs `kernel` on every device and returns the report. Each device runs until it fails,
    /// ends, or waits for what no device will send; the error is the failure of the lowest
    /// device id that failed, whatever order the host ran the devices in (a deadlock, which
    /// names every blocked device, only when no device failed otherwise).
    ///
    /// Called from inside a kernel body (or a mesh device's kernel), it launches nothing and
    /// fails the calling instance with an [`ErrorKind::NestedLaunch`] error at the caller's
    /// line, as [`Launch::run`](crate::spmd::Launch::run) does.
    #[track_caller]
    pub fn run<F: Fn() + Sync>(&self, kernel: F) -> Result<MeshReport> {
        let here = SourceLoc::caller();
        // An error of the launch itself points at the user's launch; one inside the kernel
        // keeps its own line.
        self.run_at(here, kernel).map_err(|e| e.with_loc(here))
    }

    /// [`MeshLaunch::run`] called at `here`.
    fn run_at<F: Fn() + Sync>(&self, here: SourceLoc, kernel: F) -> Result<MeshReport> {
        let what = || format!("a mesh launch (mesh {})", self.mesh);
        crate::spmd::refuse_nested_launch("MeshLaunch", what, here);
        // Tensors borrowed with `Hbm::as_output` before the launch are its outputs, also
        // when it is refused below (a refused launch leaves nothing for the next one).
        let borrowed = crate::hbm::take_pending_outputs();
        self.grid.validate()?;
        if self.grid.num_cores() != 1 {
            return Err(NkiError::new(
                ErrorKind::InvalidGrid,
                "MeshLaunch",
                format!(
                    "a mesh device is one logical NeuronCore: grid {} uses nc()",
                    self.grid
                ),
            ));
        }
        crate::abort::quiet_kernel_unwinds();
        let n = self.mesh.num_devices();
        let topology = match (&self.topology, self.lnc) {
            (Some(t), lnc) => {
                super::stack::topology_at(self.target, lnc)?;
                t.clone()
            }
            (None, lnc) => super::stack::topology_at(self.target, lnc)?,
        };
        topology.check(n)?;
        let launch = LaunchShared::new();
        launch.cancelled.isolate();
        let shared = Arc::new(MeshShared {
            mesh: self.mesh.clone(),
            target: self.target,
            mode: self.mode,
            links: topology.clone(),
            engine_spans: self.engine_spans,
            sync: MeshSync::new(
                (0..n).map(|d| self.mesh.describe_device(d)).collect(),
                topology,
            ),
            collectives: Mutex::new(BTreeMap::new()),
            outputs: Mutex::new(BTreeMap::new()),
        });
        for st in &borrowed {
            shared.note_output(st, None);
        }
        let outcomes: Vec<Mutex<Option<DeviceOutcome>>> =
            (0..n).map(|_| Mutex::new(None)).collect();
        std::thread::scope(|s| {
            for (d, slot) in outcomes.iter().enumerate() {
                let (shared, launch, kernel) = (&shared, &launch, &kernel);
                let run = move || {
                    let r = self.run_device(d, shared.clone(), launch, kernel);
                    *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
                };
                let spawned = std::thread::Builder::new()
                    .name(format!("nki-device{d}"))
                    .stack_size(16 << 20)
                    .spawn_scoped(s, run);
                if spawned.is_err() {
                    shared.sync.device_done(d);
                }
            }
        });
        let mut errors = Vec::new();
        for (d, o) in outcomes.into_iter().enumerate() {
            match o.into_inner().unwrap_or_else(|p| p.into_inner()) {
                Some(e) => errors.extend(e),
                None => errors.push(NkiError::new(
                    ErrorKind::Io,
                    "MeshLaunch",
                    format!("could not start the thread of device {d}"),
                )),
            }
        }
        if let Some(e) = launch_error(errors) {
            return Err(e);
        }
        end_checks(&shared)?;
        // Accesses not ordered by the program's synchronisation, then shards written in part
        // (both decided whatever the host order, see `order`).
        if let Some(e) = shared.sync.verdict() {
            return Err(e);
        }
        outputs_written(&shared, &launch)?;
        // One pre/postamble per launch (when time is modelled), not one per kernel segment.
        let overhead = if self.mode.records() {
            self.target.spec().launch_overhead_ns
        } else {
            0.0
        };
        // Replayed as the devices ran (the replay also decided which increments each wait
        // consumed, see `sync`).
        let timeline = shared.sync.timeline(overhead);
        let collectives = shared
            .collectives()
            .iter()
            .map(|(&seq, e)| {
                let spans = timeline.collectives.get(&seq).map_or(&[][..], |v| v);
                CollectiveStat::from_entry(seq, e, spans)
            })
            .collect();
        Ok(MeshReport::new(
            self.mesh.clone(),
            self.target,
            self.mode,
            timeline.devices,
            collectives,
        ))
    }

    /// Runs every instance of device `d` on this thread; returns its error.
    fn run_device<F: Fn() + Sync>(
        &self,
        d: usize,
        shared: Arc<MeshShared>,
        launch: &Arc<LaunchShared>,
        kernel: &F,
    ) -> DeviceOutcome {
        device::install(DeviceState {
            id: d,
            shared: shared.clone(),
            program_id: Vec::new(),
            next_sem: 0,
            next_collective: 0,
            next_core_barrier: 0,
        });
        crate::hbm::observe::install(Some(device::observe));
        let pairs = self.lnc == Some(1) && super::stack::cores_per_stack(self.target) == 2;
        if pairs {
            crate::isa::lnc_state::install_stack_barrier(Some(super::stack::barrier));
        }
        let instances = self.grid.instances();
        let grid_shape = self.grid.shape();
        let mut error = None;
        for (i, (pid, _)) in instances.iter().enumerate() {
            device::with_device("MeshLaunch", SourceLoc::caller(), |s| {
                s.program_id = pid.clone();
            });
            shared.sync.enter_instance(d, pid);
            let mut ctx = InstanceCtx::new(
                pid.clone(),
                grid_shape.clone(),
                (d * instances.len() + i) as u32,
                0,
                self.mode,
                self.target,
                launch.clone(),
            );
            ctx.set_record_budget(self.max_records);
            ctx.state.get::<Loops>().max_iterations = self.max_loop_iterations;
            let (_, outcome) = run_instance(ctx, || {
                kernel();
                device::with_device("MeshLaunch", SourceLoc::caller(), |s| s.flush());
            });
            // A failed device stops; the others run on (see `launch_error`), and the ones
            // that wait for it learn it will never signal when it is done (below).
            if let Err(stop) = outcome {
                if let Stop::Failed(e) = stop {
                    error = Some(on_device(e, pid, &self.mesh.describe_device(d)));
                }
                break;
            }
        }
        crate::hbm::observe::install(None);
        if pairs {
            crate::isa::lnc_state::install_stack_barrier(None);
        }
        shared.sync.device_done(d);
        device::take().expect("installed above");
        error
    }
}

/// The error of a mesh launch whose devices failed with `errors` (in device order): the first
/// device's own failure, else the deadlock. Each device runs until it fails, ends or waits for
/// what no device will send, so every device's outcome, and this choice, is the same whatever
/// order the host runs the devices in; a deadlock that a failed device left behind (its peers
/// waiting for it) is not the cause, its failure is.
fn launch_error(errors: Vec<NkiError>) -> Option<NkiError> {
    let own = errors.iter().position(|e| e.kind() != ErrorKind::Deadlock);
    let at = own.unwrap_or(0);
    errors.into_iter().nth(at)
}

/// `e`, a failure of an instance of `device`, with the device named in its message (a
/// deadlock already names every device).
fn on_device(e: NkiError, pid: &[usize], device: &str) -> NkiError {
    if e.kind() == ErrorKind::Deadlock {
        return e;
    }
    let mut out = NkiError::new(e.kind(), e.op(), format!("on {device}: {}", e.message()))
        .with_program_id(e.program_id().unwrap_or(pid));
    if let Some(l) = e.location() {
        out = out.with_loc(l);
    }
    out
}

/// After every device finished: a kernel output (a shard taken with `local_out`, or a tensor
/// borrowed with `Hbm::as_output` before the launch) that nothing wrote in this launch — no
/// store, DMA, remote copy or collective — is an [`ErrorKind::OutputNotWritten`] error
/// (NKI's `err_tensor_output_not_written_to`), as in single-device launches.
fn outputs_written(shared: &MeshShared, launch: &LaunchShared) -> Result<()> {
    let base = launch.writers.base();
    let outputs = shared.outputs.lock().unwrap_or_else(|p| p.into_inner());
    for (st, d) in outputs.values() {
        crate::hbm::check_written(st, base).map_err(|e| match d {
            Some(d) => {
                let device = shared.mesh.describe_device(*d);
                NkiError::new(e.kind(), e.op(), format!("on {device}: {}", e.message()))
            }
            None => e,
        })?;
    }
    Ok(())
}

/// After every device finished: a copy whose send side was never waited on, or a semaphore
/// left non-zero, is an error.
fn end_checks(shared: &MeshShared) -> Result<()> {
    let s = shared.sync.lock();
    let mesh = &shared.mesh;
    if let Some(c) = s.first_unwaited_copy() {
        return Err(NkiError::new(
            ErrorKind::Synchronization,
            "remote_copy",
            format!(
                "the copy started on {} to {} at {} was never waited on (call .wait() or .wait_send() before the kernel ends)",
                mesh.describe_device(c.src),
                mesh.describe_device(c.dst),
                c.loc
            ),
        )
        .with_loc(c.loc));
    }
    for (d, sems) in s.sems.iter().enumerate() {
        let mut left: Vec<_> = sems.iter().filter(|(_, v)| v.value() != 0).collect();
        left.sort_by_key(|(k, _)| **k);
        if let Some((_, sem)) = left.first() {
            let (from, at) = sem
                .first_signal()
                .expect("a semaphore holding a value has a signal");
            let made = sem.loc.map_or(String::new(), |l| format!(" (made at {l})"));
            return Err(NkiError::new(
                ErrorKind::Synchronization,
                "semaphore",
                format!(
                    "semaphore '{}' on {}{made} holds {} at kernel end: the signal {} sent at {at} (a semaphore signal or a copy's completion) was never waited for",
                    sem.name,
                    mesh.describe_device(d),
                    sem.value(),
                    mesh.describe_device(from),
                ),
            )
            .with_loc(at));
        }
    }
    Ok(())
}
