//! A documented example kernel, to show what `#[nki_kernel]` generates.
//!
//! [`tensor_add`](fn@tensor_add) below is an ordinary kernel. Beside the function, the macro
//! defines a type of the same name, [`tensor_add`](struct@tensor_add), whose associated
//! functions launch it:
//!
//! | launcher | what it does | returns |
//! |---|---|---|
//! | `tensor_add::launch(grid, a, b, c)` | runs every program instance of `grid` on the host CPUs and computes the values (NKI's `tensor_add[grid](a, b, c)`; `launch!(tensor_add[grid](...))` is the same call) | [`LaunchReport`] |
//! | `tensor_add::simulate(grid, target, a, b, c)` | computes the values and models the NeuronCore timeline on `target` | [`Profile`] |
//! | `tensor_add::estimate(grid, target, a, b, c)` | models the timeline only (no values; inputs may be [`Hbm::shape_only`]), with every check of the other modes | [`Profile`] |
//! | `tensor_add::run(launch, a, b, c)` | runs a [`Launch`] built with the builder API (grid, target, mode, host threads) | [`LaunchReport`] |
//!
//! Every launcher returns `Err(NkiError)` for a mistake in the kernel (an out-of-bounds slice,
//! a tile over 128 partitions, SBUF overflow, a race between instances, ...) naming the op,
//! the shapes, the program id and the kernel line; nothing panics out of a launch.
//!
//! ```
//! use nki_core::example::tensor_add;
//! use nki_core::prelude::*;
//!
//! let a = Hbm::<f32>::full([256, 1024], 1.0);
//! let b = Hbm::<f32>::full([256, 1024], 2.0);
//! let mut c = Hbm::<f32>::zeros([256, 1024]);
//! tensor_add::launch([2, 2], &a, &b, &mut c)?;                 // values
//! assert!(c.to_f32_vec()?.iter().all(|&v| v == 3.0));
//! let p = tensor_add::simulate([2, 2], Target::Trn2, &a, &b, &mut c)?; // values + timeline
//! println!("{p}");
//! let shape = Hbm::<f32>::shape_only([256, 1024]);              // no values at all
//! let mut out = Hbm::<f32>::shape_only([256, 1024]);
//! let e = tensor_add::estimate([2, 2], Target::Trn2, &shape, &shape, &mut out)?;
//! assert!(e.latency_ns > 0.0);                                   // modelled, no values
//! let r = tensor_add::run(Launch::new([2, 2]).host_threads(1), &a, &b, &mut c)?;
//! assert_eq!(r.instances.len(), 4);
//! # Ok::<(), NkiError>(())
//! ```

use crate::prelude::*;

/// `c = a + b` over `[128, 512]` tiles, one tile per program instance: instance `(i, j)` of a
/// 2-D grid adds rows `128 i ..` and columns `512 j ..`.
///
/// `a` and `b` are inputs (`&Hbm`: storing into them does not compile), `c` is an output
/// (`&mut Hbm`, shared by all instances). The grid must cover the tensors: `[rows / 128,
/// cols / 512]`.
#[nki_kernel]
pub fn tensor_add(a: &Hbm<f32>, b: &Hbm<f32>, c: &mut Hbm<f32>) {
    let i = nl::program_id(0) * 128;
    let j = nl::program_id(1) * 512;
    let x = nl::load(a.slice((i..i + 128, j..j + 512))); // HBM -> SBUF
    let y = nl::load(b.slice((i..i + 128, j..j + 512)));
    nl::store(c.slice((i..i + 128, j..j + 512)), &(&x + &y)); // VectorE add, SBUF -> HBM
}
