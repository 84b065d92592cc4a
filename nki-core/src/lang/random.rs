//! Random numbers: `nl.rand`, `nl.random_seed` and `nl.dropout`, all from the PRNG of VectorE.
//!
//! Every program instance owns one generator, created fresh when the instance starts (so a
//! launch is reproducible: the same kernel on the same grid gives the same numbers, in every
//! launch and whatever the thread timing). The generator is counter based (SplitMix64 over a
//! per-instance key): the `k`-th number an instance draws is `mix(key + k * golden)`. The key
//! mixes the seed (default [`DEFAULT_SEED`], or the one given to [`random_seed`]) with the
//! linear program id, so instances draw independent streams even under the same seed, while
//! re-seeding with one seed replays one stream. [`rand`] and [`dropout`] draw one number per
//! element, in row-major order, from the same stream.

use crate::builder::instruction;
use crate::context::LaunchShared;
use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::isa::base::{Dst, Output};
use crate::isa::op::Op;
use crate::isa::Operand;
use crate::record::{Engine, MemKind, Opcode, Regions};
use crate::tile::{give_buf, Tile, TileRef};
use std::cell::RefCell;
use std::sync::{Arc, Weak};

/// The seed of an instance's generator until [`random_seed`] is called.
pub const DEFAULT_SEED: u32 = 0x5EED_0001;

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// The SplitMix64 finaliser.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The generator key of `seed` in the instance with linear program id `pid`.
fn key(seed: u32, pid: u64) -> u64 {
    mix64(mix64(seed as u64 ^ 0x6E6B_692D_7273) ^ pid.wrapping_mul(0xD1B5_4A32_D192_ED03))
}

/// One instance's generator.
struct RngState {
    /// The launch the instance belongs to. A `Weak` keeps the launch's allocation alive, so a
    /// later launch can never reuse its address and be mistaken for it.
    launch: Weak<LaunchShared>,
    instance: u64,
    /// Linear program id (mixed into the key).
    pid: u64,
    key: u64,
    /// Numbers drawn since the last seeding.
    counter: u64,
}

impl RngState {
    /// Draws `n` numbers: `f(k, bits)` for the `k`-th of them.
    fn draw(&mut self, n: usize, mut f: impl FnMut(usize, u64)) {
        for k in 0..n {
            let c = self.counter.wrapping_add(k as u64 + 1);
            f(k, mix64(self.key.wrapping_add(c.wrapping_mul(GOLDEN))));
        }
        self.counter = self.counter.wrapping_add(n as u64);
    }
}

thread_local! {
    /// The generator of the instance running on this thread (instances of one NeuronCore run
    /// one after another on its thread; a new instance replaces the state).
    static RNG: RefCell<Option<RngState>> = const { RefCell::new(None) };
}

/// Runs `f` on the running instance's generator, creating it (seeded with [`DEFAULT_SEED`])
/// when the instance has not drawn yet.
fn with_rng<R>(ins: &Op, f: impl FnOnce(&mut RngState) -> R) -> R {
    let (launch, instance, pid) = ins.with_ctx(|c| {
        let mut lin = 0u64;
        for (i, &p) in c.program_id.iter().enumerate() {
            let n = c.grid.get(i).copied().unwrap_or(1).max(1) as u64;
            lin = lin.wrapping_mul(n).wrapping_add(p as u64);
        }
        (Arc::downgrade(&c.shared), c.instance, lin)
    });
    RNG.with(|r| {
        let mut r = r.borrow_mut();
        let same = matches!(&*r, Some(s) if s.launch.ptr_eq(&launch) && s.instance == instance);
        if !same {
            *r = Some(RngState {
                launch,
                instance,
                pid,
                key: key(DEFAULT_SEED, pid),
                counter: 0,
            });
        }
        f(r.as_mut().expect("set above"))
    })
}

/// Random bits kept for a uniform number in `dtype`: its mantissa bits plus one, so that the
/// numbers `j / 2^k` are exact in `dtype` and never round up to 1.
fn uniform_bits(dtype: DType) -> Option<u32> {
    match dtype {
        DType::F32 => Some(24),
        DType::F16 => Some(11),
        DType::BF16 => Some(8),
        DType::F8E4M3 => Some(4),
        DType::F8E5M2 => Some(3),
        _ => None,
    }
}

/// The uniform number in `[0, 1)` with `k` bits from 64 random bits.
fn uniform(bits: u64, k: u32) -> f32 {
    (bits >> (64 - k)) as f32 / (1u64 << k) as f32
}

/// Seeds the instance's random number generator (NKI `nl.random_seed`): the [`rand`] and
/// [`dropout`] calls that follow draw the stream of `seed`, so seeding again with the same
/// value replays the same numbers. The stream also depends on the program id, so instances
/// seeded alike still draw independent numbers. One VectorE instruction.
#[track_caller]
pub fn random_seed(seed: u32) {
    const API: &str = "nl.random_seed";
    let ins = Op::begin(API);
    // The generator state advances in every mode (estimate mode has no values but the same
    // instruction stream).
    with_rng(&ins, |s| {
        s.key = key(seed, s.pid);
        s.counter = 0;
    });
    ins.issue(
        &[],
        || {},
        || {
            ins.record_as(API, Engine::Vector, Opcode::SetRngSeed)
                .size(1, 1)
                .inputs(0)
                .dtypes(DType::U32, DType::U32)
                .done()
        },
    );
}

/// A new SBUF tile of shape `dims` filled with uniform random numbers in `[0, 1)` (NKI
/// `nl.rand`). `dtype` must be a float type; the numbers are multiples of `2^-k` with `k` the
/// dtype's mantissa bits plus one (24 for float32, 8 for bfloat16), exact in the dtype, so none
/// rounds up to 1. One VectorE instruction, cost `max(64, N)`.
#[track_caller]
pub fn rand(dims: &[usize], dtype: DType) -> Tile {
    const API: &str = "nl.rand";
    let ins = Op::begin(API);
    let Some(k) = uniform_bits(dtype) else {
        ins.fail(
            ErrorKind::DType,
            format!("'rand' generates floats in [0, 1); dtype {dtype} is not a float type"),
        );
    };
    let out = ins.alloc(MemKind::Sbuf, dtype, dims);
    let ov = out.view();
    let n = out.shape.numel();
    ins.issue(
        &[&ov],
        || {
            let mut vals = Vec::with_capacity(n);
            with_rng(&ins, |s| s.draw(n, |_, b| vals.push(uniform(b, k))));
            ov.scatter(vals);
        },
        || {
            if !ins.executes() {
                with_rng(&ins, |s| s.draw(n, |_, _| {}));
            }
            ins.record_as(API, Engine::Vector, Opcode::Rng)
                .size(dims[0] as u32, ov.free_size() as u32)
                .inputs(0)
                .dtypes(dtype, dtype)
                .writes([ov.region()])
                .done()
        },
    );
    out
}

/// Randomly zeroes elements of `x` (NKI `nl.dropout`): each element is replaced by 0 with
/// probability `rate` and kept unchanged otherwise. As documented for NKI (`nl.dropout` /
/// `nisa.dropout`: "if the probability is 0.0, all elements are kept with their original
/// values"), the kept elements are **not** rescaled by `1 / (1 - rate)`; multiply by it
/// yourself for inverted dropout.
///
/// `rate` is a scalar in `[0, 1]` or an fp32 `[P, 1]` tile of per-partition probabilities.
/// Element `i` (row-major) is dropped when the `i`-th float32 number [`rand`] would draw at
/// this point of the stream is below the rate, so `rate` 0 keeps everything and 1 drops
/// everything. The output has the dtype of `x`. One VectorE instruction, cost `max(64, N)`.
#[track_caller]
pub fn dropout<'a, 'b>(x: impl Into<TileRef<'a>>, rate: impl Into<Operand<'b>>) -> Tile {
    dropout_to(
        &Op::begin("nl.dropout"),
        Dst::New(None),
        x.into(),
        rate.into(),
    )
    .tile()
}

instruction! {
    /// [`dropout`] into `dst` (NKI 0.7 `nisa.dropout(dst, data, prob)`, exported as
    /// `nisa::dropout`): `dst` has `data`'s dtype, partitions and elements per partition, in SBUF
    /// or PSUM; the same numbers as [`dropout`] draws.
    pub fn dropout_into<'d, 'a, 'b>(
        dst: into TileRef<'d>, data: into TileRef<'a>, prob: impl Into<Operand<'b>>,
    ) as ins = "nisa.dropout" {
        same_dtype(&ins, &dst, &data);
        dropout_to(&ins, Dst::Into(dst), data, prob.into());
    }
}

/// `dropout_into`'s `dst` has `data`'s dtype.
#[track_caller]
fn same_dtype(ins: &Op, dst: &TileRef, x: &TileRef) {
    if dst.dtype() != x.dtype() {
        ins.fail(
            ErrorKind::DType,
            format!(
                "dst {} of 'dropout' must have data's dtype {} (the output dtype matches the input)",
                dst.describe(),
                x.dtype()
            ),
        );
    }
}

/// The dropout builder: `x`'s elements zeroed with probability `rate` into `dst`.
fn dropout_to<'d>(ins: &Op, dst: Dst<'d>, x: TileRef, rate: Operand) -> Output<'d> {
    ins.operand("x", &x);
    let rate_tile = match rate {
        Operand::Scalar { value, .. } => {
            if !(0.0..=1.0).contains(&value) {
                ins.fail(
                    ErrorKind::InvalidArgument,
                    format!("drop probability 'rate' must be in [0, 1], got {value}"),
                );
            }
            None
        }
        Operand::Tile(r) => {
            ins.operand("rate", &r);
            if r.partitions() != x.partitions() || r.free_size() != 1 {
                ins.fail(ErrorKind::ShapeMismatch, format!(
                            "operand 'rate' {} of 'dropout' must be a [{}, 1] tile of per-partition probabilities for x{:?}",
                            r.describe(),
                            x.partitions(),
                            x.shape()
                        ));
            }
            // NKI: "if data type of data is any of the integer types, prob data type must be
            // float32"; for float data any float type.
            let ok = if x.dtype().is_float() {
                r.dtype().is_float()
            } else {
                r.dtype() == DType::F32
            };
            if !ok {
                ins.fail(
                    ErrorKind::DType,
                    format!(
                        "operand 'rate' {} of 'dropout' must be a {} tile for {} data, got {}",
                        r.describe(),
                        if x.dtype().is_float() {
                            "float"
                        } else {
                            "float32"
                        },
                        x.dtype(),
                        r.dtype()
                    ),
                );
            }
            Some(r)
        }
    };
    let scalar_rate = match rate {
        Operand::Scalar { value, .. } => value as f32,
        Operand::Tile(_) => 0.0,
    };
    let dtype = x.dtype();
    let out = ins.output(dst, MemKind::Sbuf, dtype, x.shape(), true);
    let ov = out.view();
    let n = x.ap.shape.numel();
    let free = x.free_size().max(1);
    ins.issue(
        &[&ov],
        || {
            let xs = ins.read(&x);
            let rates: Vec<f32> = match rate_tile {
                Some(r) => ins.read(&r),
                None => vec![scalar_rate],
            };
            let mut vals = Vec::with_capacity(n);
            with_rng(ins, |s| {
                s.draw(n, |k, b| {
                    let r = if rates.len() == 1 {
                        rates[0]
                    } else {
                        rates[k / free]
                    };
                    vals.push(if uniform(b, 24) < r { 0.0 } else { xs[k] });
                })
            });
            give_buf(xs);
            ov.write_with(true, |o| o.extend_from_slice(&vals));
        },
        || {
            if !ins.executes() {
                with_rng(ins, |s| s.draw(n, |_, _| {}));
            }
            let mut reads = Regions::from([x.region()]);
            reads.extend(rate_tile.map(|r| r.region()));
            ins.record_as(ins.api, Engine::Vector, Opcode::Dropout)
                .size(x.partitions() as u32, x.free_size() as u32)
                .dtypes(dtype, dtype)
                .psum(x.mem() == MemKind::Psum)
                .contiguous(x.ap.inner_stride() == 1)
                .reads(reads)
                .writes([ov.region()])
                .done()
        },
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Mode;
    use crate::isa::trace::run;

    #[test]
    fn uniform_numbers_are_exact_in_their_dtype_and_below_one() {
        for d in [
            DType::F32,
            DType::BF16,
            DType::F16,
            DType::F8E4M3,
            DType::F8E5M2,
        ] {
            let k = uniform_bits(d).unwrap();
            for bits in [
                0u64,
                u64::MAX,
                1 << 63,
                (1 << 63) - 1,
                0x1234_5678_9abc_def0,
            ] {
                let u = uniform(bits, k);
                assert!((0.0..1.0).contains(&u), "{d}: {u}");
                assert_eq!(d.round(u), u, "{d}: {u} is not exact");
            }
        }
    }

    #[test]
    fn records_follow_the_stream_in_estimate_mode_too() {
        for mode in [Mode::Simulate, Mode::Estimate] {
            let recs = run(mode, || {
                random_seed(7);
                let r = rand(&[32, 100], DType::BF16);
                let d = dropout(&r, 0.25);
                assert_eq!(d.shape(), &[32, 100]);
                // The stream advanced by both draws in either mode.
                let drawn = with_rng(&Op::begin("test"), |s| s.counter);
                assert_eq!(drawn, 2 * 3200);
            })
            .unwrap();
            let ops: Vec<(Engine, Opcode, u32, u32)> = recs
                .iter()
                .map(|r| (r.engine, r.opcode, r.partitions, r.free))
                .collect();
            assert_eq!(
                ops,
                vec![
                    (Engine::Vector, Opcode::SetRngSeed, 1, 1),
                    (Engine::Vector, Opcode::Rng, 32, 100),
                    (Engine::Vector, Opcode::Dropout, 32, 100),
                ]
            );
            assert!(recs[1].reads.is_empty() && recs[1].writes.len() == 1);
            assert_eq!(recs[2].reads.len(), 1);
            assert_eq!(recs[2].reads[0], recs[1].writes[0]);
        }
    }
}
