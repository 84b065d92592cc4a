//! Multi-device meshes: sharded HBM tensors, a shard_map-style launcher running one thread per
//! device, remote DMA with semaphores, collectives built on it, exact deadlock detection and a
//! link timing model with per-device timelines.
//!
//! A kernel launched with [`MeshLaunch`] runs once per device, on its own thread, over its own
//! SPMD grid; inside it, [`ShardedHbm::local`] gives the device's shard to `nl`/`nisa` ops,
//! [`device_id`] / [`axis_index`] / [`axis_size`] say where it runs, [`remote_copy`] /
//! [`async_copy`] with [`Semaphore`]s move HBM views or SBUF tiles into any device's HBM, and
//! the collectives take HBM views or tiles. A wait no pending operation can satisfy fails the
//! launch with an [`ErrorKind::Deadlock`](crate::error::ErrorKind::Deadlock) error naming every
//! blocked device. The [`MeshReport`] holds each device's modelled timeline (a deterministic
//! replay of what the devices did, in modelled-time order, on the target's links), the
//! collectives with nccom-test's bus bandwidth, and a Chrome trace with a process per device.
//!
//! ```text
//! topology     Mesh (named axes), DeviceRef, ReplicaGroups
//! sharding     PartitionSpec, ShardedHbm (from/to ndarray), MeshView
//! device       the running device: device_id, axis_index, axis_size, its modelled clock
//! dma          semaphores, remote and local async copies
//! collectives  all_gather, reduce_scatter, all_reduce, all_to_all, collective_permute,
//!              barrier; ring / recursive doubling-halving / direct
//! sync         semaphore state, blocking waits (completed by the replay), the copy registry
//! order        happens-before: vector clocks, shard accesses, race and uninitialised findings
//! sem          semaphore identities
//! deadlock     exact deadlock detection
//! links        per-target link constants (hardware.md §5), routes, the Topology builder
//! timeline     link and DMA reservations: when a transfer lands
//! replay       the deterministic timing replay, fed as the devices run; it decides which
//!              increments each wait consumes
//! operand      what copies and collectives read and write: HBM views or tiles
//! shared       the state the devices of a launch share
//! launch       MeshLaunch: threads, end-of-kernel checks
//! report       MeshReport: timelines, nccom-test style bandwidths, Perfetto trace
//! ```

mod collectives;
mod deadlock;
mod device;
mod dma;
mod launch;
mod links;
mod multi_rank;
mod operand;
mod order;
mod replay;
mod report;
mod sem;
mod sharding;
mod shared;
mod stack;
mod sync;
mod timeline;
mod topology;

/// `nki.collectives` by its NKI 0.7 names (reducing op add / max / min, `rank_id`,
/// `ReplicaGroup`).
pub use collectives::names;
pub use collectives::{
    all_gather, all_reduce, all_to_all, barrier, collective_permute, reduce_scatter, Algorithm,
    CollectiveKind, Operand,
};
pub use device::{axis_index, axis_size, device_id, num_devices};
pub use dma::{async_copy, remote_copy, semaphore, AsyncCopy, Semaphore};
pub use launch::MeshLaunch;
pub use links::{link_spec, with_link_specs, Fabric, LinkSpec, Resource, Route, Topology};
pub use multi_rank::{multi_rank_execute, multi_rank_simulate};
pub use report::{CollectiveStat, DeviceTimeline, MeshReport, MeshSpan};
pub use sharding::{MeshView, PartitionSpec, ShardedHbm};
pub use timeline::Transfer;
pub use topology::{DeviceRef, Mesh, ReplicaGroups};
