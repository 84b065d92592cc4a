//! Sharded HBM tensors: a global tensor split over a mesh by a [`PartitionSpec`] (JAX's
//! `NamedSharding(mesh, P('x', 'y'))`), one HBM shard per device, built from and gathered back
//! to ndarray; and [`MeshView`], a view of one device's shard that remote copies and collectives
//! address.

use super::device;
use super::order::{Marks, Written};
use super::topology::{DeviceRef, Mesh};
use crate::access::{Ap, IntoIndex, Shape};
use crate::dtype::Element;
use crate::error::{ErrorKind, NkiError, Result, SourceLoc};
use crate::hbm::{Hbm, HbmOut, HbmStorage, HbmView};
use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};
use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

/// How each tensor dimension is split over mesh axes (JAX's `PartitionSpec`). A dimension
/// with no axes is not split; mesh axes that split no dimension replicate the tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionSpec {
    dims: Vec<Vec<String>>,
}

impl PartitionSpec {
    /// One optional axis per dimension: `PartitionSpec::new([Some("x"), None])` is
    /// `P('x', None)`.
    pub fn new<const N: usize>(dims: [Option<&str>; N]) -> PartitionSpec {
        PartitionSpec {
            dims: dims
                .iter()
                .map(|d| d.iter().map(|s| s.to_string()).collect())
                .collect(),
        }
    }

    /// Several axes per dimension, major first: `multi(&[&["x", "y"], &[]])` is
    /// `P(('x', 'y'), None)`.
    pub fn multi(dims: &[&[&str]]) -> PartitionSpec {
        PartitionSpec {
            dims: dims
                .iter()
                .map(|d| d.iter().map(|s| s.to_string()).collect())
                .collect(),
        }
    }

    /// A spec replicating an `ndim`-dimensional tensor on every device (`P()`).
    pub fn replicated(ndim: usize) -> PartitionSpec {
        PartitionSpec {
            dims: vec![Vec::new(); ndim],
        }
    }

    /// The axes splitting each dimension.
    pub fn dims(&self) -> &[Vec<String>] {
        &self.dims
    }
}

impl fmt::Display for PartitionSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .dims
            .iter()
            .map(|d| match d.len() {
                0 => "None".to_string(),
                1 => format!("'{}'", d[0]),
                _ => format!(
                    "({})",
                    d.iter()
                        .map(|a| format!("'{a}'"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
            .collect();
        write!(f, "P({})", parts.join(", "))
    }
}

/// The layout of a sharded tensor: global shape, spec and the per-dimension axis positions.
#[derive(Clone, Debug)]
struct Layout {
    global: Vec<usize>,
    shard: Vec<usize>,
    /// For each dimension, the mesh axis positions splitting it (major first).
    axes: Vec<Vec<usize>>,
}

impl Layout {
    fn new(mesh: &Mesh, global: &[usize], spec: &PartitionSpec) -> Result<Layout> {
        let bad = |k: ErrorKind, m: String| Err(NkiError::new(k, "ShardedHbm", m));
        if spec.dims.len() != global.len() {
            return bad(
                ErrorKind::ShapeMismatch,
                format!(
                    "partition spec {spec} has {} entries but the tensor {global:?} has {} dimensions",
                    spec.dims.len(),
                    global.len()
                ),
            );
        }
        let mut used: Vec<usize> = Vec::new();
        let mut axes = Vec::new();
        let mut shard = Vec::new();
        for (d, names) in spec.dims.iter().enumerate() {
            let mut ax = Vec::new();
            for n in names {
                let a = mesh.axis(n)?;
                if used.contains(&a) {
                    return bad(
                        ErrorKind::InvalidArgument,
                        format!("partition spec {spec} uses mesh axis '{n}' twice"),
                    );
                }
                used.push(a);
                ax.push(a);
            }
            let parts: usize = ax.iter().map(|&a| mesh.shape()[a]).product();
            if !global[d].is_multiple_of(parts) {
                return bad(
                    ErrorKind::ShapeMismatch,
                    format!(
                        "dimension {d} of the tensor {global:?} ({}) does not split into {parts} equal shards over mesh axes {names:?} ({spec} on {mesh})",
                        global[d]
                    ),
                );
            }
            shard.push(global[d] / parts);
            axes.push(ax);
        }
        Ok(Layout {
            global: global.to_vec(),
            shard,
            axes,
        })
    }

    /// The global index ranges (start per dimension) of `device`'s shard.
    fn origin(&self, mesh: &Mesh, device: usize) -> Vec<usize> {
        let c = mesh.coords(device);
        self.axes
            .iter()
            .zip(&self.shard)
            .map(|(ax, &len)| ax.iter().fold(0, |acc, &a| acc * mesh.shape()[a] + c[a]) * len)
            .collect()
    }

    /// The view of the global row-major tensor that `device`'s shard covers.
    fn global_view(&self, mesh: &Mesh, device: usize) -> Ap {
        let global = Shape::new(&self.global).expect("validated at construction");
        let mut ap = Ap::contiguous(global);
        ap.offset = self
            .origin(mesh, device)
            .iter()
            .zip(&ap.strides)
            .map(|(&o, &s)| o * s as usize)
            .sum();
        ap.shape = Shape::new(&self.shard).expect("shard dims are non-zero");
        ap
    }
}

/// A global HBM tensor split over a mesh: one [`Hbm`] shard per device.
///
/// Inside a mesh launch, [`ShardedHbm::local`] / [`ShardedHbm::local_out`] give the running
/// device's shard to `nl`/`nisa` ops, and [`ShardedHbm::at`] a view of any device's shard for
/// remote copies and collectives.
pub struct ShardedHbm<T: Element> {
    mesh: Mesh,
    spec: PartitionSpec,
    layout: Layout,
    pub(crate) shards: Arc<[Arc<HbmStorage>]>,
    /// Which elements of each shard were ever written (see `order`).
    marks: Arc<[Marks]>,
    _t: PhantomData<T>,
}

impl<T: Element> ShardedHbm<T> {
    fn build(
        mesh: &Mesh,
        global: &[usize],
        spec: PartitionSpec,
        written: bool,
        mut values: impl FnMut(&Layout, usize) -> Result<Option<Vec<f32>>>,
    ) -> Result<Self> {
        let layout = Layout::new(mesh, global, &spec)?;
        let shape = Shape::new(&layout.shard)?;
        let shards: Arc<[Arc<HbmStorage>]> = (0..mesh.num_devices())
            .map(|d| Ok(HbmStorage::new(T::DTYPE, shape, values(&layout, d)?)))
            .collect::<Result<_>>()?;
        let marks = (0..mesh.num_devices())
            .map(|_| {
                let w = if written {
                    Written::full(shape.numel())
                } else {
                    Written::default()
                };
                Arc::new(Mutex::new(w))
            })
            .collect();
        Ok(ShardedHbm {
            mesh: mesh.clone(),
            spec,
            layout,
            shards,
            marks,
            _t: PhantomData,
        })
    }

    /// Shards a copy of `a` over `mesh` by `spec`.
    pub fn from_array<S: Data<Elem = T>, D: Dimension>(
        mesh: &Mesh,
        a: &ArrayBase<S, D>,
        spec: PartitionSpec,
    ) -> Result<Self> {
        let flat: Vec<f32> = a.iter().map(|x| x.to_slot()).collect();
        let m = mesh.clone();
        Self::build(mesh, a.shape(), spec, true, |l, d| {
            let ap = l.global_view(&m, d);
            let mut out = crate::hbm::try_zeros("ShardedHbm::from_array", &ap.shape, T::DTYPE)?;
            ap.gather(&flat, &mut out);
            Ok(Some(out))
        })
    }

    /// A zero-filled sharded tensor of global shape `global`. Shards the host cannot allocate
    /// are an [`ErrorKind::HostMemory`] error naming the shard shape and bytes.
    pub fn zeros(mesh: &Mesh, global: &[usize], spec: PartitionSpec) -> Result<Self> {
        Self::build(mesh, global, spec, false, |l, _| {
            let s = Shape::new(&l.shard)?;
            crate::hbm::try_zeros("ShardedHbm::zeros", &s, T::DTYPE).map(Some)
        })
    }

    /// A sharded tensor with shapes but no values, for estimate-mode launches of large meshes.
    pub fn shape_only(mesh: &Mesh, global: &[usize], spec: PartitionSpec) -> Result<Self> {
        Self::build(mesh, global, spec, false, |_, _| Ok(None))
    }

    /// The global tensor, assembled from the shards. Replicas of one block must agree; a
    /// difference is an error naming the two devices.
    pub fn to_array(&self) -> Result<ArrayD<T>> {
        let mut out = vec![f32::NAN; self.layout.global.iter().product()];
        for d in 0..self.mesh.num_devices() {
            let vals = self.shard_values(d, "ShardedHbm::to_array")?;
            let ap = self.layout.global_view(&self.mesh, d);
            let origin = self.layout.origin(&self.mesh, d);
            let first = (0..d).find(|&e| self.layout.origin(&self.mesh, e) == origin);
            match first {
                None => ap.scatter(&mut out, &vals),
                Some(e) => {
                    let mut prev = vec![0.0; vals.len()];
                    ap.gather(&out, &mut prev);
                    if let Some(i) =
                        (0..vals.len()).find(|&i| prev[i].to_bits() != vals[i].to_bits())
                    {
                        return Err(NkiError::new(
                            ErrorKind::ShapeMismatch,
                            "ShardedHbm::to_array",
                            format!(
                                "replicated shards differ: {} holds {} but {} holds {} at shard element {i} ({} on {})",
                                self.mesh.describe_device(e),
                                prev[i],
                                self.mesh.describe_device(d),
                                vals[i],
                                self.spec,
                                self.mesh
                            ),
                        ));
                    }
                }
            }
        }
        let v: Vec<T> = out.iter().map(|&x| T::from_slot(x)).collect();
        Ok(ArrayD::from_shape_vec(IxDyn(&self.layout.global), v).expect("shape matches"))
    }

    /// The shard of device `device` as an ndarray.
    pub fn shard(&self, device: impl Into<DeviceRef>) -> Result<ArrayD<T>> {
        let d = self.mesh.resolve(&device.into())?;
        let vals = self.shard_values(d, "ShardedHbm::shard")?;
        let v: Vec<T> = vals.iter().map(|&x| T::from_slot(x)).collect();
        Ok(ArrayD::from_shape_vec(IxDyn(&self.layout.shard), v).expect("shape matches"))
    }

    fn shard_values(&self, d: usize, op: &'static str) -> Result<Vec<f32>> {
        let st = &self.shards[d];
        let g = st.read();
        g.values
            .as_ref()
            .map(|v| v.to_vec())
            .ok_or_else(|| crate::hbm::no_data(st, op))
    }

    /// The global shape.
    pub fn global_shape(&self) -> &[usize] {
        &self.layout.global
    }

    /// The shape of every shard.
    pub fn shard_shape(&self) -> &[usize] {
        &self.layout.shard
    }

    /// The partition spec.
    pub fn spec(&self) -> &PartitionSpec {
        &self.spec
    }

    /// The mesh.
    pub fn mesh(&self) -> &Mesh {
        &self.mesh
    }

    /// Inside a mesh launch: the running device's shard, as a kernel input.
    #[track_caller]
    pub fn local(&self) -> Hbm<T> {
        let d = self.enter("ShardedHbm::local", SourceLoc::caller());
        Hbm::wrap(self.shards[d].clone())
    }

    /// Registers the shards with the running mesh launch (for its happens-before checks) and
    /// returns the running device.
    fn enter(&self, op: &'static str, loc: SourceLoc) -> usize {
        let (d, shared) = device::with_device(op, loc, |s| (s.id, s.shared.clone()));
        let ids: Vec<_> = self
            .shards
            .iter()
            .map(|s| (s.id, s.name.to_string(), s.shape))
            .collect();
        shared.sync.register(&ids, &self.marks);
        d
    }

    /// Inside a mesh launch: the running device's shard, as a kernel output (other devices may
    /// copy into it remotely at the same time).
    #[track_caller]
    pub fn local_out(&self) -> HbmOut<'_, T> {
        let loc = SourceLoc::caller();
        let d = device::with_device("ShardedHbm::local_out", loc, |s| {
            s.shared.note_output(&self.shards[s.id], Some(s.id));
            s.id
        });
        self.enter("ShardedHbm::local_out", loc);
        self.out_of(d)
    }

    fn out_of(&self, d: usize) -> HbmOut<'_, T> {
        HbmOut::shared(self.shards[d].clone())
    }

    /// Inside a mesh launch: a view of the running device's whole shard.
    #[track_caller]
    pub fn view(&self) -> MeshView {
        let d = self.enter("ShardedHbm::view", SourceLoc::caller());
        self.view_on(d)
    }

    /// A view of device `device`'s whole shard (for remote copies and collectives). An
    /// out-of-range device fails the kernel with an [`ErrorKind::InvalidDevice`] error.
    #[track_caller]
    pub fn at(&self, device: impl Into<DeviceRef>) -> MeshView {
        let loc = SourceLoc::caller();
        let d = crate::context::check(self.mesh.resolve(&device.into()), loc);
        if device::try_id().is_some() {
            self.enter("ShardedHbm::at", loc);
        }
        self.view_on(d)
    }

    fn view_on(&self, d: usize) -> MeshView {
        MeshView {
            shards: self.shards.clone(),
            device: d,
            ap: Ap::contiguous(self.shards[d].shape),
        }
    }
}

impl<T: Element> fmt::Debug for ShardedHbm<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ShardedHbm<{}>{:?} {} on {} (shards {:?})",
            T::DTYPE,
            self.layout.global,
            self.spec,
            self.mesh,
            self.layout.shard
        )
    }
}

/// A view of one device's shard of a [`ShardedHbm`]: the source or destination of a remote
/// copy or collective. The same view on another device ([`MeshView::on`]) addresses the same
/// elements of that device's shard (buffers are allocated symmetrically, as on the hardware).
#[derive(Clone)]
pub struct MeshView {
    pub(crate) shards: Arc<[Arc<HbmStorage>]>,
    pub(crate) device: usize,
    pub(crate) ap: Ap,
}

impl MeshView {
    /// Slices the view (integer indices drop their dimension), e.g. `v.slice((0..128, ..))`.
    #[track_caller]
    pub fn slice(&self, index: impl IntoIndex) -> MeshView {
        let loc = SourceLoc::caller();
        crate::context::check(self.try_slice(index), loc)
    }

    /// Slices the view, returning an error instead of failing the kernel.
    pub fn try_slice(&self, index: impl IntoIndex) -> Result<MeshView> {
        let st = &self.shards[self.device];
        let ap = self
            .ap
            .slice_named(&index.into_index(), false, || format!("tensor {}", st.name))?;
        Ok(MeshView {
            shards: self.shards.clone(),
            device: self.device,
            ap,
        })
    }

    /// The same elements on device `device`'s shard.
    #[track_caller]
    pub fn on(&self, device: usize) -> MeshView {
        if device >= self.shards.len() {
            crate::context::raise(
                NkiError::new(
                    ErrorKind::InvalidDevice,
                    "MeshView::on",
                    format!(
                        "device id {device} is out of range: the mesh has devices 0..{}",
                        self.shards.len()
                    ),
                ),
                SourceLoc::caller(),
            );
        }
        MeshView {
            shards: self.shards.clone(),
            device,
            ap: self.ap,
        }
    }

    /// The device whose shard this view addresses.
    pub fn device(&self) -> usize {
        self.device
    }

    /// The view's shape.
    pub fn shape(&self) -> &[usize] {
        self.ap.shape.dims()
    }

    /// Elements in the view.
    pub fn numel(&self) -> usize {
        self.ap.shape.numel()
    }

    /// The storage of the addressed shard.
    pub(crate) fn storage(&self) -> &Arc<HbmStorage> {
        &self.shards[self.device]
    }

    /// Bytes the view covers in its tensor's dtype.
    pub(crate) fn bytes(&self) -> u64 {
        (self.numel() * self.storage().dtype.size()) as u64
    }

    /// The view as a plain HBM view (for `nl.load` of the local shard).
    pub fn hbm_view(&self) -> HbmView {
        HbmView::of(self.storage().clone(), self.ap)
    }

    /// `hbm3[1024, 512] on device 2`.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{}{} on device {}",
            self.storage().name,
            self.ap.shape,
            self.device
        )
    }

    /// The view's element runs `(offset, len)` in its storage (inner stride expanded).
    pub(crate) fn runs(&self) -> Vec<(usize, usize)> {
        super::order::runs_of(&self.ap)
    }
}

impl fmt::Debug for MeshView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;

    #[test]
    fn shards_round_trip_and_replicas_are_checked() {
        let mesh = Mesh::new([2, 2], ["x", "y"]).unwrap();
        let a = Array2::from_shape_fn((4, 6), |(i, j)| (i * 6 + j) as f32);
        let s =
            ShardedHbm::from_array(&mesh, &a, PartitionSpec::new([Some("x"), Some("y")])).unwrap();
        assert_eq!(s.shard_shape(), &[2, 3]);
        assert_eq!(s.shard(3).unwrap()[[0, 0]], 15.0);
        assert_eq!(s.to_array().unwrap(), a.clone().into_dyn());
        let r = ShardedHbm::from_array(&mesh, &a, PartitionSpec::new([Some("x"), None])).unwrap();
        assert_eq!(r.to_array().unwrap(), a.clone().into_dyn());
        r.shards[1].write().values.as_mut().unwrap()[0] = -1.0;
        let e = r.to_array().unwrap_err();
        assert!(e.message().contains("replicated shards differ"), "{e}");
        let bad = ShardedHbm::from_array(&mesh, &a, PartitionSpec::new([None, Some("x")]));
        assert!(bad.is_ok());
        let bad = ShardedHbm::<f32>::zeros(&mesh, &[3, 6], PartitionSpec::new([Some("x"), None]));
        assert_eq!(bad.unwrap_err().kind(), ErrorKind::ShapeMismatch);
        let multi =
            ShardedHbm::from_array(&mesh, &a, PartitionSpec::multi(&[&["x", "y"], &[]])).unwrap();
        assert_eq!(multi.shard_shape(), &[1, 6]);
        assert_eq!(multi.shard(2).unwrap()[[0, 0]], 12.0);
    }
}
