//! The parameter grid of a sweep and the points it names.

use std::fmt;
use std::sync::Arc;

/// A grid of named integer parameters: the cartesian product of every axis's values, the
/// first axis varying slowest. Parameters that are not integers (a kernel variant, a dtype)
/// can be swept as an index into a list of your own.
#[derive(Clone, Debug, Default)]
pub struct ParamGrid {
    pub(super) names: Vec<String>,
    pub(super) values: Vec<Vec<usize>>,
}

impl ParamGrid {
    /// An empty grid (one point with no parameters).
    pub fn new() -> ParamGrid {
        ParamGrid::default()
    }

    /// Adds the axis `name` with its candidate `values` (in the order they are tried).
    pub fn axis(mut self, name: &str, values: impl IntoIterator<Item = usize>) -> ParamGrid {
        self.names.push(name.to_string());
        self.values.push(values.into_iter().collect());
        self
    }

    /// The parameter names, in axis order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Number of points (the product of the axis lengths).
    pub fn len(&self) -> usize {
        self.values.iter().map(Vec::len).product()
    }

    /// True when some axis has no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every point of the grid, first axis slowest.
    pub fn points(&self) -> Vec<Params> {
        let names: Arc<[String]> = self.names.clone().into();
        let mut out = Vec::with_capacity(self.len());
        let mut idx = vec![0usize; self.values.len()];
        if self.is_empty() {
            return out;
        }
        loop {
            out.push(Params {
                names: names.clone(),
                values: idx.iter().zip(&self.values).map(|(&i, v)| v[i]).collect(),
            });
            // Odometer increment, last axis fastest.
            let mut a = idx.len();
            loop {
                if a == 0 {
                    return out;
                }
                a -= 1;
                idx[a] += 1;
                if idx[a] < self.values[a].len() {
                    break;
                }
                idx[a] = 0;
            }
        }
    }
}

/// One point of a [`ParamGrid`]: a value per parameter name. Index it by name
/// (`p["tile_n"]`) or position (`p.values()[0]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    pub(super) names: Arc<[String]>,
    pub(super) values: Vec<usize>,
}

impl Params {
    /// The value of parameter `name`, if the grid has it.
    pub fn get(&self, name: &str) -> Option<usize> {
        self.names
            .iter()
            .position(|n| n == name)
            .map(|i| self.values[i])
    }

    /// The parameter names, in axis order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The values, in axis order.
    pub fn values(&self) -> &[usize] {
        &self.values
    }
}

impl std::ops::Index<&str> for Params {
    type Output = usize;
    /// The value of parameter `name`. Panics (naming the known parameters) when the grid has
    /// no such axis: a typo in the sweep's own code; use [`Params::get`] to test.
    fn index(&self, name: &str) -> &usize {
        match self.names.iter().position(|n| n == name) {
            Some(i) => &self.values[i],
            None => panic!(
                "the sweep grid has no parameter '{name}' (it has: {})",
                self.names.join(", ")
            ),
        }
    }
}

impl fmt::Display for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (n, v)) in self.names.iter().zip(&self.values).enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{n}={v}")?;
        }
        Ok(())
    }
}

/// The first line of a message (rejection reasons show one line).
pub(super) fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_string()
}
