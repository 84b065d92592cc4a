//! `nki::lnc` (NKI 0.8): data exchange, reduction and synchronisation between the two physical
//! NeuronCores that share an HBM stack, the successor of `nisa.core_barrier` /
//! `nisa.sendrecv` (deprecated in 0.8, still provided). The calls meet, time and check as
//! [`crate::isa::lnc`] describes (the `k`-th call of one core meets the `k`-th call of the
//! other; a call one core never reaches is a `Deadlock` error naming its line). What 0.8
//! changed:
//!
//! - `sendrecv` has no `pipe_id`; it and `sendrecv_compute` take a DMA QoS `priority` 0
//!   (highest) to 3 (lowest), on NeuronCore-v4 (trn3) only, and not with
//!   `dma_engine=gpsimd_dma` (the checks `dma_copy`'s priority has; the arbitration itself is
//!   not modelled, so a priority does not change the modelled time);
//! - `sendrecv_compute` sends `src`, receives the other core's and writes `reduce_op(src,
//!   peer)` into `dst` (add, maximum or minimum), with the DMA engines' reduction: costed as
//!   the transfer [A: no public figure for the reduction];
//! - `core_barrier` also synchronises the two cores at LNC=1, where each is its own logical
//!   NeuronCore running its own kernel: in nki-rs, two devices of a mesh launch at LNC=1
//!   ([`MeshLaunch::lnc(1)`](crate::mesh::MeshLaunch::lnc), trn2 and trn3), each device's
//!   barrier meeting the one of the device on the other core of its HBM stack (timed as a
//!   mesh semaphore signal and wait). A launch of one logical NeuronCore at LNC=1 (`k[1]`)
//!   has no other core to meet: there the call is an error saying so.

use super::lnc::{barrier, exchange, BarrierData, DmaEngine};
use super::op::Op;
use crate::error::ErrorKind;
use crate::math::AluOp;
use crate::record::Engine;
use crate::tile::TileRef;

/// Both physical cores sharing the HBM stack wait here for each other (NKI 0.8
/// `nki.lnc.core_barrier(data, cores=(0, 1), engine)`); `data` is the shared tensor they
/// exchange through, `engine` the engine that signals and waits (`None`: GpSimdE). Needs an
/// LNC=2 launch (`k[2]`, [`Grid::lnc(2)`](crate::spmd::Grid::lnc)), or a mesh launch at
/// LNC=1 ([`MeshLaunch::lnc(1)`](crate::mesh::MeshLaunch::lnc)), where it meets the device on
/// the other core of the HBM stack; see the module docs.
#[track_caller]
pub fn core_barrier<'a>(data: impl Into<BarrierData<'a>>, engine: impl Into<Option<Engine>>) {
    barrier(
        &Op::begin("nki.lnc.core_barrier"),
        data.into(),
        engine.into(),
    );
}

/// The options of [`sendrecv`] and [`sendrecv_compute`] (NKI 0.8's `dma_engine=` and
/// `priority=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendRecvOpts {
    /// The engine that moves the tile ([`DmaEngine::Dma`] by default; `sendrecv` only).
    pub dma_engine: DmaEngine,
    /// The DMA QoS class, 0 (highest) to 3 (lowest), trn3 only (`None`: the default).
    pub priority: Option<u8>,
}

impl SendRecvOpts {
    /// The shared DMA engines, no priority.
    pub fn new() -> SendRecvOpts {
        SendRecvOpts::default()
    }

    /// Moves the tile with `e` (NKI `dma_engine=`).
    pub fn dma_engine(mut self, e: DmaEngine) -> SendRecvOpts {
        self.dma_engine = e;
        self
    }

    /// Sets the DMA QoS priority (NKI `priority=`, 0..=3, trn3).
    pub fn priority(mut self, p: u8) -> SendRecvOpts {
        self.priority = Some(p);
        self
    }
}

/// The exchange of op `ins` with 0.8's options: checks the priority of `opts`, then sends
/// and receives (reducing with `reduce`, if given).
fn send_with(
    ins: &Op,
    (src, dst): (TileRef, TileRef),
    ranks: (usize, usize),
    opts: SendRecvOpts,
    reduce: Option<AluOp>,
) {
    if let Some(p) = opts.priority {
        let why = match opts.dma_engine {
            DmaEngine::GpsimdDma => {
                Some("not allowed with dma_engine=gpsimd_dma (it takes priority=None)".to_string())
            }
            DmaEngine::Dma => super::dma::priority_problem(ins, p),
        };
        if let Some(why) = why {
            ins.fail(
                ErrorKind::InvalidArgument,
                format!("priority {p} of '{}' is {why}", ins.api),
            );
        }
    }
    exchange(ins, src, dst, ranks, opts.dma_engine, reduce);
}

/// Sends `src` to the other physical core and receives its `src` into `dst` (NKI 0.8
/// `nki.lnc.sendrecv(src, dst, send_to_rank, recv_from_rank, dma_engine, priority)`; no
/// `pipe_id`): `nisa::sendrecv_on`'s exchange with 0.8's options (`None` for the defaults).
#[track_caller]
pub fn sendrecv<'s, 'd>(
    src: impl Into<TileRef<'s>>,
    dst: impl Into<TileRef<'d>>,
    send_to_rank: usize,
    recv_from_rank: usize,
    opts: impl Into<Option<SendRecvOpts>>,
) {
    let ins = Op::begin("nki.lnc.sendrecv");
    let opts = opts.into().unwrap_or_default();
    let ranks = (send_to_rank, recv_from_rank);
    send_with(&ins, (src.into(), dst.into()), ranks, opts, None);
}

/// Sends `src` to the other physical core, receives the other core's `src` and writes
/// `reduce_op(src, peer)` into `dst` (NKI 0.8 `nki.lnc.sendrecv_compute(src, dst,
/// send_to_rank, recv_from_rank, reduce_op, priority)`): `reduce_op` is add, maximum or
/// minimum, computed in fp32 and rounded once to `dst`'s dtype; `src` and `dst` are SBUF
/// tiles with the same number of elements (0.8 also takes two private-HBM tensors: not in
/// nki-rs, an error). `priority` as in [`sendrecv`] (the shared DMA engines move the data).
#[track_caller]
pub fn sendrecv_compute<'s, 'd>(
    src: impl Into<TileRef<'s>>,
    dst: impl Into<TileRef<'d>>,
    send_to_rank: usize,
    recv_from_rank: usize,
    reduce_op: AluOp,
    priority: Option<u8>,
) {
    let ins = Op::begin("nki.lnc.sendrecv_compute");
    ins.require_alu(
        "reduce_op",
        reduce_op,
        &[AluOp::Add, AluOp::Maximum, AluOp::Minimum],
    );
    let opts = SendRecvOpts {
        dma_engine: DmaEngine::Dma,
        priority,
    };
    let ranks = (send_to_rank, recv_from_rank);
    send_with(&ins, (src.into(), dst.into()), ranks, opts, Some(reduce_op));
}
