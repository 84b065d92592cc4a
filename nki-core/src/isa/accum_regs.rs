//! The state of the engines' accumulator registers of one program instance (kept in its
//! [`InstanceState`](crate::context::InstanceState); the instructions that use it are in
//! `isa/accum.rs`).

use crate::record::Engine;

/// The accumulator registers of ScalarE and VectorE of one program instance.
#[derive(Clone, Debug)]
pub(crate) struct Accumulators {
    /// ScalarE's 128 registers and whether they hold a defined value.
    scalar: ([f32; 128], bool),
    /// VectorE's 128 registers and whether they hold a defined value.
    vector: ([f32; 128], bool),
}

impl Default for Accumulators {
    fn default() -> Self {
        Accumulators {
            scalar: ([0.0; 128], false),
            vector: ([0.0; 128], false),
        }
    }
}

impl Accumulators {
    pub(crate) fn regs(&mut self, engine: Engine) -> &mut ([f32; 128], bool) {
        match engine {
            Engine::Scalar => &mut self.scalar,
            _ => &mut self.vector,
        }
    }
}

// Saved whole before an untaken branch is traced, put back after it.
crate::shadow::state_value_by_clone!(Accumulators);
