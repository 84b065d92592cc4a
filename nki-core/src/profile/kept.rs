//! The instruction records a profile keeps for its instruction dump ([`super::ir`]).

use crate::record::CoreStream;
use std::fmt;
use std::sync::Arc;

/// The instruction records a profile keeps for its dump (simulate launches, and estimate
/// launches with [`crate::Launch::keep_records`]).
#[derive(Clone, Default)]
pub(crate) struct KeptRecords(pub(crate) Option<Arc<Vec<CoreStream>>>);

impl fmt::Debug for KeptRecords {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(s) => write!(
                f,
                "[{} records]",
                s.iter().map(|c| c.records()).sum::<usize>()
            ),
            None => f.write_str("None"),
        }
    }
}
