//! NKI 0.7's `name=` keyword of the instructions: [`named`] gives every instruction issued by
//! its closure a name, carried by the op handle into each record and shown in the profile
//! (its op rows, the Chrome trace's events) and in the errors raised through the handle.
//! One mechanism for every `nisa` instruction and `nl` call, instead of a field on each
//! options struct.

use crate::context::with_ctx;
use crate::error::SourceLoc;
use crate::names::InstrName;

/// Runs `f` with the instructions it issues named `name` (NKI `nisa.x(..., name="qk")` is
/// `nisa::named("qk", || nisa::x(...))`); returns what `f` returns. Inside, a nested `named`
/// names its own instructions; afterwards the name in force before applies again. Outside a
/// kernel it is an [`ErrorKind::OutsideKernel`](crate::ErrorKind::OutsideKernel) error.
///
/// ```
/// use nki_core::nisa::AluOp;
/// use nki_core::prelude::*;
///
/// let x = Hbm::from_vec(&[1, 3], vec![1.0f32, 2.0, 3.0]).unwrap();
/// let profile = Launch::new(1)
///     .mode(Mode::Simulate)
///     .run(|| {
///         let (t, s) = (nl::ndarray(&[1, 3], DType::F32, nl::sbuf), nl::ndarray(&[1, 3], DType::F32, nl::sbuf));
///         nisa::dma_copy(&t, &x, None);
///         nisa::named("double", || nisa::tensor_tensor(&s, &t, &t, AluOp::Add, None));
///     })
///     .unwrap()
///     .profile
///     .unwrap();
/// let add = profile.ops.iter().find(|o| o.api == "nisa.tensor_tensor").unwrap();
/// assert_eq!(add.name.map(|n| n.as_str()), Some("double"));
/// ```
#[track_caller]
pub fn named<R>(name: &str, f: impl FnOnce() -> R) -> R {
    const API: &str = "nisa.named";
    let loc = SourceLoc::caller();
    let name = Some(InstrName::new(name));
    let outer = with_ctx(API, loc, |c| std::mem::replace(&mut c.name, name));
    let r = f();
    with_ctx(API, loc, |c| c.name = outer);
    r
}
