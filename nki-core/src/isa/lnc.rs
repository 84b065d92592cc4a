//! The two physical cores of a logical NeuronCore (LNC=2, trn2 and trn3): `nisa::sendrecv`
//! (tiles between the two cores) and `nisa::core_barrier` (both cores wait for each other).
//!
//! A launch of [`Grid::lnc(2)`](crate::spmd::Grid::lnc) (the same grid as Beta 1's `[nc(2)]`)
//! runs the kernel once per physical core, each on its own host thread, with
//! `nl::program_id(0)` the core index. The `k`-th `sendrecv`/`core_barrier` call of one core
//! meets the `k`-th call of the other (0.7 requires both cores to take the same control flow):
//! the call waits on the host until the other core reaches its own, in every mode. A call one
//! core makes and the other never does (it finished its kernel first) fails the launch with an
//! [`ErrorKind::Deadlock`] error naming the call's line, never a hang; two cores meeting at
//! different kinds of call fail with [`ErrorKind::Synchronization`].
//!
//! Timing: each call leaves a *signal* record on its core (a barrier's semaphore write,
//! [`Opcode::CoreBarrier`], or a sendrecv's SBUF-to-SBUF DMA) and a *wait* record
//! ([`Opcode::CoreWait`], no engine time) that the timing model starts no earlier than the
//! other core's signal record ends: the two cores' timelines are modelled together and each
//! waits for the other there. What comes after the call on a core waits for the wait record
//! through the data it touches (the barrier's `data`, the sendrecv's `dst`).

use super::lnc_state::{Arrival, Link, Pair, Payload, SyncCall};
use super::op::Op;
use crate::builder::instruction;
use crate::context;
use crate::emit::trace::{Arg, Call};
use crate::error::ErrorKind;
use crate::hbm::{Hbm, HbmView};
use crate::math::AluOp;
use crate::record::{DmaDims, Engine, MemKind, Opcode, Region};
use crate::tensor::{Tensor, TensorRef};
use crate::tile::{Tile, TileRef};
use std::sync::Arc;

/// Data a barrier orders: a tile or an HBM tensor (what the cores exchange through).
pub struct BarrierData<'a>(TensorRef<'a>);

impl<'a> From<TileRef<'a>> for BarrierData<'a> {
    fn from(t: TileRef<'a>) -> Self {
        BarrierData(TensorRef::Chip(t))
    }
}
impl<'a> From<&'a Tile> for BarrierData<'a> {
    fn from(t: &'a Tile) -> Self {
        BarrierData(TensorRef::Chip(t.into()))
    }
}
impl From<HbmView> for BarrierData<'_> {
    fn from(v: HbmView) -> Self {
        BarrierData(TensorRef::Hbm(v))
    }
}
impl From<&HbmView> for BarrierData<'_> {
    fn from(v: &HbmView) -> Self {
        BarrierData(TensorRef::Hbm(v.clone()))
    }
}
impl<'a, T: crate::dtype::Element> From<&'a Hbm<T>> for BarrierData<'a> {
    fn from(h: &'a Hbm<T>) -> Self {
        BarrierData(TensorRef::Hbm(h.view()))
    }
}
impl<'a> From<TensorRef<'a>> for BarrierData<'a> {
    fn from(t: TensorRef<'a>) -> Self {
        BarrierData(t)
    }
}
impl<'a> From<&'a Tensor> for BarrierData<'a> {
    fn from(t: &'a Tensor) -> Self {
        BarrierData(t.into())
    }
}

fn region(t: &TensorRef) -> Region {
    match t {
        TensorRef::Chip(t) => t.region(),
        TensorRef::Hbm(v) => v.region(),
    }
}

/// This core's index and the launch's meeting point; fails `ins` outside an LNC=2 launch.
fn pair_of(ins: &Op) -> (usize, Arc<Pair>) {
    ins.require_07(|| ins.api.to_string());
    let found = ins.with_ctx(|c| (c.nc, c.state.get::<Link>().0.clone(), c.grid.clone()));
    match found {
        (nc, Some(p), _) => (nc, p),
        (_, None, grid) => ins.fail(
            ErrorKind::InvalidGrid,
            format!(
                "{} synchronises the two physical cores of a logical NeuronCore: launch the \
                 kernel with Grid::lnc(2), or an #[nki_kernel(nki = \"0.7\")] kernel as k[2] \
                 (one instance per core; this launch's grid is {grid:?}){}",
                ins.api,
                if ins.api == "nki.lnc.core_barrier" {
                    "; at LNC=1 (NKI 0.8), where each physical core of an HBM stack is its own \
                     logical NeuronCore, run the two as devices of a MeshLaunch::lnc(1) launch \
                     on trn2 or trn3"
                } else {
                    ""
                }
            ),
        ),
    }
}

/// Meets the other core at this core's next synchronising call: records `ready` (when the
/// call receives into `ready`: a zero-cost wait on Sync that writes it, so it comes after this
/// core's earlier reads and writes of it, and the other core's signal waits for it), then
/// `signal`, then waits for the other core's call of the same number (or fails), then records
/// the wait (writing `waits`). Returns the other core's payload.
#[allow(clippy::too_many_arguments)]
fn meet(
    ins: &Op,
    me: usize,
    pair: &Pair,
    payload: Option<Payload>,
    ready: Option<Region>,
    signal: impl FnOnce(),
    waits: Region,
    wait_engine: Engine,
) -> Option<Payload> {
    if crate::shadow::active() {
        // A branch the launch does not take: checked, but it meets no other core.
        return None;
    }
    let r = ready.map(|reg| {
        let r = ins.with_ctx(|c| c.records.len());
        ins.issue(
            &[],
            || {},
            || {
                ins.record(Engine::Sync, Opcode::CoreWait)
                    .size(1, 1)
                    .writes([reg])
                    .done()
            },
        );
        r
    });
    let s = ins.with_ctx(|c| c.records.len());
    signal();
    let o = 1 - me;
    // The whole meeting (the pair's lock taken, waited on, let go) runs inside the front
    // end's wait hook: a front end that lets go of its interpreter lock there takes it back
    // only once the pair's lock is free again.
    let got = crate::blocking::wait(|| {
        let mut st = pair.lock();
        let k = st.arrivals[me].len();
        st.arrivals[me].push(Arrival {
            api: ins.api,
            loc: ins.loc,
            payload: None,
        });
        if let Some(a) = st.arrivals[me].last_mut() {
            a.payload = payload;
        }
        pair.cv.notify_all();
        loop {
            if st.arrivals[o].len() > k {
                let theirs = &mut st.arrivals[o][k];
                if theirs.api != ins.api {
                    let (api, loc) = (theirs.api, theirs.loc);
                    drop(st);
                    ins.fail(
                        ErrorKind::Synchronization,
                        format!(
                            "call {} of the cores' synchronising calls: core {me} is at {} \
                             (line {}) but core {o} is at {api} (line {}): both cores of a \
                             logical NeuronCore must take the same control flow",
                            k + 1,
                            ins.api,
                            ins.loc.line,
                            loc.line
                        ),
                    );
                }
                break theirs.payload.take();
            }
            match st.finished[o] {
                Some(true) => {
                    drop(st);
                    ins.fail(
                        ErrorKind::Deadlock,
                        format!(
                            "deadlock: core {me} waits at this {} (its call {} of \
                             sendrecv/core_barrier), but core {o} finished its kernel after \
                             {k} such call{} without reaching it",
                            ins.api,
                            k + 1,
                            if k == 1 { "" } else { "s" }
                        ),
                    );
                }
                // The other core failed: its error is the launch's; this one stops.
                Some(false) => std::panic::panic_any(context::Cancelled),
                None => {}
            }
            st = pair.cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    });
    // What either core did before the meeting comes before what either does after it
    // (the HBM output checks order the two cores' accesses by it).
    ins.with_ctx(|c| c.met_other_core());
    let w = ins.with_ctx(|c| c.records.len());
    ins.issue(
        &[],
        || {},
        || {
            ins.record(wait_engine, Opcode::CoreWait)
                .size(1, 1)
                .writes([waits])
                .done()
        },
    );
    if ins.env.records {
        let mut st = pair.lock();
        st.syncs[me].push(SyncCall {
            ready: r,
            signal: s,
            wait: w,
        });
    }
    got
}

/// Both physical cores of the logical NeuronCore wait here for each other (NKI 0.7
/// `nisa.core_barrier(data, cores=(0, 1), engine=...)`); `data` is the tensor the cores
/// exchange through (what comes after the barrier on each core and touches `data` waits for
/// it). `engine` is the engine that signals and waits (NKI's default: GpSimdE).
///
/// Modelled as a semaphore write to the other core on `engine` (the documented cross-engine
/// semaphore-to-start latency, an assumption: see `timing::cost`), then a wait for the other
/// core's write. Needs a [`Grid::lnc(2)`](crate::spmd::Grid::lnc) launch.
#[deprecated(note = "NKI 0.8 deprecates nisa.core_barrier: use nki_core::lnc::core_barrier")]
#[track_caller]
pub fn core_barrier<'a>(data: impl Into<BarrierData<'a>>, engine: impl Into<Option<Engine>>) {
    barrier(&Op::begin("nisa.core_barrier"), data.into(), engine.into());
}

/// The barrier of [`core_barrier`] as op `ins` (its name is the call the user made).
pub(crate) fn barrier(ins: &Op, data: BarrierData, engine: Option<Engine>) {
    let ins = *ins;
    let engine = engine.unwrap_or(Engine::GpSimd);
    ins.engine_in(
        engine,
        &[Engine::GpSimd, Engine::Vector, Engine::Scalar, Engine::Sync],
    );
    let data = data.0;
    let reg = region(&data);
    let lnc2 = ins.with_ctx(|c| c.state.get::<Link>().0.is_some());
    if let (false, "nki.lnc.core_barrier", Some(meet_stack)) =
        (lnc2, ins.api, super::lnc_state::stack_barrier())
    {
        // LNC=1: the other core of the HBM stack is another device of the mesh launch.
        ins.require_07(|| ins.api.to_string());
        meet_stack(ins.api, ins.loc);
        return;
    }
    let (me, pair) = pair_of(&ins);
    ins.trace(|| {
        use super::trace_args as ta;
        let data = match &data {
            TensorRef::Chip(t) => ta::tile(t),
            TensorRef::Hbm(v) => ta::hbm(v),
        };
        Call::new("nki.lnc.core_barrier").arg("data", data).opt(
            "engine",
            (engine != Engine::GpSimd).then(|| ta::engine(engine)),
        )
    });
    meet(
        &ins,
        me,
        &pair,
        None,
        None,
        || {
            ins.issue(
                &[],
                || {},
                || {
                    ins.record(engine, Opcode::CoreBarrier)
                        .size(1, 1)
                        .reads([reg])
                        .done()
                },
            )
        },
        reg,
        engine,
    );
}

/// The engine that moves a [`sendrecv_on`]'s tile (NKI 0.7 `nki.isa.dma_engine`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DmaEngine {
    /// The shared DMA engines, with the cores' barrier synchronisation (0.7's default):
    /// an SBUF-to-SBUF DMA with the DMA cost.
    #[default]
    Dma,
    /// GpSimdE's integrated DMA engines, "for low-latency SB-to-SB swaps in LNC=2" (0.7):
    /// an instruction on this core's GpSimdE that takes its start-up plus the bytes at
    /// [`TargetSpec::gpsimd_dma_bytes_per_ns`](crate::target::TargetSpec::gpsimd_dma_bytes_per_ns)
    /// (trn2 and trn3). No latency figure is published for it: none more is charged \[A\].
    GpsimdDma,
}

instruction! {
    /// Sends `src` to the other physical core and receives the other core's `src` into `dst`
    /// (NKI 0.7 `nisa.sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id)`): with two
    /// cores, `send_to_rank` and `recv_from_rank` must both be the other core's index. `src` and
    /// `dst` are SBUF tiles with the same number of elements (the other core's values are cast to
    /// `dst`'s dtype).
    ///
    /// Modelled as an SBUF-to-SBUF DMA of `src`'s bytes on this core (its DMA cost) and a wait
    /// that ends no earlier than the other core's DMA: `dst` is written when the other core's
    /// data has arrived. The other core's DMA writes this core's `dst`, so it starts only once
    /// this core's earlier reads and writes of `dst` are done (a zero-cost ready point on Sync
    /// that the other core's DMA waits for: the write-after-read and write-after-write order
    /// across the cores). Needs a [`Grid::lnc(2)`](crate::spmd::Grid::lnc) launch.
    #[deprecated(note = "NKI 0.8 deprecates nisa.sendrecv: use nki_core::lnc::sendrecv")]
    pub fn sendrecv<'s, 'd>(
        src: impl Into<TileRef<'s>>, dst: impl Into<TileRef<'d>>, send_to_rank: usize,
        recv_from_rank: usize,
    ) {
        #[allow(deprecated)]
        sendrecv_on(src, dst, send_to_rank, recv_from_rank, DmaEngine::Dma);
    }
}

instruction! {
    /// [`sendrecv`] with the engine that moves the tile chosen (NKI 0.7 `nisa.sendrecv(..,
    /// dma_engine=)`): [`DmaEngine::Dma`] as `sendrecv`, or [`DmaEngine::GpsimdDma`], GpSimdE's
    /// integrated DMA (trn2 and trn3; an error on a target without it).
    #[deprecated(note = "NKI 0.8 deprecates nisa.sendrecv: use nki_core::lnc::sendrecv")]
    pub fn sendrecv_on<'s, 'd>(
        src: into TileRef<'s>, dst: into TileRef<'d>, send_to_rank: usize, recv_from_rank: usize,
        dma_engine: DmaEngine,
    ) as ins = "nisa.sendrecv" {
        exchange(&ins, src, dst, (send_to_rank, recv_from_rank), dma_engine, None);
    }
}

/// [`sendrecv_on`] on its converted operands; with `reduce`, `dst` receives `reduce(src, the
/// other core's src)` (NKI 0.8 `nki.lnc.sendrecv_compute`, the DMA engines' reduction)
/// instead of the other core's tile.
/// The emit trace's call of an exchange (`sendrecv`, 0.7's or 0.8's, or `sendrecv_compute`
/// with `reduce`), as NKI 0.8's `nki.lnc` spells it (the defaults left out).
fn traced_exchange(
    src: &TileRef,
    dst: &TileRef,
    (send_to_rank, recv_from_rank): (usize, usize),
    dma_engine: DmaEngine,
    reduce: Option<AluOp>,
) -> Call {
    use super::trace_args as ta;
    let api = match reduce {
        Some(_) => "nki.lnc.sendrecv_compute",
        None => "nki.lnc.sendrecv",
    };
    Call::new(api)
        .arg("src", ta::tile(src))
        .arg("dst", ta::tile(dst))
        .arg("send_to_rank", Arg::Int(send_to_rank as i64))
        .arg("recv_from_rank", Arg::Int(recv_from_rank as i64))
        .opt("reduce_op", reduce.map(ta::alu))
        .opt(
            "dma_engine",
            (dma_engine == DmaEngine::GpsimdDma)
                .then(|| Arg::Const("nisa.dma_engine.gpsimd_dma".to_string())),
        )
}

#[track_caller]
pub(crate) fn exchange(
    ins: &Op,
    src: TileRef,
    dst: TileRef,
    ranks: (usize, usize),
    dma_engine: DmaEngine,
    reduce: Option<AluOp>,
) {
    let (send_to_rank, recv_from_rank) = ranks;
    ins.operand("src", &src);
    ins.operand("dst", &dst);
    ins.memory("src", &src, &[MemKind::Sbuf]);
    ins.memory("dst", &dst, &[MemKind::Sbuf]);
    let (me, pair) = pair_of(ins);
    let o = 1 - me;
    if send_to_rank != o || recv_from_rank != o {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "send_to_rank={send_to_rank}, recv_from_rank={recv_from_rank} on core {me}: \
                 the two cores of a logical NeuronCore exchange with each other (both must be \
                 {o} here)"
            ),
        );
    }
    if dma_engine == DmaEngine::GpsimdDma && ins.target().spec().gpsimd_dma_bytes_per_ns <= 0.0 {
        ins.fail(
            ErrorKind::InvalidArgument,
            format!(
                "dma_engine=gpsimd_dma: {} has no GpSimd integrated DMA (trn2 and trn3 have one)",
                ins.target()
            ),
        );
    }
    let payload = ins.executes().then(|| Payload {
        dtype: src.dtype(),
        shape: src.shape().to_vec(),
        slots: src.gather_slots(ins.api, ins.loc),
    });
    let bytes = (src.shape().iter().product::<usize>() * src.dtype().size()) as u64;
    let dims = DmaDims {
        src: MemKind::Sbuf,
        dst: MemKind::Sbuf,
        bytes,
        partitions: src.partitions() as u32,
        start_partition: src.start_partition() as u32,
        chunk_bytes: (src.free_size() * src.dtype().size()) as u64,
    };
    let src_reg = src.region();
    let mine = match (reduce, ins.executes()) {
        (Some(_), true) => Some(src.gather(ins.api, ins.loc)),
        _ => None,
    };
    ins.trace(|| traced_exchange(&src, &dst, ranks, dma_engine, reduce));
    let got = meet(
        ins,
        me,
        &pair,
        payload,
        Some(dst.region()),
        || {
            ins.issue(
                &[],
                || {},
                || {
                    let (p, f) = (src.partitions() as u32, src.free_size() as u32);
                    match dma_engine {
                        DmaEngine::Dma => ins
                            .record(Engine::Dma, Opcode::DmaCopy)
                            .size(p, f)
                            .dtypes(src.dtype(), src.dtype())
                            .dma(dims)
                            .reads([src_reg])
                            .done(),
                        DmaEngine::GpsimdDma => ins
                            .record(Engine::GpSimd, Opcode::DmaCopy)
                            .size(p, f)
                            .dtypes(src.dtype(), src.dtype())
                            .reads([src_reg])
                            .done(),
                    }
                },
            )
        },
        dst.region(),
        Engine::Sync,
    );
    let n_dst: usize = dst.shape().iter().product();
    if let Some(p) = got {
        let n_src: usize = p.shape.iter().product();
        if n_src != n_dst {
            ins.fail(
                ErrorKind::ShapeMismatch,
                format!(
                    "core {o} sends src of shape {:?} ({n_src} elements) but core {me}'s dst \
                     has shape {:?} ({n_dst} elements)",
                    p.shape,
                    dst.shape()
                ),
            );
        }
        match (reduce, mine) {
            (Some(op), Some(mine)) => {
                if mine.len() != n_dst {
                    ins.fail(
                        ErrorKind::ShapeMismatch,
                        format!(
                            "src has {} elements but dst {:?} has {n_dst}: the reduction \
                             writes one element of dst per element of src",
                            mine.len(),
                            dst.shape()
                        ),
                    );
                }
                let peer: Vec<f32> = p.slots.iter().map(|&s| p.dtype.value(s)).collect();
                let out = mine
                    .iter()
                    .zip(&peer)
                    .map(|(&a, &b)| op.eval(a, b))
                    .collect();
                dst.scatter(out);
            }
            _ => {
                let mut slots = p.slots;
                p.dtype.cast_slots(dst.dtype(), &mut slots);
                dst.scatter_slots(slots);
            }
        }
    } else if !ins.executes() {
        dst.mark_written();
    }
}
