//! Shared run-time checks of the hardware rules, used by every op.

use crate::error::{ErrorKind, NkiError, Result};
use crate::record::MemKind;
use crate::tile::TileRef;

/// The partition start-offset rule: more than 64 partitions start at 0; 33..=64 at 0 or 64;
/// up to 32 at 0, 32, 64 or 96.
pub(crate) fn partition_start(op: &'static str, what: &str, t: &TileRef) -> Result<()> {
    let p = t.partitions();
    let s = t.start_partition();
    let ok = if p > 64 {
        s == 0
    } else if p > 32 {
        s == 0 || s == 64
    } else {
        s.is_multiple_of(32)
    };
    if ok {
        Ok(())
    } else {
        let valid = if p > 64 {
            "0"
        } else if p > 32 {
            "0 or 64"
        } else {
            "0, 32, 64 or 96"
        };
        Err(NkiError::new(
            ErrorKind::PartitionOffset,
            op,
            format!(
                "operand '{what}' {} accesses {p} partitions starting at partition {s}; \
                 an access of {p} partitions must start at partition {valid}",
                t.describe()
            ),
        ))
    }
}

/// The operand must live in one of `allowed` memories.
pub(crate) fn memory(op: &'static str, what: &str, t: &TileRef, allowed: &[MemKind]) -> Result<()> {
    if allowed.contains(&t.mem()) {
        return Ok(());
    }
    let names: Vec<&str> = allowed.iter().map(|m| m.name()).collect();
    Err(NkiError::new(
        ErrorKind::WrongMemory,
        op,
        format!(
            "expected operand '{what}' of '{op}' to be in address space '{}', but got a tile in '{}' instead ({})",
            names.join("|"),
            t.mem().name(),
            t.describe()
        ),
    ))
}

/// Two operands must have the same number of partitions.
pub(crate) fn same_partitions(
    op: &'static str,
    a: (&str, &TileRef),
    b: (&str, &TileRef),
) -> Result<()> {
    if a.1.partitions() == b.1.partitions() {
        return Ok(());
    }
    Err(NkiError::new(
        ErrorKind::PartitionMismatch,
        op,
        format!(
            "number of partitions (dimension 0 size of a tile) mismatch in parameters ({}{:?}, {}{:?}) of '{op}'",
            a.0,
            a.1.shape(),
            b.0,
            b.1.shape()
        ),
    ))
}

/// Standard checks of an on-chip operand: start-offset rule.
pub(crate) fn operand(op: &'static str, what: &str, t: &TileRef) -> Result<()> {
    partition_start(op, what, t)
}
