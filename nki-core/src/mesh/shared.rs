//! The state the devices of one mesh launch share: the mesh, target and mode, the link
//! constants, the semaphores and happens-before state, the collective registry and the
//! kernel outputs.

use super::collectives::kind::CollectiveEntry;
use super::links::Topology;
use super::sync::MeshSync;
use super::topology::Mesh;
use crate::context::Mode;
use crate::hbm::HbmStorage;
use crate::target::Target;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// A kernel output of a mesh launch and the device it belongs to (`None`: a tensor borrowed
/// with `Hbm::as_output`, shared by every device).
pub(crate) type OutputOf = (Arc<HbmStorage>, Option<usize>);

/// State shared by the devices of one mesh launch.
pub(crate) struct MeshShared {
    pub(crate) mesh: Mesh,
    pub(crate) target: Target,
    pub(crate) mode: Mode,
    /// The layout the launch is timed on.
    pub(crate) links: Topology,
    /// Keep every engine span of every kernel segment (for the trace).
    pub(crate) engine_spans: bool,
    pub(crate) sync: MeshSync,
    pub(crate) collectives: Mutex<BTreeMap<u32, CollectiveEntry>>,
    /// The shards taken as kernel outputs ([`ShardedHbm::local_out`]), by storage id, with
    /// the device whose output each is (`None` for tensors borrowed with `Hbm::as_output`):
    /// the launch must write every one.
    ///
    /// [`ShardedHbm::local_out`]: super::ShardedHbm::local_out
    pub(crate) outputs: Mutex<BTreeMap<u64, OutputOf>>,
}

impl MeshShared {
    /// The collective registry, by sequence number.
    pub(crate) fn collectives(&self) -> MutexGuard<'_, BTreeMap<u32, CollectiveEntry>> {
        self.collectives.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes `st` as a kernel output of device `device` (checked written at the end).
    pub(crate) fn note_output(&self, st: &Arc<HbmStorage>, device: Option<usize>) {
        let mut g = self.outputs.lock().unwrap_or_else(|p| p.into_inner());
        g.entry(st.id).or_insert_with(|| (st.clone(), device));
    }
}
