//! NKI 0.8's `nki.multi_rank_simulate(kernel, per_rank_inputs, ...)` and
//! `nki.multi_rank_execute` shapes: a multi-rank kernel (one that calls `nki.collectives`) run
//! once per rank of a mesh, each rank on its own inputs, in one process, with the outputs per
//! rank (and, simulated, the mesh's modelled timeline).

use super::{device_id, Mesh, MeshLaunch, MeshReport, PartitionSpec, ShardedHbm};
use crate::context::Mode;
use crate::dtype::Element;
use crate::error::{ErrorKind, NkiError, Result};
use crate::hbm::{Hbm, HbmOut};
use crate::target::Target;
use ndarray::{concatenate, ArrayD, Axis};

/// Runs `kernel` on every device of `mesh` (rank `r` = logical device `r`) in simulate mode on
/// `target` (NKI 0.8 `nki.multi_rank_simulate`): rank `r` gets `per_rank_inputs[r]` as HBM
/// tensors (each rank the same number of arrays, position by position of one shape) and writes
/// its output, of `output_shape`, through the `HbmOut` it is given. Returns each rank's output
/// and the mesh report (values, collectives and the modelled time of every device).
///
/// Errors: a number of input sets other than the mesh's devices, input sets that differ in
/// count or shapes, a 0-dimensional array or output shape; a kernel's error (the lowest failing
/// rank's, as [`MeshLaunch::run`]).
///
/// ```
/// use nki_core::mesh::names::{self as cc, ReduceOp, ReplicaGroup};
/// use nki_core::mesh::{multi_rank_simulate, Mesh};
/// use nki_core::ndarray::ArrayD;
/// use nki_core::prelude::*;
/// let m = Mesh::new([2], ["x"])?;
/// let inputs: Vec<Vec<ArrayD<f32>>> = (0..2)
///     .map(|r| vec![ArrayD::from_elem(vec![4, 8], r as f32 + 1.0)])
///     .collect();
/// let (outs, report) = multi_rank_simulate(&m, Target::Trn2, &inputs, &[4, 8], |x, out| {
///     let t = nl::load(x[0].view());
///     let s = nl::ndarray(&[4, 8], DType::F32, MemKind::Sbuf);
///     cc::all_reduce(&t, &s, ReduceOp::Add, &ReplicaGroup::all(&Mesh::new([2], ["x"]).unwrap()));
///     nl::store(out.view(), &s);
/// })?;
/// assert!(outs.iter().all(|o| o.iter().all(|&v| v == 3.0)));
/// assert!(report.latency_ns > 0.0);
/// # Ok::<(), nki_core::NkiError>(())
/// ```
pub fn multi_rank_simulate<T: Element>(
    mesh: &Mesh,
    target: Target,
    per_rank_inputs: &[Vec<ArrayD<T>>],
    output_shape: &[usize],
    kernel: impl Fn(&[Hbm<T>], &HbmOut<'_, T>) + Sync,
) -> Result<(Vec<ArrayD<T>>, MeshReport)> {
    let run = MultiRank {
        api: "multi_rank_simulate",
        mode: Mode::Simulate,
        mesh,
        target,
    };
    run.run(per_rank_inputs, output_shape, kernel)
}

/// Runs `kernel` on every device of `mesh` (rank `r` = logical device `r`) in execute mode on
/// `target` (NKI 0.8 `nki.multi_rank_execute`: arrays in, arrays out, per rank): as
/// [`multi_rank_simulate`], without modelling time, and returns each rank's output. NKI's runs
/// on Neuron hardware; this one computes the modelled NeuronCores' arithmetic on the CPU, as
/// every launch in execute mode does. The errors are [`multi_rank_simulate`]'s; a kernel's
/// error is the lowest failing rank's (NKI's `MultiRankExecutionError` maps every failing
/// rank to its error).
///
/// ```
/// use nki_core::mesh::names::{self as cc, ReduceOp, ReplicaGroup};
/// use nki_core::mesh::{multi_rank_execute, Mesh};
/// use nki_core::ndarray::ArrayD;
/// use nki_core::prelude::*;
/// let m = Mesh::new([2], ["x"])?;
/// let inputs: Vec<Vec<ArrayD<f32>>> = (0..2)
///     .map(|r| vec![ArrayD::from_elem(vec![4, 8], r as f32 + 1.0)])
///     .collect();
/// let outs = multi_rank_execute(&m, Target::Trn2, &inputs, &[4, 8], |x, out| {
///     let t = nl::load(x[0].view());
///     let s = nl::ndarray(&[4, 8], DType::F32, MemKind::Sbuf);
///     cc::all_reduce(&t, &s, ReduceOp::Add, &ReplicaGroup::all(&Mesh::new([2], ["x"]).unwrap()));
///     nl::store(out.view(), &s);
/// })?;
/// assert!(outs.iter().all(|o| o.iter().all(|&v| v == 3.0)));
/// # Ok::<(), nki_core::NkiError>(())
/// ```
pub fn multi_rank_execute<T: Element>(
    mesh: &Mesh,
    target: Target,
    per_rank_inputs: &[Vec<ArrayD<T>>],
    output_shape: &[usize],
    kernel: impl Fn(&[Hbm<T>], &HbmOut<'_, T>) + Sync,
) -> Result<Vec<ArrayD<T>>> {
    let run = MultiRank {
        api: "multi_rank_execute",
        mode: Mode::Execute,
        mesh,
        target,
    };
    run.run(per_rank_inputs, output_shape, kernel).map(|r| r.0)
}

/// A multi-rank run: the API called (what its errors name), the launch mode, mesh and target.
struct MultiRank<'m> {
    api: &'static str,
    mode: Mode,
    mesh: &'m Mesh,
    target: Target,
}

impl MultiRank<'_> {
    /// Checks the inputs, runs `kernel` once per rank and returns the outputs per rank and
    /// the mesh report.
    fn run<T: Element>(
        &self,
        per_rank_inputs: &[Vec<ArrayD<T>>],
        output_shape: &[usize],
        kernel: impl Fn(&[Hbm<T>], &HbmOut<'_, T>) + Sync,
    ) -> Result<(Vec<ArrayD<T>>, MeshReport)> {
        let (mesh, api) = (self.mesh, self.api);
        let bad = |m: String| Err(NkiError::new(ErrorKind::InvalidArgument, api, m));
        let ranks = mesh.num_devices();
        if per_rank_inputs.len() != ranks {
            return bad(format!(
                "{} input sets for a mesh of {ranks} devices: one set per rank",
                per_rank_inputs.len()
            ));
        }
        let first = &per_rank_inputs[0];
        for (r, set) in per_rank_inputs.iter().enumerate() {
            if set.len() != first.len() {
                return bad(format!(
                    "rank {r} has {} inputs, rank 0 {}: every rank takes the same inputs",
                    set.len(),
                    first.len()
                ));
            }
            for (k, (a, b)) in set.iter().zip(first).enumerate() {
                if a.shape() != b.shape() || a.ndim() == 0 {
                    return bad(format!(
                        "input {k} of rank {r} has shape {:?}, of rank 0 {:?}: one shape of at \
                         least one dimension per input",
                        a.shape(),
                        b.shape()
                    ));
                }
            }
        }
        if output_shape.is_empty() {
            return bad("the output shape has no dimension".to_string());
        }
        // Every array stacked along its first dimension, rank by rank, and sharded there over the
        // mesh's axes (major first: rank r is logical device r).
        let axes: Vec<&str> = mesh.axis_names().iter().map(String::as_str).collect();
        let spec = |ndim: usize| {
            let mut dims: Vec<&[&str]> = vec![&[]; ndim];
            dims[0] = &axes;
            PartitionSpec::multi(&dims)
        };
        let inputs = (0..first.len())
            .map(|k| {
                let parts: Vec<_> = per_rank_inputs.iter().map(|set| set[k].view()).collect();
                let all = concatenate(Axis(0), &parts)
                    .map_err(|e| NkiError::new(ErrorKind::InvalidArgument, api, e.to_string()))?;
                ShardedHbm::from_array(mesh, &all, spec(all.ndim()))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut global = output_shape.to_vec();
        global[0] *= ranks;
        let out = ShardedHbm::<T>::zeros(mesh, &global, spec(global.len()))?;
        let report = MeshLaunch::new(mesh)
            .target(self.target)
            .mode(self.mode)
            .run(|| {
                let local: Vec<Hbm<T>> = inputs.iter().map(ShardedHbm::local).collect();
                debug_assert!(device_id() < ranks);
                kernel(&local, &out.local_out());
            })?;
        let outs = (0..ranks).map(|r| out.shard(r)).collect::<Result<_>>()?;
        Ok((outs, report))
    }
}
