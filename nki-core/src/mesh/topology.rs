//! The mesh: devices (logical NeuronCores, ranks as nccom-test counts them) laid out on named
//! axes, device references by logical id or mesh coordinates, and replica groups.

use crate::error::{ErrorKind, NkiError, Result};
use std::fmt;

/// A mesh of devices with named axes, as `jax.make_mesh((2, 2), ("x", "y"))`.
///
/// Device ids are row-major over the axes (the last axis varies fastest), as JAX numbers the
/// devices of a mesh it makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mesh {
    shape: Vec<usize>,
    names: Vec<String>,
}

impl Mesh {
    /// A mesh of `shape` devices with one name per axis: `Mesh::new([2, 2], ["x", "y"])`.
    pub fn new<const N: usize>(shape: [usize; N], names: [&str; N]) -> Result<Mesh> {
        let bad = |m: String| Err(NkiError::new(ErrorKind::InvalidArgument, "Mesh::new", m));
        if N == 0 {
            return bad("a mesh has at least one axis".into());
        }
        if shape.contains(&0) {
            return bad(format!("mesh shape {shape:?} has an empty axis"));
        }
        for (i, n) in names.iter().enumerate() {
            if n.is_empty() {
                return bad(format!("mesh axis {i} has an empty name"));
            }
            if names[..i].contains(n) {
                return bad(format!("mesh axis name '{n}' is used twice in {names:?}"));
            }
        }
        Ok(Mesh {
            shape: shape.to_vec(),
            names: names.iter().map(|s| s.to_string()).collect(),
        })
    }

    /// Devices along each axis.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The axis names, in axis order.
    pub fn axis_names(&self) -> &[String] {
        &self.names
    }

    /// Number of devices.
    pub fn num_devices(&self) -> usize {
        self.shape.iter().product()
    }

    /// The position of the axis called `name`.
    pub fn axis(&self, name: &str) -> Result<usize> {
        self.names.iter().position(|n| n == name).ok_or_else(|| {
            NkiError::new(
                ErrorKind::InvalidArgument,
                "mesh axis",
                format!("the mesh has no axis '{name}' (axes: {:?})", self.names),
            )
        })
    }

    /// Devices along the axis called `name`.
    pub fn axis_size(&self, name: &str) -> Result<usize> {
        Ok(self.shape[self.axis(name)?])
    }

    /// The mesh coordinates of device `id` (which must be in range).
    pub fn coords(&self, id: usize) -> Vec<usize> {
        let mut c = vec![0; self.shape.len()];
        let mut r = id;
        for d in (0..self.shape.len()).rev() {
            c[d] = r % self.shape[d];
            r /= self.shape[d];
        }
        c
    }

    /// The logical id of the device at `coords`.
    pub fn device_at(&self, coords: &[usize]) -> Result<usize> {
        if coords.len() != self.shape.len() || coords.iter().zip(&self.shape).any(|(c, n)| c >= n) {
            return Err(NkiError::new(
                ErrorKind::InvalidDevice,
                "device",
                format!(
                    "mesh coordinates {coords:?} are outside the {} mesh",
                    self.describe_shape()
                ),
            ));
        }
        Ok(coords
            .iter()
            .zip(&self.shape)
            .fold(0, |acc, (c, n)| acc * n + c))
    }

    /// The logical id a [`DeviceRef`] names, checked against the mesh.
    pub fn resolve(&self, d: &DeviceRef) -> Result<usize> {
        match d {
            DeviceRef::Logical(id) if *id < self.num_devices() => Ok(*id),
            DeviceRef::Logical(id) => Err(NkiError::new(
                ErrorKind::InvalidDevice,
                "device",
                format!(
                    "device id {id} is out of range: the {} mesh has devices 0..{}",
                    self.describe_shape(),
                    self.num_devices()
                ),
            )),
            DeviceRef::Mesh(c) => self.device_at(c),
        }
    }

    /// `device 3 (x=1, y=1)`.
    pub fn describe_device(&self, id: usize) -> String {
        let c = self.coords(id);
        let parts: Vec<String> = self
            .names
            .iter()
            .zip(&c)
            .map(|(n, i)| format!("{n}={i}"))
            .collect();
        format!("device {id} ({})", parts.join(", "))
    }

    /// `2x2 (x, y)`.
    pub fn describe_shape(&self) -> String {
        let dims: Vec<String> = self.shape.iter().map(|n| n.to_string()).collect();
        format!("{} ({})", dims.join("x"), self.names.join(", "))
    }
}

impl fmt::Display for Mesh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "mesh {}", self.describe_shape())
    }
}

/// A device addressed by logical id or by mesh coordinates (Pallas' `DeviceIdType.LOGICAL` and
/// `DeviceIdType.MESH`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceRef {
    /// Logical (row-major) device id.
    Logical(usize),
    /// Mesh coordinates, one per axis.
    Mesh(Vec<usize>),
}

impl From<usize> for DeviceRef {
    fn from(id: usize) -> DeviceRef {
        DeviceRef::Logical(id)
    }
}

impl<const N: usize> From<[usize; N]> for DeviceRef {
    fn from(c: [usize; N]) -> DeviceRef {
        DeviceRef::Mesh(c.to_vec())
    }
}

impl From<&[usize]> for DeviceRef {
    fn from(c: &[usize]) -> DeviceRef {
        DeviceRef::Mesh(c.to_vec())
    }
}

/// Disjoint groups of devices that run one collective together (NKI's `ReplicaGroup`); the
/// position of a device in its group is its rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaGroups {
    groups: Vec<Vec<usize>>,
}

impl ReplicaGroups {
    /// Explicit groups of logical device ids; they must be non-empty and disjoint, and every id
    /// inside `mesh`.
    pub fn new(mesh: &Mesh, groups: Vec<Vec<usize>>) -> Result<ReplicaGroups> {
        let mut seen = vec![false; mesh.num_devices()];
        for g in &groups {
            if g.is_empty() {
                return Err(NkiError::new(
                    ErrorKind::InvalidArgument,
                    "replica groups",
                    "a replica group is empty",
                ));
            }
            for &d in g {
                mesh.resolve(&DeviceRef::Logical(d))?;
                if std::mem::replace(&mut seen[d], true) {
                    return Err(NkiError::new(
                        ErrorKind::InvalidArgument,
                        "replica groups",
                        format!("device {d} is in more than one replica group: {groups:?}"),
                    ));
                }
            }
        }
        Ok(ReplicaGroups { groups })
    }

    /// The groups of devices that differ only along `axes` (JAX's `axis_name` of a collective):
    /// `along(&mesh, &["y"])` on a 2x2 mesh is `[[0, 1], [2, 3]]`. Ranks follow the coordinates
    /// along `axes`, first axis major.
    pub fn along(mesh: &Mesh, axes: &[&str]) -> Result<ReplicaGroups> {
        let idx: Vec<usize> = axes.iter().map(|a| mesh.axis(a)).collect::<Result<_>>()?;
        // (coordinates off `axes`, [(rank, device)]) per group.
        type Members = Vec<(usize, usize)>;
        let mut groups: Vec<(Vec<usize>, Members)> = Vec::new();
        for d in 0..mesh.num_devices() {
            let c = mesh.coords(d);
            let key: Vec<usize> = (0..c.len())
                .map(|i| if idx.contains(&i) { 0 } else { c[i] })
                .collect();
            let rank = idx.iter().fold(0, |acc, &i| acc * mesh.shape()[i] + c[i]);
            match groups.iter_mut().find(|g| g.0 == key) {
                Some(g) => g.1.push((rank, d)),
                None => groups.push((key, vec![(rank, d)])),
            }
        }
        let groups = groups
            .into_iter()
            .map(|(_, mut v)| {
                v.sort();
                v.into_iter().map(|(_, d)| d).collect()
            })
            .collect();
        Ok(ReplicaGroups { groups })
    }

    /// One group of every device of the mesh.
    pub fn all(mesh: &Mesh) -> ReplicaGroups {
        ReplicaGroups {
            groups: vec![(0..mesh.num_devices()).collect()],
        }
    }

    /// The groups.
    pub fn groups(&self) -> &[Vec<usize>] {
        &self.groups
    }

    /// The group of `device` and its rank there.
    pub fn find(&self, device: usize) -> Option<(&[usize], usize)> {
        self.groups.iter().find_map(|g| {
            g.iter()
                .position(|&d| d == device)
                .map(|r| (g.as_slice(), r))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_row_major_and_round_trip() {
        let m = Mesh::new([2, 3], ["x", "y"]).unwrap();
        assert_eq!(m.coords(4), vec![1, 1]);
        assert_eq!(m.device_at(&[1, 2]).unwrap(), 5);
        for d in 0..6 {
            assert_eq!(m.device_at(&m.coords(d)).unwrap(), d);
        }
        assert_eq!(
            m.resolve(&DeviceRef::Logical(6)).unwrap_err().kind(),
            ErrorKind::InvalidDevice
        );
    }

    #[test]
    fn groups_along_an_axis() {
        let m = Mesh::new([2, 2], ["x", "y"]).unwrap();
        let y = ReplicaGroups::along(&m, &["y"]).unwrap();
        assert_eq!(y.groups(), &[vec![0, 1], vec![2, 3]]);
        let x = ReplicaGroups::along(&m, &["x"]).unwrap();
        assert_eq!(x.groups(), &[vec![0, 2], vec![1, 3]]);
        assert_eq!(x.find(3), Some((&[1usize, 3][..], 1)));
        assert!(ReplicaGroups::new(&m, vec![vec![0, 1], vec![1, 2]]).is_err());
        assert!(Mesh::new([2, 2], ["x", "x"]).is_err());
    }
}
