//! What the compiler does to a kernel's program between tracing and running it: the
//! instance's records rewritten before the timing model ([`crate::timing`]) costs them.
//! [`stage`] holds the switchable transformations of the Beta-1 compiler (duplicate removal,
//! hoisting, fusion, interchange, multi-buffering) with their sub-steps [`fuse`] and
//! [`interchange`]; [`spill`] fits the SBUF tiles of an over-committed instance into SBUF with
//! the spill traffic the compiler adds. [`config`] holds what a kernel asks of the compiler
//! (NKI 0.8's `CompileConfig`), [`allocate`] the addresses of its tiles and the waits they bring.

pub(crate) mod allocate;
pub(crate) mod config;
pub(crate) mod fuse;
pub(crate) mod interchange;
pub(crate) mod spill;
pub(crate) mod stage;
