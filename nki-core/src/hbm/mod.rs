//! Device tensors in HBM: [`Hbm`] (owned by the host, shared read-only by program instances),
//! [`HbmOut`] (a kernel output: the exclusive borrow of an `Hbm` for one launch), and the views
//! and slices of both that `nl::load` / `nl::store` / `nisa::dma_copy` take.
//!
//! Each tensor also tracks which program instance (and affine_range iteration) stored to,
//! updated or loaded which of its elements during the current launch, as rectangles of
//! elements per access (`track.rs`, `rect.rs`): that is how overlapping writes and read-write
//! races are detected (NKI's "unexpected output dependencies"), in every launch mode, so
//! estimate-mode launches on [`Hbm::shape_only`] tensors detect races too.
//!
//! The folder: `tensor.rs` holds the tensors, `storage.rs` what they share, `view.rs` their
//! views and slices, `borrow.rs` tensors over lent host memory ([`with_borrowed`]) and moving
//! values out ([`Hbm::into_vec`]); `write.rs` the tracked stores, loads and atomic updates,
//! `track.rs` the access tracker, `rect.rs` the rectangles it keeps, `writers.rs` who wrote
//! what and which writers conflict. The values themselves (shared with the tiles loaded from
//! them) are `crate::values::Values`.

mod borrow;
pub(crate) mod observe;
mod rect;
pub(crate) mod shared;
mod storage;
mod tensor;
pub(crate) mod track;
pub(crate) mod view;
pub(crate) mod write;
pub(crate) mod writers;

pub use borrow::{with_borrowed, Lender};
pub use tensor::{Hbm, HbmOut};
pub use view::{HbmDest, HbmSource, HbmView, HbmViewMut};

pub(crate) use storage::{check_written, no_data, take_pending_outputs, try_zeros, HbmStorage};
