//! Tiles whose 2-D shape is part of the type: [`Sbuf<T, P, F>`](Sbuf) and
//! [`Psum<T, P, F>`](Psum).
//!
//! A typed tile is a [`Tile`] of shape `[P, F]` and element type `T`. Because the shape is a
//! pair of const generics, the hardware limits that depend only on the shape are checked by
//! rustc instead of at run time:
//!
//! - a partition dimension `P` over 128 (`nl.tile_size.pmax`) does not compile;
//! - a PSUM tile over one 2 KiB bank per partition (`F * size_of::<T>() > 2048`) does not compile;
//! - element-wise operators (`+ - * /`) take two tiles of the same type only;
//! - [`matmul`] takes `stationary: Sbuf<T, K, M>` and `moving: Sbuf<T, K, N>`: a contraction
//!   mismatch (different `K`) does not compile, nor does `M > 128` (gemm_stationary_fmax),
//!   `N > 512` (gemm_moving_fmax) or a non-float `T`.
//!
//! The shape limits are associated-const assertions evaluated in every constructor, so they
//! are *post-monomorphization* errors: `cargo build` / `cargo test` report them (naming the
//! limit, the offending type such as `Sbuf::<bf16, 256, 512>::SHAPE_OK`, and the call site), but
//! `cargo check` does not evaluate them. The element-wise shape rule (a trait bound) and the
//! contraction rule (a type mismatch) are reported by `cargo check` as well.
//!
//! Every typed tile dereferences to its [`Tile`] and converts into a [`TileRef`] and an
//! [`Operand`], so every `nl` / `nisa` op accepts it. Shapes known only at run time (HBM views)
//! are checked when the tile is made: [`Sbuf::load`] and [`Sbuf::from_tile`] raise
//! [`ErrorKind::ShapeMismatch`] inside the kernel.

use crate::context::raise;
use crate::dtype::{DType, Element};
use crate::error::{ensure, ErrorKind, NkiError, Result, SourceLoc};
use crate::hbm::HbmSource;
use crate::lang::tile_size::{GEMM_MOVING_FMAX, GEMM_STATIONARY_FMAX, PMAX, PSUM_FMAX};
use crate::lang::{self, Operand};
use crate::math::AluOp;
use crate::record::MemKind;
use crate::tile::{Tile, TileRef};
use std::marker::PhantomData;
use std::ops::{Add, Deref, Div, Mul, Sub};

/// Bytes per partition of one PSUM bank (`psum_fmax` fp32 elements).
const PSUM_BANK_BYTES: usize = PSUM_FMAX * 4;

/// Checks that `tile` is a `[p, f]` tile of `dtype` in `mem` (the run-time side of a typed
/// tile).
fn check_typed(
    op: &'static str,
    tile: &Tile,
    mem: MemKind,
    dtype: DType,
    p: usize,
    f: usize,
    ty: &str,
) -> Result<()> {
    ensure(tile.mem() == mem, ErrorKind::WrongMemory, op, || {
        format!(
            "{} cannot become a {ty}: it lives in {}, not {}",
            tile.describe(),
            tile.mem().name(),
            mem.name()
        )
    })?;
    ensure(tile.dtype() == dtype, ErrorKind::DType, op, || {
        format!(
            "{} cannot become a {ty}: its dtype is {}, not {dtype}",
            tile.describe(),
            tile.dtype()
        )
    })?;
    ensure(tile.shape() == [p, f], ErrorKind::ShapeMismatch, op, || {
        format!(
            "{} cannot become a {ty}: its shape {:?} is not [{p}, {f}]",
            tile.describe(),
            tile.shape()
        )
    })?;
    Ok(())
}

/// The methods and trait impls shared by [`Sbuf`] and [`Psum`]. Every public constructor
/// names `Self::SHAPE_OK` itself, so a bad shape is reported at the user's call.
macro_rules! typed_tile {
    ($name:ident, $mem:expr, $memname:literal) => {
        impl<T: Element, const P: usize, const F: usize> $name<T, P, F> {
            /// Wraps a tile already known to be `[P, F]` of `T` in the right memory (the type
            /// was checked where the operands or the shape came from).
            fn wrap(tile: Tile) -> Self {
                debug_assert!(
                    tile.shape() == [P, F] && tile.dtype() == T::DTYPE && tile.mem() == $mem
                );
                $name {
                    tile,
                    _t: PhantomData,
                }
            }

            /// A tile filled with zeros (NKI `nl.zeros((P, F), dtype, buffer)`).
            #[track_caller]
            pub fn zeros() -> Self {
                Self::full(T::from_f32(0.0))
            }

            /// A tile filled with `value` (NKI `nl.full`).
            #[track_caller]
            pub fn full(value: T) -> Self {
                let () = Self::SHAPE_OK;
                Self::wrap(lang::full(&[P, F], value.to_f32(), T::DTYPE, $mem))
            }

            /// A new tile with no values yet (NKI `nl.ndarray`); reading it before writing it is
            /// an [`ErrorKind::UninitializedRead`] error.
            #[track_caller]
            pub fn ndarray() -> Self {
                let () = Self::SHAPE_OK;
                Self::wrap(lang::ndarray(&[P, F], T::DTYPE, $mem))
            }

            /// Gives a run-time-shaped tile this type, checking its memory, dtype and shape.
            /// Inside a kernel a mismatch fails the launch ([`ErrorKind::ShapeMismatch`],
            /// [`ErrorKind::DType`] or [`ErrorKind::WrongMemory`]) at the caller's line; use
            /// `TryFrom` to get the error as a value instead.
            #[track_caller]
            pub fn from_tile(tile: Tile) -> Self {
                let () = Self::SHAPE_OK;
                let loc = SourceLoc::caller();
                match Self::try_from(tile) {
                    Ok(t) => t,
                    Err(e) => raise(e, loc),
                }
            }

            /// The underlying run-time-shaped tile.
            pub fn into_tile(self) -> Tile {
                self.tile
            }

            /// The underlying tile.
            pub fn tile(&self) -> &Tile {
                &self.tile
            }

            /// The type's partition count `P`.
            pub const PARTITIONS: usize = P;

            /// The type's free size `F`.
            pub const FREE: usize = F;
        }

        impl<T: Element, const P: usize, const F: usize> TryFrom<Tile> for $name<T, P, F> {
            type Error = NkiError;

            fn try_from(tile: Tile) -> Result<Self> {
                let () = Self::SHAPE_OK;
                check_typed(
                    concat!($memname, "::from_tile"),
                    &tile,
                    $mem,
                    T::DTYPE,
                    P,
                    F,
                    &format!(concat!($memname, "<{}, {}, {}>"), T::DTYPE, P, F),
                )?;
                Ok($name {
                    tile,
                    _t: PhantomData,
                })
            }
        }

        impl<T: Element, const P: usize, const F: usize> Deref for $name<T, P, F> {
            type Target = Tile;
            fn deref(&self) -> &Tile {
                &self.tile
            }
        }

        impl<'a, T: Element, const P: usize, const F: usize> From<&'a $name<T, P, F>>
            for TileRef<'a>
        {
            fn from(t: &'a $name<T, P, F>) -> TileRef<'a> {
                t.tile.view()
            }
        }

        impl<'a, T: Element, const P: usize, const F: usize> From<&'a $name<T, P, F>>
            for Operand<'a>
        {
            fn from(t: &'a $name<T, P, F>) -> Operand<'a> {
                Operand::Tile(t.tile.view())
            }
        }

        impl<T: Element, const P: usize, const F: usize> std::fmt::Debug for $name<T, P, F> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, concat!($memname, "<{}, {}, {}>"), T::DTYPE, P, F)
            }
        }

        impl<T: Element, const P: usize, const F: usize> SameShape<TileShape<T, P, F>>
            for $name<T, P, F>
        {
            fn operand(&self) -> TileRef<'_> {
                self.tile.view()
            }
        }

        impl<T: Element, const P: usize, const F: usize> SameShape<TileShape<T, P, F>>
            for &$name<T, P, F>
        {
            fn operand(&self) -> TileRef<'_> {
                self.tile.view()
            }
        }

        typed_ops!($name, Add, add, Add, "nl.add");
        typed_ops!($name, Sub, sub, Subtract, "nl.subtract");
        typed_ops!($name, Mul, mul, Multiply, "nl.multiply");
        typed_ops!($name, Div, div, Divide, "nl.divide");
    };
}

/// Element-wise operator impls for `$lhs` and `&$lhs` with any right-hand side of the same
/// type-level shape; the result is a new SBUF tile of the same type.
macro_rules! typed_ops {
    ($lhs:ident, $tr:ident, $m:ident, $op:ident, $api:literal) => {
        typed_ops!(@impl [&] $lhs, $tr, $m, $op, $api);
        typed_ops!(@impl [] $lhs, $tr, $m, $op, $api);
    };
    (@impl [$($r:tt)?] $lhs:ident, $tr:ident, $m:ident, $op:ident, $api:literal) => {
        impl<T: Element, const P: usize, const F: usize, R: SameShape<TileShape<T, P, F>>> $tr<R>
            for $($r)? $lhs<T, P, F>
        {
            type Output = Sbuf<T, P, F>;
            #[track_caller]
            fn $m(self, rhs: R) -> Sbuf<T, P, F> {
                Sbuf::wrap(crate::lang::ops::operator(
                    AluOp::$op,
                    $api,
                    Operand::Tile(self.tile.view()),
                    Operand::Tile(rhs.operand()),
                ))
            }
        }
    };
}

/// The element type and shape `[P, F]` of a typed tile at the type level: the key
/// [`SameShape`] matches on.
pub struct TileShape<T, const P: usize, const F: usize>(PhantomData<T>);

/// Implemented by the typed tiles (and references to them) of shape `[P, F]` with elements
/// `T`: the right-hand sides an element-wise operator accepts.
#[diagnostic::on_unimplemented(
    message = "element-wise operands must have the same tile shape and dtype: the left operand is a `{Key}`, the right operand `{Self}` is not",
    label = "a tile of a different shape or dtype",
    note = "typed operators combine tiles of one type only; for broadcasting or a scalar operand use the untyped tile (`&*x + &*y`, `&*x * 2.0`, `nl::add(&x, &y)`), checked at run time"
)]
pub trait SameShape<Key> {
    /// The right-hand operand as a view.
    fn operand(&self) -> TileRef<'_>;
}

/// An SBUF tile of `P` partitions (at most 128) by `F` elements of `T`, shape checked at
/// compile time. Dereferences to [`Tile`]; `&Sbuf` is accepted wherever a tile is.
///
/// ```compile_fail,E0080
/// # use nki_core::prelude::*;
/// # fn k() {
/// let t = Sbuf::<f32, 256, 4>::zeros(); // 256 partitions: does not build
/// # }
/// # fn main() { k() }
/// ```
pub struct Sbuf<T: Element, const P: usize, const F: usize> {
    tile: Tile,
    _t: PhantomData<T>,
}

/// A PSUM tile of `P` partitions (at most 128) by `F` elements of `T`, where one partition's
/// `F * size_of::<T>()` bytes must fit one 2 KiB PSUM bank (512 fp32). Shape checked at
/// compile time. Dereferences to [`Tile`].
pub struct Psum<T: Element, const P: usize, const F: usize> {
    tile: Tile,
    _t: PhantomData<T>,
}

typed_tile!(Sbuf, MemKind::Sbuf, "Sbuf");

// A typed SBUF tile is a DMA endpoint like any tile (`nisa::dma_copy(&dst, &sbuf)`).
crate::isa::tile_endpoints! {
    ['a, T: Element, const P: usize, const F: usize] &'a Sbuf<T, P, F> => |t| t.into();
}
typed_tile!(Psum, MemKind::Psum, "Psum");

impl<T: Element, const P: usize, const F: usize> Sbuf<T, P, F> {
    /// The compile-time shape check of an SBUF tile.
    const SHAPE_OK: () = {
        assert!(
            P <= PMAX,
            "Sbuf<T, P, F>: the partition dimension P exceeds the architecture limit of 128 partitions (nl.tile_size.pmax)"
        );
        assert!(
            P > 0 && F > 0,
            "Sbuf<T, P, F>: a tile needs P >= 1 and F >= 1"
        );
    };

    /// Loads an HBM view of shape `[P, F]` into a new SBUF tile (NKI `nl.load`), casting to `T`
    /// on the way if the tensor's dtype differs. A view of another shape fails the launch with
    /// [`ErrorKind::ShapeMismatch`] at the caller's line, before any transfer is issued.
    #[track_caller]
    pub fn load(src: impl HbmSource) -> Self {
        let () = Self::SHAPE_OK;
        let loc = SourceLoc::caller();
        let view = src.hbm_view();
        let dims = view.shape();
        let ok = dims == [P, F] || (P == 1 && dims == [F]);
        if !ok {
            raise(
                NkiError::new(
                    ErrorKind::ShapeMismatch,
                    "Sbuf::load",
                    format!(
                        "cannot load HBM view {view:?} into Sbuf<{}, {P}, {F}>: the view's shape {dims:?} is not [{P}, {F}]",
                        T::DTYPE
                    ),
                ),
                loc,
            );
        }
        Self::wrap(lang::load_as(view, T::DTYPE))
    }

    /// Copies (and casts) the tile into a new SBUF tile of element type `U` (NKI `nl.copy`).
    #[track_caller]
    pub fn cast<U: Element>(&self) -> Sbuf<U, P, F> {
        Sbuf::wrap(lang::copy(&self.tile, Some(U::DTYPE)))
    }
}

impl<T: Element, const P: usize, const F: usize> Psum<T, P, F> {
    /// The compile-time shape check of a PSUM tile.
    const SHAPE_OK: () = {
        assert!(
            P <= PMAX,
            "Psum<T, P, F>: the partition dimension P exceeds the architecture limit of 128 partitions (nl.tile_size.pmax)"
        );
        assert!(
            P > 0 && F > 0,
            "Psum<T, P, F>: a tile needs P >= 1 and F >= 1"
        );
        assert!(
            F * T::DTYPE.size() <= PSUM_BANK_BYTES,
            "Psum<T, P, F>: F * size_of::<T>() exceeds one 2 KiB PSUM bank per partition (at most 512 fp32 elements, nl.tile_size.psum_fmax)"
        );
    };

    /// Copies the accumulator into a new SBUF tile of element type `U` (NKI
    /// `nl.copy(psum_tile, dtype)`: the usual PSUM to SBUF evacuation).
    #[track_caller]
    pub fn to_sbuf<U: Element>(&self) -> Sbuf<U, P, F> {
        Sbuf::wrap(lang::copy(&self.tile, Some(U::DTYPE)))
    }
}

/// The compile-time limits of one typed TensorE matmul `stationary[K, M]^T @ moving[K, N]`.
struct Matmul<T, const K: usize, const M: usize, const N: usize>(PhantomData<T>);

impl<T: Element, const K: usize, const M: usize, const N: usize> Matmul<T, K, M, N> {
    const LIMITS_OK: () = {
        assert!(
            M <= GEMM_STATIONARY_FMAX,
            "matmul: the stationary free size M exceeds gemm_stationary_fmax (128); split the stationary operand"
        );
        assert!(
            N <= GEMM_MOVING_FMAX,
            "matmul: the moving free size N exceeds gemm_moving_fmax (512); split the moving operand"
        );
        assert!(
            T::DTYPE.is_float(),
            "matmul: TensorE operands must be fp8, bf16, fp16 or fp32"
        );
    };
}

/// `stationary[K, M]^T @ moving[K, N]` into a new fp32 PSUM tile `[M, N]` (one TensorE
/// instruction, NKI `nisa.nc_matmul`). Different `K` (a type mismatch on `moving`), `M > 128`,
/// `N > 512` or a non-float `T` do not compile. The limits imply that the `[M, N]` fp32
/// result fits one PSUM bank.
#[track_caller]
pub fn matmul<T: Element, const K: usize, const M: usize, const N: usize>(
    stationary: &Sbuf<T, K, M>,
    moving: &Sbuf<T, K, N>,
) -> Psum<f32, M, N> {
    let () = Matmul::<T, K, M, N>::LIMITS_OK;
    let ins = crate::isa::op::Op::begin("nisa.nc_matmul");
    let (s, m) = (stationary.into(), moving.into());
    Psum::wrap(crate::isa::tensor::matmul_new(&ins, s, m))
}

/// `acc += stationary[K, M]^T @ moving[K, N]` in PSUM (NKI `psum[...] += nisa.nc_matmul(...)`).
/// The first matmul into an unwritten accumulator (e.g. [`Psum::ndarray`]) overwrites it.
#[track_caller]
pub fn matmul_acc<T: Element, const K: usize, const M: usize, const N: usize>(
    acc: &Psum<f32, M, N>,
    stationary: &Sbuf<T, K, M>,
    moving: &Sbuf<T, K, N>,
) {
    let () = Matmul::<T, K, M, N>::LIMITS_OK;
    crate::isa::nc_matmul(acc, stationary, moving, None);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Mode;
    use crate::error::ErrorKind;
    use crate::hbm::Hbm;
    use crate::spmd::Launch;
    use half::bf16;

    fn inputs(p: usize, f: usize) -> (Vec<f32>, Vec<f32>) {
        let a = (0..p * f).map(|k| (k % 37) as f32 * 0.37 - 5.0).collect();
        let b = (0..p * f).map(|k| (k % 11) as f32 * 1.13 + 0.5).collect();
        (a, b)
    }

    #[test]
    fn bf16_operators_round_like_the_engines() {
        let (av, bv) = inputs(64, 96);
        let to_bf = |v: &[f32]| v.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>();
        let a = Hbm::from_vec(&[64, 96], to_bf(&av)).unwrap();
        let b = Hbm::from_vec(&[64, 96], to_bf(&bv)).unwrap();
        let mut outs: Vec<Hbm<bf16>> = (0..4).map(|_| Hbm::zeros([64, 96])).collect();
        {
            let o: Vec<_> = outs.iter_mut().map(|h| h.as_output()).collect();
            Launch::new(1)
                .run(|| {
                    let x: Sbuf<bf16, 64, 96> = Sbuf::load(&a);
                    let y: Sbuf<bf16, 64, 96> = Sbuf::load(&b);
                    crate::lang::store(&o[0], &(&x + &y));
                    crate::lang::store(&o[1], &(&x - &y));
                    crate::lang::store(&o[2], &(&x * &y));
                    crate::lang::store(&o[3], &(x / y));
                })
                .unwrap();
        }
        let ops: [fn(f32, f32) -> f32; 4] =
            [|a, b| a + b, |a, b| a - b, |a, b| a * b, |a, b| a / b];
        let (ar, br) = (to_bf(&av), to_bf(&bv));
        for (h, op) in outs.iter().zip(ops) {
            let got = h.to_f32_vec().unwrap();
            for k in 0..got.len() {
                let want = bf16::from_f32(op(ar[k].to_f32(), br[k].to_f32())).to_f32();
                assert_eq!(got[k], want, "element {k}");
            }
        }
    }

    #[test]
    fn typed_tiles_go_through_every_op() {
        let (av, bv) = inputs(32, 64);
        let a = Hbm::from_vec(&[32, 32], av[..1024].to_vec()).unwrap();
        let b = Hbm::from_vec(&[32, 64], bv.clone()).unwrap();
        let mut c = Hbm::<f32>::zeros([32, 64]);
        let mut d = Hbm::<f32>::zeros([32, 64]);
        {
            let (co, dout) = (c.as_output(), d.as_output());
            Launch::new(1)
                .run(|| {
                    let s: Sbuf<f32, 32, 32> = Sbuf::load(&a);
                    let m: Sbuf<f32, 32, 64> = Sbuf::load(&b);
                    assert_eq!(
                        (Sbuf::<f32, 32, 64>::PARTITIONS, Sbuf::<f32, 32, 64>::FREE),
                        (32, 64)
                    );
                    assert_eq!(m.shape(), &[32, 64]);
                    // Untyped ops accept typed tiles.
                    let p: Psum<f32, 32, 64> = Psum::ndarray();
                    crate::isa::nc_matmul(&p, &s, &m, None);
                    let acc: Psum<f32, 32, 64> = Psum::ndarray();
                    matmul_acc(&acc, &s, &m); // opens the accumulation: overwrites
                    matmul_acc(&acc, &s, &m);
                    let twice = crate::lang::multiply(&p, 2.0f32);
                    let diff = crate::lang::subtract(&acc, &twice);
                    crate::lang::store(&co, &diff);
                    // PSUM and SBUF tiles of one type mix in operators; the result is SBUF.
                    let acc_sb: Sbuf<f32, 32, 64> = acc.to_sbuf();
                    let zero: Sbuf<f32, 32, 64> = &acc - &acc_sb;
                    assert_eq!(zero.mem(), MemKind::Sbuf);
                    assert!(zero.values().iter().all(|&v| v == 0.0));
                    let half: Sbuf<bf16, 32, 64> = acc.to_sbuf();
                    let back: Sbuf<f32, 32, 64> = half.cast();
                    crate::lang::store(&dout, &back);
                })
                .unwrap();
        }
        assert!(c.to_f32_vec().unwrap().iter().all(|&v| v == 0.0));
        let got = d.to_f32_vec().unwrap();
        for i in 0..32 {
            for j in 0..64 {
                let dot: f32 = (0..32).map(|k| av[k * 32 + i] * bv[k * 64 + j]).sum();
                let want = bf16::from_f32(2.0 * dot).to_f32();
                assert!(
                    (got[i * 64 + j] - want).abs() <= want.abs() * 1e-6,
                    "[{i}, {j}]"
                );
            }
        }
    }

    #[test]
    fn run_time_checks_of_typed_constructors() {
        let e = Launch::new(1)
            .run(|| {
                let t: Sbuf<f32, 8, 8> = Sbuf::ndarray();
                let _ = &t + &t;
            })
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UninitializedRead, "{e}");
        let e = Launch::new(1)
            .run(|| {
                let _ = Psum::<f32, 8, 8>::from_tile(crate::lang::zeros(
                    &[8, 8],
                    DType::F32,
                    MemKind::Sbuf,
                ));
            })
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WrongMemory, "{e}");
        assert!(e.message().contains("Psum<float32, 8, 8>"), "{e}");
        let full = Launch::new(1).run(|| {
            let t: Sbuf<i32, 4, 4> = Sbuf::full(7);
            assert!(t.values().iter().all(|&v| v == 7.0));
        });
        full.unwrap();
    }

    #[test]
    fn typed_tiles_in_estimate_mode() {
        let a = Hbm::<bf16>::shape_only([128, 128]);
        let b = Hbm::<bf16>::shape_only([128, 512]);
        let mut c = Hbm::<f32>::shape_only([128, 512]);
        let co = c.as_output();
        let r = Launch::new(1)
            .mode(Mode::Estimate)
            .run(|| {
                let s: Sbuf<bf16, 128, 128> = Sbuf::load(&a);
                let m: Sbuf<bf16, 128, 512> = Sbuf::load(&b);
                let p: Psum<f32, 128, 512> = Psum::ndarray();
                crate::isa::nc_matmul(&p, &s, &m, None);
                let y = &m + &m;
                crate::lang::store(&co, &p);
                drop(y);
            })
            .unwrap();
        assert!(r.profile.is_some());
        assert_eq!(r.memory.psum_banks, 1);
    }

    /// The record of `r` as JSON without what differs between two calls on the same operands:
    /// the source line and the id of the new output tile.
    fn comparable(r: &crate::record::Instr) -> serde_json::Value {
        let mut v = serde_json::to_value(r).unwrap();
        v.as_object_mut().unwrap().remove("loc");
        for w in v["writes"].as_array_mut().unwrap() {
            w.as_object_mut().unwrap().remove("buf");
        }
        v
    }

    /// For element type `T`: each typed operator (`Sbuf + Sbuf`, ...) leaves the record and
    /// computes the slots of the untyped operator on the same tiles (`&x + &y`) and of its
    /// `nl` call (`nl.add(x, y)`).
    fn typed_matches_untyped<T: Element>() {
        use crate::isa::trace::run;
        use crate::lang;
        let (p, f) = (4, 24);
        let a = Hbm::from_vec(
            &[p, f],
            (0..p * f).map(|k| (k % 13) as f32 * 3.0 - 7.0).collect(),
        )
        .unwrap();
        let b = Hbm::from_vec(&[p, f], (0..p * f).map(|k| (k % 5) as f32 + 1.0).collect()).unwrap();
        type Pair = (serde_json::Value, Vec<f32>);
        let mut forms: Vec<[Pair; 3]> = Vec::new();
        for op in 0..4 {
            let mut got: Vec<Vec<f32>> = Vec::new();
            let recs = run(Mode::Simulate, || {
                let x: Sbuf<T, 4, 24> = Sbuf::from_tile(lang::load_as(&a, T::DTYPE));
                let y: Sbuf<T, 4, 24> = Sbuf::from_tile(lang::load_as(&b, T::DTYPE));
                let (tx, ty): (&Tile, &Tile) = (&x, &y);
                let outs: [Tile; 3] = match op {
                    0 => [(&x + &y).into_tile(), tx + ty, lang::add(tx, ty)],
                    1 => [(&x - &y).into_tile(), tx - ty, lang::subtract(tx, ty)],
                    2 => [(&x * &y).into_tile(), tx * ty, lang::multiply(tx, ty)],
                    _ => [(&x / &y).into_tile(), tx / ty, lang::divide(tx, ty)],
                };
                for o in &outs {
                    got.push(o.view().gather_slots("test", SourceLoc::caller()));
                }
            })
            .unwrap();
            let ops = &recs[recs.len() - 3..];
            let mut it = got.into_iter().zip(ops).map(|(v, r)| (comparable(r), v));
            forms.push([it.next().unwrap(), it.next().unwrap(), it.next().unwrap()]);
        }
        for (op, [typed, untyped, call]) in forms.iter().enumerate() {
            let dt = T::DTYPE;
            assert_eq!(typed.0, untyped.0, "{dt} op {op}: typed vs untyped record");
            assert_eq!(typed.0["api"], call.0["api"], "{dt} op {op}");
            assert_eq!(typed.0, call.0, "{dt} op {op}: typed vs nl record");
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&typed.1), bits(&untyped.1), "{dt} op {op}: values");
            assert_eq!(bits(&typed.1), bits(&call.1), "{dt} op {op}: values");
        }
    }

    #[test]
    fn typed_operators_are_the_untyped_operators_for_every_dtype() {
        typed_matches_untyped::<f32>();
        typed_matches_untyped::<bf16>();
        typed_matches_untyped::<half::f16>();
        typed_matches_untyped::<crate::dtype::F8E4M3>();
        typed_matches_untyped::<crate::dtype::F8E5M2>();
        typed_matches_untyped::<i8>();
        typed_matches_untyped::<i16>();
        typed_matches_untyped::<i32>();
        typed_matches_untyped::<u8>();
        typed_matches_untyped::<u16>();
        typed_matches_untyped::<u32>();
    }

    #[test]
    fn typed_int32_add_is_exact_on_gpsimd() {
        use crate::isa::trace::run;
        use crate::record::Engine;
        // 2^24 + 1 is not an f32: an add rounded through f32 would lose the 1.
        let big = 16_777_217i32;
        let a = Hbm::from_vec(&[2, 4], vec![big; 8]).unwrap();
        let b = Hbm::from_vec(&[2, 4], vec![1i32; 8]).unwrap();
        let mut sum = Vec::new();
        let recs = run(Mode::Simulate, || {
            let x: Sbuf<i32, 2, 4> = Sbuf::load(&a);
            let y: Sbuf<i32, 2, 4> = Sbuf::load(&b);
            let s = &x + &y;
            sum = s.view().gather_slots("test", SourceLoc::caller());
        })
        .unwrap();
        let add = recs.last().unwrap();
        assert_eq!(add.engine, Engine::GpSimd, "int32 add runs on GpSimdE");
        assert_eq!(add.alu, Some(crate::math::AluOp::Add));
        let d = DType::I32;
        assert!(sum.iter().all(|&v| d.int(v) == big as i64 + 1), "{sum:?}");
    }
}
