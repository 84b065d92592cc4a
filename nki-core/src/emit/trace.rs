//! The emit trace: what a kernel's `nl`/`nisa` calls were, at the API level, while an emit
//! launch runs (see [`crate::emit`]). The instruction records lack what printing a call needs
//! (views as slices, keyword options, loop structure); this module holds it as plain data.
//!
//! Recording costs nothing when no emit launch runs: the op handle reads one flag of its
//! launch facts (`OpEnv::traces`) and only then builds a [`Call`]. The events are pushed by
//! the op handle (`isa::op`), which reads the loop frames from the instance context: this
//! module depends on no part of the runtime.

use crate::access::Ap;
use crate::dialect::Dialect;
use crate::dtype::DType;
use crate::error::SourceLoc;
use crate::record::MemKind;
use std::sync::Mutex;

/// Which tensor a view reads or writes: an on-chip tile (by tile id) or an HBM tensor (by
/// storage id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum TensorId {
    /// An on-chip tile.
    Tile(u64),
    /// An HBM tensor (a kernel parameter or a tensor the kernel allocated in HBM).
    Hbm(u64),
}

/// A view operand of a call: its tensor and the access pattern over the tensor's row-major
/// elements.
#[derive(Clone, Debug)]
pub(crate) struct View {
    /// The tensor viewed.
    pub(crate) tensor: TensorId,
    /// The elements it covers.
    pub(crate) ap: Ap,
    /// Why the view cannot be printed as a slice or `.ap()` of its tensor, if it cannot (a
    /// reinterpreting or an indirect view).
    pub(crate) unprintable: Option<&'static str>,
    /// An HBM tensor's storage (the emitter reads its name, shape and values), type-erased:
    /// this module names no part of the runtime.
    pub(crate) storage: Option<Storage>,
}

/// A tensor's storage, kept by the trace for the emitter (an `Arc<HbmStorage>`).
pub(crate) type Storage = std::sync::Arc<dyn std::any::Any + Send + Sync>;

/// One argument of a call.
#[derive(Clone, Debug)]
pub(crate) enum Arg {
    /// A tensor view.
    View(View),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A bool.
    Bool(bool),
    /// A Python expression naming an NKI constant (`nl.add`, `nisa.scalar_engine`).
    Const(String),
}

/// A traced `nl`/`nisa` call: its NKI 0.8 name and its keyword arguments in order (the
/// defaults left out).
#[derive(Clone, Debug)]
pub(crate) struct Call {
    /// The 0.8 name (`nisa.dma_copy`).
    pub(crate) api: &'static str,
    /// Keyword arguments.
    pub(crate) args: Vec<(&'static str, Arg)>,
    /// The tensor a value-returning call (`nl.broadcast_to`) allocates and returns: its id,
    /// memory and dimensions.
    pub(crate) returns: Option<(TensorId, MemKind, Vec<usize>)>,
}

impl Call {
    /// A call of `api` without arguments yet.
    pub(crate) fn new(api: &'static str) -> Call {
        Call {
            api,
            args: Vec::new(),
            returns: None,
        }
    }

    /// Notes that the call returns the new tensor `tensor` (in `mem`, of `dims`).
    pub(crate) fn returns(mut self, tensor: TensorId, mem: MemKind, dims: &[usize]) -> Call {
        self.returns = Some((tensor, mem, dims.to_vec()));
        self
    }

    /// Adds keyword `name = arg`.
    pub(crate) fn arg(mut self, name: &'static str, arg: Arg) -> Call {
        self.args.push((name, arg));
        self
    }

    /// Adds keyword `name = arg` when `arg` is `Some`.
    pub(crate) fn opt(self, name: &'static str, arg: Option<Arg>) -> Call {
        match arg {
            Some(a) => self.arg(name, a),
            None => self,
        }
    }
}

/// A device loop kind, as NKI 0.8 spells its iterator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LoopKind {
    /// `nl.affine_range`.
    Affine,
}

impl LoopKind {
    /// The NKI 0.8 iterator.
    pub(crate) fn api(self) -> &'static str {
        match self {
            LoopKind::Affine => "nl.affine_range",
        }
    }
}

/// One traced event, with the loop iterations it happened in (`(activation, iteration)`,
/// outermost first).
#[derive(Clone, Debug)]
pub(crate) struct Event {
    /// The loop frames.
    pub(crate) frames: Vec<(u32, u32)>,
    /// The call site.
    pub(crate) loc: SourceLoc,
    /// What happened.
    pub(crate) what: What,
}

/// What a traced event is.
#[derive(Clone, Debug)]
pub(crate) enum What {
    /// A loop activation began (`trips` iterations of `kind`).
    Loop {
        /// The activation id (as in the frames).
        activation: u32,
        /// Its trip count.
        trips: u64,
        /// Its kind.
        kind: LoopKind,
    },
    /// A tensor was allocated (`nl.ndarray`).
    Alloc {
        /// The tensor.
        tensor: TensorId,
        /// Its memory.
        mem: MemKind,
        /// True for a tensor in shared HBM (a kernel output).
        shared: bool,
        /// Its dtype.
        dtype: DType,
        /// Its dimensions.
        dims: Vec<usize>,
        /// An HBM tensor's storage.
        storage: Option<Storage>,
    },
    /// An instruction or language call.
    Call(Call),
    /// An op issued an instruction without a traced call: the kernel uses API the emitter
    /// does not write (a Beta-1 form, or an instruction not covered yet).
    Untraced {
        /// The op's name.
        api: &'static str,
    },
}

/// Where one emit launch's events go (shared by the instances of the launch: each event is
/// tagged with its instance).
#[derive(Debug, Default)]
pub(crate) struct Sink {
    state: Mutex<SinkState>,
}

#[derive(Debug, Default)]
struct SinkState {
    /// The launch's dialect and number of instances.
    launch: Option<(Dialect, usize)>,
    events: Vec<(u64, Event)>,
    /// The op whose call was traced last (name, line), per instance: its issues are expected.
    traced: Vec<(u64, &'static str, SourceLoc)>,
}

impl Sink {
    /// Notes the launch's dialect and number of program instances.
    pub(crate) fn set_launch(&self, dialect: Dialect, instances: usize) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.launch = Some((dialect, instances));
    }

    /// The launch's dialect and number of instances, once it ran.
    pub(crate) fn launch(&self) -> Option<(Dialect, usize)> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).launch
    }

    /// Adds `event` of `instance`.
    pub(crate) fn push(&self, instance: u64, event: Event) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let What::Call(c) = &event.what {
            let (api, loc) = (c.api, event.loc);
            s.traced.retain(|t| t.0 != instance);
            s.traced.push((instance, api, loc));
            // An op that traces its call after issuing (`nl.zeros`): the issues of its line
            // just before were its own.
            let ours = |e: &(u64, Event)| e.0 == instance && e.1.loc == loc;
            let start = s.events.iter().rposition(|e| !ours(e)).map_or(0, |i| i + 1);
            let tail = s.events.split_off(start);
            let kept = tail
                .into_iter()
                .filter(|e| !matches!(e.1.what, What::Untraced { .. }));
            s.events.extend(kept);
        }
        s.events.push((instance, event));
    }

    /// Marks that `instance`'s op (`api` at `loc`) issued an instruction: an op whose call
    /// was not traced leaves an [`What::Untraced`] event.
    pub(crate) fn issued(
        &self,
        instance: u64,
        api: &'static str,
        loc: SourceLoc,
        frames: Vec<(u32, u32)>,
    ) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let known = s
            .traced
            .iter()
            .any(|t| t.0 == instance && t.2 == loc && (t.1 == api || same_op(t.1, api)));
        if !known {
            let event = Event {
                frames,
                loc,
                what: What::Untraced { api },
            };
            s.events.push((instance, event));
        }
    }

    /// The events so far, in the order they happened.
    pub(crate) fn take(&self) -> Vec<(u64, Event)> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.traced.clear();
        std::mem::take(&mut s.events)
    }
}

/// True when op name `issued` is the internal name of the traced call `traced` (an
/// `nl.zeros` issues as `full`), or its 0.7 name (`nisa.sendrecv` is written as 0.8's
/// `nki.lnc.sendrecv`).
fn same_op(traced: &str, issued: &str) -> bool {
    (traced == "nisa.memset" && issued == "full")
        || traced
            .strip_prefix("nki.lnc.")
            .is_some_and(|t| issued.strip_prefix("nisa.") == Some(t))
}
