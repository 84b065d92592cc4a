//! The two physical NeuronCores of an HBM stack at LNC=1: NKI 0.8's `nki.lnc.core_barrier`
//! "also works at LNC=1 between the two physical cores of an HBM stack", where each core is
//! its own logical NeuronCore running its own kernel. In nki-rs those are two devices of a
//! [`MeshLaunch::lnc(1)`](super::MeshLaunch::lnc) launch: the barrier of device `d` meets the
//! one of the device on the other core of its stack (layout slot `slot(d) ^ 1`), the `k`-th
//! call of each meeting the `k`-th of the other.
//!
//! Timing: each device signals the other's barrier semaphore and waits for its own, as a
//! mesh semaphore (the kernel code before the barrier is one segment, the signal lands after
//! the route's latency between the two cores: on one chip, the DMA descriptor and
//! semaphore-to-start latency, the figure the LNC=2 barrier costs too). A barrier whose
//! partner never calls it is a deadlock error naming both devices' waits.

use super::device::with_device;
use super::dma::{signal, wait};
use super::links::Topology;
use super::sem::SemKey;
use crate::context::raise;
use crate::error::{ErrorKind, NkiError, Result, SourceLoc};
use crate::target::Target;

/// Physical NeuronCores sharing one HBM stack: trn1 has 2 NeuronCore-v2 and 2 stacks per
/// chip [hardware.md, E S1,S8]; trn2 8 NeuronCore-v3 on 4 stacks, "one stack shared by 2
/// NCs" [E S10,S12]; trn3 8 NeuronCore-v4 on 4 stacks [E S11].
pub(crate) fn cores_per_stack(target: Target) -> usize {
    match target {
        Target::Trn1 => 1,
        Target::Trn2 | Target::Trn3 => 2,
    }
}

/// The layout of a mesh launch on `target` at LNC `lnc` (`None`: the target's default):
/// at LNC=1 on a target whose HBM stacks hold two cores, each physical core is a device (the
/// target's logical devices per chip doubled). An LNC other than 1 or 2, or LNC=2 on a target
/// whose cores do not pair (trn1), is an [`ErrorKind::InvalidGrid`] error.
pub(crate) fn topology_at(target: Target, lnc: Option<u8>) -> Result<Topology> {
    let t = Topology::of(target);
    let pairs = cores_per_stack(target) == 2;
    match lnc {
        None => Ok(t),
        Some(2) if pairs => Ok(t),
        Some(1) if pairs => {
            let n = t.spec().devices_per_chip * 2;
            Ok(t.devices_per_chip(n))
        }
        Some(1) => Ok(t),
        Some(n) => Err(NkiError::new(
            ErrorKind::InvalidGrid,
            "MeshLaunch::lnc",
            format!(
                "lnc({n}) on {target}: {}",
                match n {
                    2 => "its NeuronCores each have their own HBM stack, so LNC=1 only",
                    _ => "a logical NeuronCore is 1 or 2 physical cores",
                }
            ),
        )),
    }
}

/// The LNC=1 `core_barrier` of the running device (op `api` at `loc`): signals the barrier
/// semaphore of the device on the other core of its HBM stack and waits for its own.
pub(crate) fn barrier(api: &'static str, loc: SourceLoc) {
    let (me, peer, k) = with_device(api, loc, |d| {
        let links = &d.shared.links;
        let other = links.slot(d.id) ^ 1;
        let peer = (0..d.shared.mesh.num_devices()).find(|&x| links.slot(x) == other);
        let k = d.next_core_barrier;
        d.next_core_barrier += 1;
        (d.id, peer, k)
    });
    let Some(peer) = peer else {
        raise(
            NkiError::new(
                ErrorKind::InvalidGrid,
                api,
                format!(
                    "at LNC=1 the barrier pairs device {me} with the other core of its HBM \
                     stack, but no device of this mesh is placed there: the mesh needs both \
                     cores of each stack (an even number of devices, or a placement putting \
                     each pair on slots 2k and 2k+1)"
                ),
            ),
            loc,
        )
    };
    signal(peer, SemKey::CoreBarrier(k), 1, loc);
    wait(SemKey::CoreBarrier(k), 1, loc);
}
