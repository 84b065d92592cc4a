//! The hardware random-number instructions of NKI 0.7: `rng` (raw random bits), `rand2`
//! (uniform floats, NeuronCore-v4), `rand_set_state` / `rand_get_state` (a lane's full
//! generator state) and `set_rng_seed` (one seed for VectorE). Each engine keeps its XORWOW
//! generators per compute lane for the rest of the program instance (see `isa/rng_state.rs`
//! for the generator and the assumptions where the docs are silent).
//!
//! Definitions (NKI 0.7 `nki.isa.*`):
//! - `rng(dst, engine)`: 32 random bits per element, truncated to `dst`'s integer dtype by
//!   keeping the least significant bits (int8/16/32, uint8/16/32). VectorE on every
//!   NeuronCore, GpSimdE too on NeuronCore-v3+ (SBUF only there). Default engine: VectorE.
//! - `rand2(dst, min, max)`: VectorE, NeuronCore-v4+: uniform fp32 values in `[min, max]`
//!   (scalars or `[P, 1]` vectors, `min < max`), rounded to `dst`'s dtype. The fp32 value is
//!   `min + (max - min) * u` with `u = (bits >> 8) / 2^24` from one 32-bit draw \[A: the
//!   docs do not say how bits become a float\].
//! - `rand_set_state(src_seeds, engine)` / `rand_get_state(dst, engine)`: uint32 `[P, 6]`
//!   (GpSimdE) or `[P, 24]` (VectorE); partition `p` holds the state of the lane of its
//!   absolute partition index. NeuronCore-v3: GpSimdE only; v4+: GpSimdE or VectorE (the
//!   default engine is GpSimdE on v3 and VectorE on v4+ \[A\]). GpSimdE operands are in
//!   SBUF; `rand_get_state` writes SBUF on v3 and SBUF/PSUM on v4+.
//! - `set_rng_seed(src_seeds)`: one 32-bit value (`[1, 1]`, SBUF or PSUM) seeds every lane of
//!   VectorE; the same seed replays the same `rng` numbers.
//!
//! Costs: `rng`, `rand_set_state`, `set_rng_seed` and `rand_get_state` are one pass over the
//! elements (`max(MIN_II, N)` on VectorE, `150 + N` on GpSimdE) \[A: no published figure\];
//! `rand2` produces "4x 32-bit values per lane per cycle" on NeuronCore-v4 VectorE \[E ARCH3\],
//! a quarter cycle per element.

use super::base::Site;
use super::op::Op;
use super::op::PerPartition;
use super::rng_state::{xorwow_next, EngineRng, HwRng, VECTOR_GENERATORS, XORWOW_WORDS};
use super::Opts;
use crate::builder::instruction;
use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::isa::Operand;
use crate::record::{Engine, MemKind, Opcode};
use crate::tile::TileRef;

/// uint32 words of an engine's per-lane state: 6 for GpSimdE, 24 for VectorE.
pub(crate) fn rng_state_words(engine: Engine) -> usize {
    match engine {
        Engine::Vector => XORWOW_WORDS * VECTOR_GENERATORS,
        _ => XORWOW_WORDS,
    }
}

/// The NeuronCore version of the target.
fn nc_version(ins: &Op) -> u8 {
    ins.target().spec().nc_version
}

/// `newer` on NeuronCore-v`min` and newer targets, else `older`.
fn since<T>(ins: &Op, min: u8, newer: T, older: T) -> T {
    if nc_version(ins) >= min {
        newer
    } else {
        older
    }
}

/// The engine a generator instruction runs on: `asked`, or `default`, checked against the
/// engines of this NeuronCore version (`allowed`).
fn rng_engine(ins: &Op, asked: Option<Engine>, default: Engine, allowed: &[Engine]) -> Engine {
    let engine = asked.unwrap_or(default);
    ins.engine_in(engine, allowed);
    engine
}

/// The memories an operand of a generator instruction on `engine` may live in.
fn engine_mem(engine: Engine) -> &'static [MemKind] {
    match engine {
        Engine::GpSimd => &[MemKind::Sbuf],
        _ => &[MemKind::Sbuf, MemKind::Psum],
    }
}

/// Draws one 32-bit number per element of a `[parts, free]` block whose first partition is
/// lane `lane0`, from `rng`'s generators (element `j` of a lane uses generator `j % gens`).
fn draw(rng: &mut EngineRng, lane0: usize, parts: usize, free: usize) -> Vec<u32> {
    let mut out = Vec::with_capacity(parts * free);
    for p in 0..parts {
        let lane = &mut rng.lanes[lane0 + p];
        let gens = lane.len() / XORWOW_WORDS;
        for j in 0..free {
            let g = j % gens;
            out.push(xorwow_next(
                &mut lane[g * XORWOW_WORDS..(g + 1) * XORWOW_WORDS],
            ));
        }
    }
    out
}

/// Runs `f` on the generators of `engine` in this instance.
fn with_engine_rng<R>(ins: &Op, engine: Engine, f: impl FnOnce(&mut EngineRng) -> R) -> R {
    ins.with_ctx(|c| f(c.state.get::<HwRng>().engine(engine == Engine::Vector)))
}

/// Writes 32 random bits per element into `dst`, keeping the least significant bits that fit
/// its integer dtype (NKI 0.7 `nisa.rng(dst, engine)`). VectorE by default; GpSimdE (SBUF
/// only) on NeuronCore-v3+. Each lane draws from its own generators, so the numbers depend on
/// the engine's state (`rand_set_state`, `set_rng_seed`).
#[track_caller]
pub fn rng<'d>(dst: impl Into<TileRef<'d>>, opts: impl Into<Option<Opts>>) {
    let ins = Op::begin("nisa.rng");
    let dst: TileRef = dst.into();
    let allowed: &[Engine] = since(
        &ins,
        3,
        &[Engine::Vector, Engine::GpSimd],
        &[Engine::Vector],
    );
    let engine = rng_engine(
        &ins,
        opts.into().and_then(|o| o.engine),
        Engine::Vector,
        allowed,
    );
    ins.operand("dst", &dst);
    ins.memory("dst", &dst, engine_mem(engine));
    let dtype = dst.dtype();
    if !dtype.is_int() {
        ins.fail(
            ErrorKind::DType,
            format!(
                "dst {} of 'rng' must be an integer dtype (int8, int16, int32, uint8, uint16 or uint32)",
                dst.describe()
            ),
        );
    }
    let site = Site::new(engine, Opcode::Rng);
    ins.compute(site, &[], &[], &[&dst], || {
        let bits = with_engine_rng(&ins, engine, |r| {
            draw(r, dst.start_partition(), dst.partitions(), dst.free_size())
        });
        let out: Vec<f32> = bits
            .into_iter()
            .map(|b| {
                let v = match dtype {
                    DType::I8 => b as u8 as i8 as i64,
                    DType::U8 => b as u8 as i64,
                    DType::I16 => b as u16 as i16 as i64,
                    DType::U16 => b as u16 as i64,
                    DType::I32 => b as i32 as i64,
                    _ => b as i64,
                };
                dtype.slot_of_int(v)
            })
            .collect();
        dst.scatter_slots(out);
    });
}

instruction! {
    /// Writes uniform random values in `[min, max]` into `dst` (NKI 0.7 `nisa.rand2(dst, min,
    /// max)`; NeuronCore-v4+, VectorE). `min` and `max` are fp32 scalars or `[P, 1]` vectors with
    /// `min < max`; the fp32 values are rounded to `dst`'s dtype.
    pub fn rand2<'d, 'a, 'b>(dst: into TileRef<'d>, min: into Operand<'a>, max: into Operand<'b>)
    as ins = "nisa.rand2" {
        rand2_on(&ins, dst, min, max);
    }
}

/// [`rand2`] on its converted operands.
#[track_caller]
fn rand2_on(ins: &Op, dst: TileRef, min: Operand, max: Operand) {
    super::alu_rules::instruction_since(ins, 4);
    ins.operand("dst", &dst);
    ins.memory("dst", &dst, &[MemKind::Sbuf, MemKind::Psum]);
    ins.dtype_rule(
        &dst,
        |d| !(d == DType::Bool || d.mx_element().is_some() || d == DType::F8E8M0),
        |dst| format!("dst {dst} of 'rand2' must be float8_e4m3, float8_e5m2, float16, bfloat16, float32 or an 8/16/32-bit integer"),
    );
    let p = dst.partitions();
    let lo = ins.per_partition("min", min, p);
    let hi = ins.per_partition("max", max, p);
    if let (PerPartition::Scalar(a), PerPartition::Scalar(b)) = (&lo, &hi) {
        if a >= b {
            ins.fail(
                ErrorKind::InvalidArgument,
                format!("min {a} of 'rand2' must be less than max {b}"),
            );
        }
    }
    let extra: Vec<&TileRef> = [lo.tile(), hi.tile()].into_iter().flatten().collect();
    let site = Site::new(Engine::Vector, Opcode::Rand2);
    ins.compute(site, &[], &extra, &[&dst], || {
        let (a, b) = (lo.values(ins, p), hi.values(ins, p));
        if let Some(q) = (0..p).find(|&q| a[q].partial_cmp(&b[q]) != Some(std::cmp::Ordering::Less))
        {
            ins.fail(
                ErrorKind::InvalidArgument,
                format!(
                    "min {} of 'rand2' must be less than max {} (partition {q})",
                    a[q], b[q]
                ),
            );
        }
        let f = dst.free_size();
        let bits = with_engine_rng(ins, Engine::Vector, |r| {
            draw(r, dst.start_partition(), p, f)
        });
        let out: Vec<f32> = bits
            .iter()
            .enumerate()
            .map(|(k, &x)| {
                let u = (x >> 8) as f32 * (1.0 / (1u32 << 24) as f32);
                let q = k / f;
                a[q] + (b[q] - a[q]) * u
            })
            .collect();
        dst.scatter(out);
    });
}

/// The engine of `rand_set_state` / `rand_get_state` and the checks of their state operand
/// `what` (uint32, 2-D, 6 or 24 words per partition, in a memory the engine reaches).
fn state_operand(
    ins: &Op,
    what: &str,
    t: &TileRef,
    asked: Option<Engine>,
    mem: &[MemKind],
) -> Engine {
    super::alu_rules::instruction_since(ins, 3);
    let (default, allowed): (Engine, &[Engine]) = since(
        ins,
        4,
        (Engine::Vector, &[Engine::Vector, Engine::GpSimd]),
        (Engine::GpSimd, &[Engine::GpSimd]),
    );
    let engine = rng_engine(ins, asked, default, allowed);
    ins.operand(what, t);
    let mem: &[MemKind] = if engine == Engine::GpSimd {
        &[MemKind::Sbuf]
    } else {
        mem
    };
    ins.memory(what, t, mem);
    let words = rng_state_words(engine);
    if t.dtype() != DType::U32 || t.shape().len() != 2 || t.free_size() != words {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "{what} {} of '{}' must be a 2-D uint32 tile of {words} state words per partition on {}",
                t.describe(),
                super::base::short(ins.api),
                engine.name()
            ),
        );
    }
    engine
}

/// Seeds the generators of `engine` from `src_seeds` (uint32 `[P, 6]` for GpSimdE, `[P, 24]`
/// for VectorE): partition `p` becomes the whole state of the lane of its absolute partition
/// index (NKI 0.7 `nisa.rand_set_state(src_seeds, engine)`; NeuronCore-v3+). The state lasts
/// for the rest of the program instance.
#[track_caller]
pub fn rand_set_state<'s>(src_seeds: impl Into<TileRef<'s>>, opts: impl Into<Option<Opts>>) {
    let ins = Op::begin("nisa.rand_set_state");
    let src: TileRef = src_seeds.into();
    let asked = opts.into().and_then(|o| o.engine);
    let engine = state_operand(
        &ins,
        "src_seeds",
        &src,
        asked,
        &[MemKind::Sbuf, MemKind::Psum],
    );
    let site = Site::new(engine, Opcode::SetRngSeed);
    ins.compute(site, &[&src], &[], &[], || {
        let words = src.gather_slots(ins.api, ins.loc);
        let n = rng_state_words(engine);
        let lane0 = src.start_partition();
        with_engine_rng(&ins, engine, |r| {
            for (p, row) in words.chunks(n).enumerate() {
                r.lanes[lane0 + p] = row.iter().map(|&s| DType::U32.int(s) as u32).collect();
            }
        });
    });
}

/// Writes the current generator state of `engine` into `dst` (uint32 `[P, 6]` for GpSimdE,
/// `[P, 24]` for VectorE; partition `p` the lane of its absolute partition index) (NKI 0.7
/// `nisa.rand_get_state(dst, engine)`; NeuronCore-v3+; SBUF on v3, SBUF or PSUM on v4+).
#[track_caller]
pub fn rand_get_state<'d>(dst: impl Into<TileRef<'d>>, opts: impl Into<Option<Opts>>) {
    let ins = Op::begin("nisa.rand_get_state");
    let dst: TileRef = dst.into();
    let mem: &[MemKind] = since(&ins, 4, &[MemKind::Sbuf, MemKind::Psum], &[MemKind::Sbuf]);
    let engine = state_operand(&ins, "dst", &dst, opts.into().and_then(|o| o.engine), mem);
    let site = Site::new(engine, Opcode::RngGetState);
    ins.compute(site, &[], &[], &[&dst], || {
        let lane0 = dst.start_partition();
        let out: Vec<f32> = with_engine_rng(&ins, engine, |r| {
            r.lanes[lane0..lane0 + dst.partitions()]
                .iter()
                .flatten()
                .map(|&w| DType::U32.slot_of_int(w as i64))
                .collect()
        });
        dst.scatter_slots(out);
    });
}

/// Seeds every lane of VectorE's generators from one 32-bit value (`src_seeds`, a `[1, 1]`
/// uint32/int32/float32 tile in SBUF or PSUM, read as its bit pattern) (NKI 0.7
/// `nisa.set_rng_seed(src_seeds)`): the same seed replays the same `rng` numbers. How the
/// hardware expands one value into each lane's state is not documented \[A\].
#[track_caller]
pub fn set_rng_seed<'s>(src_seeds: impl Into<TileRef<'s>>) {
    let ins = Op::begin("nisa.set_rng_seed");
    let src: TileRef = src_seeds.into();
    ins.operand("src_seeds", &src);
    ins.memory("src_seeds", &src, &[MemKind::Sbuf, MemKind::Psum]);
    if src.partitions() != 1 || src.free_size() != 1 || src.dtype().size() != 4 {
        ins.fail(
            ErrorKind::ShapeMismatch,
            format!(
                "src_seeds {} of 'set_rng_seed' must be a [1, 1] tile of a 32-bit dtype",
                src.describe()
            ),
        );
    }
    let site = Site::new(Engine::Vector, Opcode::SetRngSeed);
    ins.compute(site, &[&src], &[], &[], || {
        let slot = src.gather_slots(ins.api, ins.loc)[0];
        let seed = match src.dtype() {
            DType::F32 => slot.to_bits(),
            d => d.int(slot) as u32,
        };
        with_engine_rng(&ins, Engine::Vector, |r| {
            *r = EngineRng::seeded(seed, VECTOR_GENERATORS);
        });
    });
}
