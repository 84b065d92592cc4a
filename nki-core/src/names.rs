//! Instruction names: NKI 0.7's `name=` keyword of an instruction (what the profiler shows
//! for it). A name is interned once into a process-wide table and carried as a 4-byte
//! [`InstrName`] by the op handle and its records, so an unnamed instruction costs nothing
//! and a named one copies 4 bytes.
//!
//! Interned names are kept for the life of the process (each distinct name once).

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Mutex, OnceLock};

/// The interned name of an instruction (NKI's `name=`): see [`crate::nisa::named`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct InstrName(NonZeroU32);

/// The table: names by id - 1, and ids by name.
#[derive(Default)]
struct Table {
    names: Vec<&'static str>,
    ids: HashMap<&'static str, NonZeroU32>,
}

fn table() -> &'static Mutex<Table> {
    static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();
    TABLE.get_or_init(Mutex::default)
}

impl InstrName {
    /// The name `name` (interned: the same text gives the same `InstrName`).
    pub fn new(name: &str) -> InstrName {
        let mut t = table().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&id) = t.ids.get(name) {
            return InstrName(id);
        }
        let text: &'static str = Box::leak(name.into());
        t.names.push(text);
        let id = u32::try_from(t.names.len())
            .ok()
            .and_then(NonZeroU32::new)
            .expect("fewer than 2^32 distinct instruction names");
        t.ids.insert(text, id);
        InstrName(id)
    }

    /// The name's text.
    pub fn as_str(self) -> &'static str {
        let t = table().lock().unwrap_or_else(|p| p.into_inner());
        t.names[self.0.get() as usize - 1]
    }
}

impl std::fmt::Display for InstrName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for InstrName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl serde::Serialize for InstrName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_text_interns_to_the_same_name() {
        let (a, b, c) = (
            InstrName::new("qk_matmul"),
            InstrName::new("softmax"),
            InstrName::new(&String::from("qk_matmul")),
        );
        assert_eq!(a, c);
        assert_ne!(a, b);
        assert_eq!(
            (a.as_str(), b.to_string()),
            ("qk_matmul", "softmax".to_string())
        );
        assert_eq!(format!("{a:?}"), "\"qk_matmul\"");
    }
}
