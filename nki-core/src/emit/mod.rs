//! From Rust to the chip: a kernel traced and written as an NKI 0.8 Python module, with a
//! driver that runs it on a Trainium (`nki.execute`) or in NKI's simulator (`nki.simulate`)
//! and compares its outputs with nki-rs's.
//!
//! ```no_run
//! # use nki_core::prelude::*;
//! # #[nki_kernel(nki = "0.7")]
//! # fn double(a: &Hbm<f32>) -> Hbm<f32> {
//! #     let out = nl::ndarray(a.shape(), a.dtype(), nl::shared_hbm);
//! #     let t = nl::ndarray(&[128, 512], a.dtype(), nl::sbuf);
//! #     nisa::dma_copy(&t, a.view(), None);
//! #     nisa::tensor_tensor(&t, &t, &t, nl::AluOp::Add, None);
//! #     nisa::dma_copy(out.view(), &t, None);
//! #     out
//! # }
//! use nki_core::emit::Emitter;
//! # fn main() -> Result<(), NkiError> {
//! let a = Hbm::<f32>::full([128, 512], 1.5);
//! let mut emitter = Emitter::new("double");
//! emitter.input("a", &a);
//! let (out, _) = double::run(emitter.launch(Launch::new(1)), &a)?;
//! emitter.output("out", &out)?;
//! let kernel = emitter.finish()?;     // double.py, double_run.py and the .npy data
//! kernel.write("emitted")?;
//! # Ok(()) }
//! ```
//!
//! The launch traces every `nl`/`nisa` call at the API level (names, views, keyword options,
//! loop frames); the emitter names the tensors, prints each view as a slice or `.ap()` of its
//! tensor and each call destination-first with its non-default keywords, and re-rolls the
//! `nl::affine_range` loops: iterations that issue the same calls with offsets
//! affine in the index (checked on every iteration) become one `for i in nl.affine_range(n)`;
//! an iteration that differs (a partial last tile) stays in the loop as an arm of an
//! `if i < k: ... else: ...` on the index (NKI traces its loops with integer indices). Plain Rust loops (`sequential_range`,
//! `static_range`, `step_by`) leave no loop in the trace: a block of statements repeated with
//! its numbers affine in the repetition (checked on every repetition) becomes an
//! `nl.static_range` loop, which NKI unrolls when tracing as the Rust loop was. Tiles of one
//! `nl::ndarray` line alive at once (a Rust `Vec` of tiles) are the entries of a Python list
//! (`sb_12[k]`), so their loops re-roll too.
//!
//! An LNC=2 launch (NKI 0.7/0.8's `kernel[2]`: one instance per physical core) is written
//! once: each core's statements are built as above, then the two are re-rolled like two
//! iterations of a loop over `pid = nl.program_id(0)` (a number that differs between the
//! cores becomes `c + k * pid`; statements that differ stay as `if pid < 1: ... else: ...`),
//! and the driver launches `kernel[2]`. The 0.7 LNC calls are written as 0.8's `nki.lnc`.
//!
//! Refused, with an error naming the call and its line: calls the emitter does not write yet
//! and Beta-1 forms (`nl::load`, `nl::store`, value-returning instructions, whose API no
//! longer exists in NKI 0.8: the error says what to port them to), Beta-1 launches of more
//! than one program instance (grids NKI 0.8 no longer has), and views it cannot print
//! (indirect, dynamic-offset, reinterpreting).
//! Every emitted module uses only names and keywords of [`API_08`] ([`check_api`]).

mod api;
mod npy;
mod python;
mod reroll;
pub(crate) mod trace;

pub use api::{api_entries, check_api, ApiEntry, API_08};

use crate::dialect::Dialect;
use crate::dtype::{DType, Element};
use crate::error::{ErrorKind, NkiError, Result};
use crate::hbm::{Hbm, HbmStorage};
use crate::record::MemKind;
use crate::spmd::Launch;
use python::{nl_dtype, tuple, TensorInfo};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use trace::{Sink, TensorId, What};

/// A host tensor the emitter writes as `.npy`: a kernel input, or an output nki-rs computed.
#[derive(Clone, Debug)]
struct HostTensor {
    name: String,
    id: u64,
    dims: Vec<usize>,
    dtype: DType,
    /// The values (`None` for a shape-only tensor of an estimate).
    values: Option<Vec<f32>>,
}

impl HostTensor {
    fn of<T: Element>(name: &str, t: &Hbm<T>) -> Result<HostTensor> {
        Ok(HostTensor {
            name: python_name(name),
            id: t.st.id,
            dims: t.shape().to_vec(),
            dtype: t.dtype(),
            values: t.has_data().then(|| t.to_f32_vec()).transpose()?,
        })
    }

    /// The tensor of `storage` (an `HbmStorage` the trace kept), named `name`.
    fn of_storage(name: &str, storage: &trace::Storage) -> Result<HostTensor> {
        let st = storage
            .clone()
            .downcast::<HbmStorage>()
            .expect("the trace keeps HBM storages");
        HostTensor::of(name, &Hbm::<f32>::wrap(st))
    }
}

/// The HBM tensors of a trace, in order of first use: each with its storage, whether the
/// kernel allocated it (and in shared HBM), and whether a call writes it.
#[derive(Default)]
struct HbmUse {
    order: Vec<u64>,
    of: HashMap<u64, (trace::Storage, Option<bool>, bool)>,
}

impl HbmUse {
    fn of(events: &[trace::Event]) -> HbmUse {
        let mut u = HbmUse::default();
        for e in events {
            match &e.what {
                What::Alloc {
                    tensor: TensorId::Hbm(id),
                    storage: Some(st),
                    shared,
                    ..
                } => u.note(*id, st, Some(*shared), false),
                What::Call(c) => {
                    for (kw, a) in &c.args {
                        if let trace::Arg::View(trace::View {
                            tensor: TensorId::Hbm(id),
                            storage: Some(st),
                            ..
                        }) = a
                        {
                            u.note(*id, st, None, *kw == "dst");
                        }
                    }
                }
                _ => {}
            }
        }
        u
    }

    fn note(&mut self, id: u64, st: &trace::Storage, allocated: Option<bool>, written: bool) {
        let entry = self.of.entry(id).or_insert_with(|| {
            self.order.push(id);
            (st.clone(), allocated, false)
        });
        entry.2 |= written;
    }
}

/// Traces a kernel launch and writes it as an NKI 0.8 Python module and its driver (see the
/// [module documentation](self)).
#[derive(Debug)]
pub struct Emitter {
    name: String,
    sink: Arc<Sink>,
    inputs: Vec<HostTensor>,
    outputs: Vec<HostTensor>,
    errors: Vec<NkiError>,
}

impl Emitter {
    /// An emitter of the kernel to be named `name` in Python.
    pub fn new(name: &str) -> Emitter {
        Emitter {
            name: python_name(name),
            sink: Arc::default(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// Declares the next parameter of the Python kernel: the HBM input `t`, named `name`
    /// (its values become the driver's `.npy` input). Call before the launch runs, in the
    /// order of the kernel's parameters. A shape-only input (`Hbm::shape_only`, for an
    /// estimate launch) gives a module without driver data.
    pub fn input<T: Element>(&mut self, name: &str, t: &Hbm<T>) -> &mut Emitter {
        match HostTensor::of(name, t) {
            Ok(h) => self.inputs.push(h),
            Err(e) => self.errors.push(e),
        }
        self
    }

    /// `launch` with this emitter's trace on: run the kernel with it (`k::run(launch, ..)`).
    pub fn launch(&self, mut launch: Launch) -> Launch {
        launch.emit = Some(self.sink.clone());
        launch
    }

    /// Declares an output of the Python kernel, after the launch ran: a tensor the kernel
    /// returned (allocated in `nl::shared_hbm`) or an output parameter it wrote (`&mut Hbm`;
    /// the Python kernel allocates it and returns it, as NKI 0.8 kernels do). Its values are
    /// the driver's expected output. Outputs are returned in the order declared.
    pub fn output<T: Element>(&mut self, name: &str, t: &Hbm<T>) -> Result<&mut Emitter> {
        self.outputs.push(HostTensor::of(name, t)?);
        Ok(self)
    }

    /// The emitted kernel: the module and its driver, or an error saying what the emitter
    /// cannot write and where.
    pub fn finish(&mut self) -> Result<EmittedKernel> {
        if let Some(e) = self.errors.first() {
            return Err(e.clone());
        }
        let refuse = |msg: String| NkiError::new(ErrorKind::InvalidArgument, "emit", msg);
        let (dialect, instances) = self.sink.launch().ok_or_else(|| {
            refuse(format!(
                "no launch of '{}' ran with Emitter::launch: run the kernel with the launch it \
                 returns",
                self.name
            ))
        })?;
        // NKI 0.7/0.8's kernel[2] (LNC=2): both cores' calls, written once with the
        // program id in their numbers. Other multi-instance launches (Beta-1 grids) have no
        // NKI 0.8 form.
        let lnc2 = instances == 2 && dialect != Dialect::Beta1;
        if instances != 1 && !lnc2 {
            return Err(refuse(format!(
                "the launch of '{}' ran {instances} program instances; the emitter writes \
                 launches of one instance (kernel[1]) and NKI 0.7/0.8's LNC=2 (kernel[2])",
                self.name
            )));
        }
        let mut per_instance: Vec<Vec<trace::Event>> = vec![Vec::new(); instances];
        for (i, e) in self.sink.take() {
            if let Some(v) = usize::try_from(i)
                .ok()
                .and_then(|i| per_instance.get_mut(i))
            {
                v.push(e);
            }
        }
        if let Some(e) = per_instance
            .iter()
            .flatten()
            .find(|e| matches!(e.what, What::Untraced { .. }))
        {
            let What::Untraced { api } = e.what else {
                unreachable!()
            };
            return Err(untraced(api, e.loc, dialect));
        }
        for events in &per_instance {
            self.discover(events)?;
        }
        let mut named: HashMap<TensorId, TensorInfo> = HashMap::new();
        for t in self.inputs.iter().chain(&self.outputs) {
            named.insert(
                TensorId::Hbm(t.id),
                TensorInfo {
                    name: t.name.clone(),
                    dims: t.dims.clone(),
                    mem: MemKind::Hbm,
                    slot: None,
                },
            );
        }
        let mut allocated = Vec::new();
        for e in per_instance.iter().flatten() {
            if let What::Alloc {
                tensor: TensorId::Hbm(id),
                shared: true,
                ..
            } = &e.what
            {
                allocated.push(*id);
            }
        }
        // Each instance's statements, its tensors named by allocating line (so the cores'
        // tensors of one line share a name), then the cores' statements re-rolled over the
        // program id as two iterations of a loop over it.
        let mut lists: Vec<(String, usize)> = Vec::new();
        let mut bodies = Vec::new();
        for events in &per_instance {
            let (tensors, its_lists) = python::name_tensors(events, &named)?;
            for (name, len) in its_lists {
                match lists.iter_mut().find(|(n, _)| *n == name) {
                    Some(l) => l.1 = l.1.max(len),
                    None => lists.push((name, len)),
                }
            }
            bodies.push(python::body(events, &tensors)?);
        }
        let body = match bodies.len() {
            1 => bodies.pop().unwrap_or_default(),
            _ => {
                let mut rolled = reroll::reroll(bodies, "", reroll::PROGRAM_ID);
                let mut stmts = vec![reroll::Stmt::Line(vec![reroll::Tok::Text(format!(
                    "{} = nl.program_id(0)",
                    reroll::index_name(reroll::PROGRAM_ID)
                ))])];
                match rolled.pop() {
                    Some(reroll::Stmt::Loop { body, .. }) if rolled.is_empty() => {
                        stmts.extend(body)
                    }
                    // Empty bodies (a kernel that only allocates and returns).
                    None => {}
                    Some(other) => {
                        rolled.push(other);
                        stmts.extend(rolled);
                    }
                }
                stmts
            }
        };
        let mut text = String::new();
        // The lists of tiles alive at once (a Rust `Vec` of tiles).
        for (name, len) in &lists {
            text.push_str(&format!("    {name} = [None] * {len}\n"));
        }
        // Output parameters: allocated by the Python kernel, which returns them.
        for o in self.outputs.iter().filter(|o| !allocated.contains(&o.id)) {
            text.push_str(&format!(
                "    {} = nl.ndarray({}, dtype={}, buffer=nl.shared_hbm)\n",
                o.name,
                tuple(&o.dims),
                nl_dtype(o.dtype)
            ));
        }
        python::render(&body, 1, &mut text);
        let module = self.module(&text, instances);
        check_api(&module)?;
        Ok(EmittedKernel {
            name: self.name.clone(),
            driver: self.driver(instances),
            module,
            inputs: self.inputs.clone(),
            outputs: self.outputs.clone(),
            modelled: None,
        })
    }

    /// Adds the HBM tensors of `events` not declared with [`Emitter::input`] /
    /// [`Emitter::output`], in order of first use, named after their tensors (a kernel's
    /// parameters are named after them): the tensors a call reads and the kernel neither
    /// allocates nor writes are inputs; those it writes (output parameters) and those it
    /// allocates in shared HBM (returned) are outputs.
    fn discover(&mut self, events: &[trace::Event]) -> Result<()> {
        let uses = HbmUse::of(events);
        let mut taken: Vec<String> = self
            .inputs
            .iter()
            .chain(&self.outputs)
            .map(|t| t.name.clone())
            .collect();
        let mut unique = |name: String| {
            let mut n = python_name(&name);
            let mut k = 1;
            while taken.contains(&n) {
                n = format!("{}_{k}", python_name(&name));
                k += 1;
            }
            taken.push(n.clone());
            n
        };
        for id in uses.order {
            let (st, allocated, written) = &uses.of[&id];
            let declared = self.inputs.iter().chain(&self.outputs).any(|t| t.id == id);
            if declared || *allocated == Some(false) {
                continue; // declared, or kernel scratch (private HBM)
            }
            let storage = st.clone().downcast::<HbmStorage>().expect("an HBM storage");
            let name = unique(storage.name.get().to_string());
            let t = HostTensor::of_storage(&name, st)?;
            if allocated.is_some() || *written {
                self.outputs.push(t);
            } else {
                self.inputs.push(t);
            }
        }
        Ok(())
    }

    /// The module's text around the kernel body `body`, launched as `kernel[grid]`.
    fn module(&self, body: &str, grid: usize) -> String {
        let sig = |ts: &[HostTensor]| {
            ts.iter()
                .map(|t| format!("{}: {}{:?}", t.name, t.dtype, t.dims))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let params: Vec<&str> = self.inputs.iter().map(|t| t.name.as_str()).collect();
        let outs: Vec<&str> = self.outputs.iter().map(|t| t.name.as_str()).collect();
        let ret = match outs.len() {
            0 => String::new(),
            _ => format!("    return {}\n", outs.join(", ")),
        };
        format!(
            "\"\"\"`{name}`: an NKI 0.8 kernel written by nki-rs (nki_core::emit) from the Rust \
             kernel,\ntraced with inputs {ins} (outputs {outs_sig}){launch}.\n\nRun \
             {name}_run.py beside it: nki.simulate, or nki.execute on a Trainium with \
             --device;\nit compares the outputs with nki-rs's.\n\"\"\"\n\nimport nki\nimport \
             nki.isa as nisa\nimport nki.language as nl\n{lnc}\n\n@nki.jit\ndef \
             {name}({params}):\n{body}{ret}",
            name = self.name,
            launch = if grid > 1 {
                format!(", launched as {}[{grid}]", self.name)
            } else {
                String::new()
            },
            lnc = if body.contains("nki.lnc.") {
                "import nki.lnc\n"
            } else {
                ""
            },
            ins = sig(&self.inputs),
            outs_sig = sig(&self.outputs),
            params = params.join(", "),
        )
    }

    /// The driver's text, for a launch as `kernel[grid]`.
    fn driver(&self, grid: usize) -> String {
        let list = |ts: &[HostTensor]| {
            ts.iter()
                .map(|t| format!("(\"{}\", \"{}\")", t.name, t.dtype.name()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        DRIVER
            .replace("{name}", &self.name)
            .replace("{inputs}", &list(&self.inputs))
            .replace("{outputs}", &list(&self.outputs))
            .replace("{grid}", &grid.to_string())
    }
}

/// Numbers the scratch folders of [`EmittedKernel::check`].
static CHECKS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The driver template (`{name}`, `{inputs}`, `{outputs}` replaced).
const DRIVER: &str = include_str!("driver.py.in");

/// The error of a call the emitter does not write (`api` at `loc`, in a kernel of `dialect`).
fn untraced(api: &str, loc: crate::error::SourceLoc, dialect: Dialect) -> NkiError {
    let beta1_only = !(api.starts_with("nl.") || api.starts_with("nisa."));
    let msg = match dialect {
        Dialect::Beta1 if beta1_only => format!(
            "'{api}' at {loc} has no NKI 0.8 form the emitter writes: the kernel is NKI Beta 1, \
             whose API no longer exists anywhere (Neuron 2.34 removed neuronxcc.nki). Port it \
             to the NKI 0.7 surface the emitter writes: tensors from nl::ndarray(shape, dtype, \
             buffer), nisa::dma_copy instead of nl::load / nl::store, destination-first nisa \
             instructions instead of value-returning ones, outputs allocated in \
             nl::shared_hbm and returned"
        ),
        Dialect::Beta1 => format!(
            "the emitter does not write '{api}' (at {loc}) as NKI 0.8: a Beta-1 form \
             (nisa::classic, value-returning nl calls) or a call it does not cover yet"
        ),
        _ => format!("the emitter does not write '{api}' (at {loc}) as NKI 0.8 yet"),
    };
    NkiError::new(ErrorKind::InvalidArgument, "emit", msg)
}

/// `name` as a Python identifier (other characters become `_`; a keyword gets a `_`).
fn python_name(name: &str) -> String {
    const KEYWORDS: &[&str] = &[
        "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
        "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global",
        "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return",
        "try", "while", "with", "yield", "nl", "nisa", "nki",
    ];
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    if KEYWORDS.contains(&s.as_str()) {
        s.push('_');
    }
    s
}

/// An emitted kernel: its NKI 0.8 module, its driver and the data they read.
#[derive(Clone, Debug)]
pub struct EmittedKernel {
    name: String,
    module: String,
    driver: String,
    inputs: Vec<HostTensor>,
    outputs: Vec<HostTensor>,
    /// The target and modelled latency (ns) of the traced launch, if it was modelled.
    modelled: Option<(crate::target::Target, f64)>,
}

impl EmittedKernel {
    /// Keeps the modelled latency of the traced launch's `profile` (a simulate launch's):
    /// [`EmittedKernel::write`] puts it beside the data (`<name>_data/nki_rs.json`, with the
    /// target), for a front end that models the emitted module to compare with.
    pub fn with_profile(mut self, profile: &crate::profile::Profile) -> EmittedKernel {
        self.modelled = Some((profile.target, profile.latency_ns));
        self
    }

    /// The kernel's Python name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The module's source (`<name>.py`).
    pub fn module(&self) -> &str {
        &self.module
    }

    /// The driver's source (`<name>_run.py`).
    pub fn driver(&self) -> &str {
        &self.driver
    }

    /// True when every input and output has values (the kernel was traced in execute or
    /// simulate mode): the driver has data to run on.
    pub fn has_data(&self) -> bool {
        self.inputs
            .iter()
            .chain(&self.outputs)
            .all(|t| t.values.is_some())
    }

    /// The checks that need no NKI package: the module and the driver compile
    /// (`python3 -m py_compile`, run on copies in a fresh temporary folder) and the module
    /// uses only names and keywords of [`API_08`]. An error names the file and Python's
    /// message; a host without `python3` is an error saying so.
    pub fn check(&self) -> Result<()> {
        check_api(&self.module)?;
        let io = |what: &str, e: std::io::Error| {
            NkiError::new(ErrorKind::Io, "emit", format!("{what}: {e}"))
        };
        let dir = std::env::temp_dir().join(format!(
            "nki-emit-check-{}-{}-{}",
            std::process::id(),
            self.name,
            CHECKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).map_err(|e| io("could not create a scratch folder", e))?;
        let files = [
            (format!("{}.py", self.name), &self.module),
            (format!("{}_run.py", self.name), &self.driver),
        ];
        let mut outcome = Ok(());
        for (file, text) in files {
            let path = dir.join(&file);
            std::fs::write(&path, text).map_err(|e| io("could not write a scratch file", e))?;
            let out = std::process::Command::new("python3")
                .args(["-B", "-m", "py_compile"])
                .arg(&path)
                .output()
                .map_err(|e| io("could not run python3 (needed to check the module)", e))?;
            if !out.status.success() && outcome.is_ok() {
                outcome = Err(NkiError::new(
                    ErrorKind::InvalidArgument,
                    "emit",
                    format!(
                        "{file} does not compile: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    ),
                ));
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        outcome
    }

    /// The number of lines of the module.
    pub fn module_lines(&self) -> usize {
        self.module.lines().count()
    }

    /// Writes `<name>.py`, `<name>_run.py` and `<name>_data/{in,out}_<tensor>.npy` into `dir`
    /// (created if missing); returns the paths written. Without data ([`has_data`]) only the
    /// module is written.
    ///
    /// [`has_data`]: EmittedKernel::has_data
    pub fn write(&self, dir: impl AsRef<Path>) -> Result<Vec<PathBuf>> {
        let dir = dir.as_ref();
        if !self.has_data() {
            std::fs::create_dir_all(dir).map_err(|e| {
                NkiError::new(
                    ErrorKind::Io,
                    "emit",
                    format!("could not create {}: {e}", dir.display()),
                )
            })?;
            let path = dir.join(format!("{}.py", self.name));
            crate::files::write(&path, "the emitted module", self.module.as_bytes())
                .map_err(|e| NkiError::new(ErrorKind::Io, "emit", e.to_string()))?;
            return Ok(vec![path]);
        }
        let io = |e: std::io::Error| NkiError::new(ErrorKind::Io, "emit", e.to_string());
        let data = dir.join(format!("{}_data", self.name));
        std::fs::create_dir_all(&data).map_err(|e| {
            io(std::io::Error::new(
                e.kind(),
                format!("could not create {}: {e}", data.display()),
            ))
        })?;
        let mut written = Vec::new();
        let mut put = |path: PathBuf, what: &str, bytes: &[u8]| -> Result<()> {
            crate::files::write(&path, what, bytes).map_err(io)?;
            written.push(path);
            Ok(())
        };
        put(
            dir.join(format!("{}.py", self.name)),
            "the emitted module",
            self.module.as_bytes(),
        )?;
        put(
            dir.join(format!("{}_run.py", self.name)),
            "the emitted driver",
            self.driver.as_bytes(),
        )?;
        if let Some((target, latency_ns)) = self.modelled {
            let json = format!(
                "{{\"target\": \"{}\", \"latency_ns\": {latency_ns:?}}}\n",
                target.name()
            );
            put(
                data.join("nki_rs.json"),
                "the modelled latency",
                json.as_bytes(),
            )?;
        }
        for (kind, ts) in [("in", &self.inputs), ("out", &self.outputs)] {
            for t in ts {
                let values = t.values.as_deref().unwrap_or_default();
                let bytes = npy::encode(&t.dims, t.dtype, values);
                put(
                    data.join(format!("{kind}_{}.npy", t.name)),
                    "an emitted array",
                    &bytes,
                )?;
            }
        }
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(module: &str) -> EmittedKernel {
        EmittedKernel {
            name: "k".into(),
            module: module.into(),
            driver: "import sys\n".into(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            modelled: None,
        }
    }

    #[test]
    fn the_check_compiles_the_module_and_reads_its_names() {
        kernel("import nki\n\n\n@nki.jit\ndef k():\n    pass\n")
            .check()
            .unwrap();
        let e = kernel("def k(:\n").check().unwrap_err().to_string();
        assert!(e.contains("k.py does not compile"), "{e}");
        let e = kernel("def k(a):\n    return nl.load(a)\n")
            .check()
            .unwrap_err()
            .to_string();
        assert!(e.contains("'nl.load' is not NKI 0.8 API"), "{e}");
    }

    #[test]
    fn python_names_are_identifiers_and_not_keywords() {
        assert_eq!(python_name("lhsT"), "lhsT");
        assert_eq!(python_name("in"), "in_");
        assert_eq!(python_name("2x-y"), "_2x_y");
    }
}
