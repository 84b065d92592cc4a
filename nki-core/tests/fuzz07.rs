//! A fixed-seed fuzz suite over random small NKI 0.7 kernels: random instruction sequences over
//! on-chip tensors of random shapes, dtypes (fp32, bf16) and memories (SBUF, PSUM), moved to
//! and from HBM through random views (slices and raw `.ap` patterns, now and then with numbers
//! near `usize::MAX`). Each program runs in execute, simulate and estimate modes against a
//! plain-Rust interpreter of the same program. The property: the launch returns a clear
//! `NkiError` (never a panic, never a hang; at the user's line in this file) exactly when the
//! reference finds a mistake, and otherwise the values the reference computes; simulate gives
//! execute's values and estimate its verdict.
//!
//! The generator is our own (SplitMix64, a fixed seed): a failing case prints its seed and
//! program, and `NKI_FUZZ_CASES` / `NKI_FUZZ_SEED` run more or other cases.

use nki_core::half::bf16;
use nki_core::prelude::*;
use std::sync::mpsc;
use std::time::Duration;

const FILE: &str = file!();

/// SplitMix64 (Steele, Lea and Flood, 2014): small, fast, and the same on every host.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }

    /// True with probability `p`.
    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.range(0, xs.len() - 1)]
    }
}

/// An on-chip tensor of the program.
#[derive(Clone, Copy, Debug)]
struct TileSpec {
    parts: usize,
    free: usize,
    dtype: DType,
    psum: bool,
}

/// An HBM access: a slice `[r0.., c0..]` of the tile's shape, or a raw pattern and offset.
#[derive(Clone, Debug)]
enum View {
    Slice {
        r0: usize,
        c0: usize,
        rows: usize,
        cols: usize,
    },
    Ap {
        pattern: Vec<[usize; 2]>,
        offset: usize,
    },
}

#[derive(Clone, Copy, Debug)]
enum Alu {
    Add,
    Subtract,
    Multiply,
    Max,
    Min,
}

impl Alu {
    fn op(self) -> nl::AluOp {
        match self {
            Alu::Add => nl::AluOp::Add,
            Alu::Subtract => nl::AluOp::Subtract,
            Alu::Multiply => nl::AluOp::Multiply,
            Alu::Max => nl::AluOp::Maximum,
            Alu::Min => nl::AluOp::Minimum,
        }
    }

    fn apply(self, a: f32, b: f32) -> f32 {
        match self {
            Alu::Add => a + b,
            Alu::Subtract => a - b,
            Alu::Multiply => a * b,
            Alu::Max => a.max(b),
            Alu::Min => a.min(b),
        }
    }
}

/// One instruction of a program (tiles by index).
#[derive(Clone, Debug)]
enum Step {
    Load {
        dst: usize,
        view: View,
    },
    Store {
        src: usize,
        view: View,
    },
    Memset {
        dst: usize,
        value: f32,
    },
    Copy {
        dst: usize,
        src: usize,
    },
    TensorTensor {
        dst: usize,
        a: usize,
        b: usize,
        op: Alu,
    },
    TensorScalar {
        dst: usize,
        src: usize,
        op: Alu,
        scalar: f32,
    },
    ReduceRows {
        dst: usize,
        src: usize,
        op: Alu,
    },
}

/// A random program: the input's and output's shapes, its tiles and its steps.
#[derive(Clone, Debug)]
struct Program {
    x_shape: [usize; 2],
    out_shape: [usize; 2],
    tiles: Vec<TileSpec>,
    steps: Vec<Step>,
}

/// Small exactly representable values (quarters up to +-8): fp32 and bf16 hold them, and the
/// products and sums of a few stay exact in fp32.
fn value(rng: &mut Rng) -> f32 {
    (rng.range(0, 64) as f32 - 32.0) / 4.0
}

/// A number near the end of the address space, or a plain one.
fn wild(rng: &mut Rng, plain: usize) -> usize {
    match rng.range(0, 3) {
        0 => usize::MAX - rng.range(0, 3),
        1 => usize::MAX / 2 + rng.range(0, 1),
        _ => plain,
    }
}

fn view(rng: &mut Rng, shape: [usize; 2], rows: usize, cols: usize, wild_p: f64) -> View {
    if rng.chance(0.6) {
        // A slice that fits, now and then one that does not.
        let (over_r, over_c) = (usize::from(rng.chance(0.05)), usize::from(rng.chance(0.05)));
        let r0 = rng.range(0, shape[0] - rows.min(shape[0]) + over_r);
        let c0 = rng.range(0, shape[1] - cols.min(shape[1]) + over_c);
        return View::Slice { r0, c0, rows, cols };
    }
    // A raw pattern: rows one tensor row (or another step) apart, columns 1 to 3 apart.
    let row_step = if rng.chance(0.8) {
        shape[1]
    } else {
        rng.range(0, 2 * shape[1])
    };
    let col_step = if rng.chance(0.7) { 1 } else { rng.range(0, 3) };
    let mut pattern = vec![[row_step, rows], [col_step, cols]];
    let mut offset = rng.range(0, 4);
    if rng.chance(wild_p) {
        match rng.range(0, 2) {
            0 => offset = wild(rng, offset),
            1 => pattern[0][0] = wild(rng, row_step),
            _ => pattern[1][0] = wild(rng, col_step),
        }
    }
    View::Ap { pattern, offset }
}

fn program(rng: &mut Rng) -> Program {
    // One shape for the main tiles (now and then past the partition limit), a `[P, 1]`
    // column for reductions, and now and then a tile of another shape.
    let (parts, free) = (
        if rng.chance(0.03) {
            129
        } else {
            rng.range(1, 128)
        },
        rng.range(1, 16),
    );
    let mut tiles: Vec<TileSpec> = (0..rng.range(1, 3))
        .map(|_| {
            let psum = rng.chance(0.1);
            TileSpec {
                parts,
                free,
                dtype: if psum || rng.chance(0.6) {
                    DType::F32
                } else {
                    DType::BF16
                },
                psum,
            }
        })
        .collect();
    let main = tiles.len();
    if rng.chance(0.5) {
        tiles.push(TileSpec {
            parts,
            free: 1,
            dtype: DType::F32,
            psum: false,
        });
    }
    if rng.chance(0.1) {
        tiles.push(TileSpec {
            parts: rng.range(1, 128),
            free: rng.range(1, 16),
            dtype: DType::F32,
            psum: false,
        });
    }
    // HBM tensors that usually hold a tile.
    let hbm = |rng: &mut Rng| {
        if rng.chance(0.9) {
            [parts + rng.range(0, 8), free + rng.range(0, 8)]
        } else {
            [rng.range(1, 140), rng.range(1, 24)]
        }
    };
    let (x_shape, out_shape) = (hbm(rng), hbm(rng));
    let mut steps = Vec::new();
    // Most tiles are written first: SBUF tiles by a load or a memset, then PSUM tiles (which
    // neither reaches) from the first SBUF tile.
    let first_sbuf = tiles.iter().position(|t| !t.psum).unwrap_or(0);
    let mut order: Vec<usize> = (0..tiles.len()).collect();
    order.sort_by_key(|&t| tiles[t].psum);
    for t in order {
        let spec = tiles[t];
        if spec.psum && rng.chance(0.9) {
            steps.push(Step::TensorScalar {
                dst: t,
                src: first_sbuf,
                op: Alu::Add,
                scalar: value(rng),
            });
        } else if rng.chance(0.85) {
            steps.push(if rng.chance(0.5) {
                Step::Load {
                    dst: t,
                    view: view(rng, x_shape, spec.parts, spec.free, 0.05),
                }
            } else {
                Step::Memset {
                    dst: t,
                    value: value(rng),
                }
            });
        }
    }
    let ntiles = tiles.len();
    for _ in 0..rng.range(1, 6) {
        // Operands mostly of the main shape.
        let tile = |rng: &mut Rng| {
            if rng.chance(0.9) {
                rng.range(0, main - 1)
            } else {
                rng.range(0, ntiles - 1)
            }
        };
        let (t, u, w) = (tile(rng), tile(rng), tile(rng));
        let spec = tiles[t];
        let alu = [Alu::Add, Alu::Subtract, Alu::Multiply, Alu::Max, Alu::Min];
        let step = match rng.range(0, 7) {
            0 => Step::Load {
                dst: t,
                view: view(rng, x_shape, spec.parts, spec.free, 0.1),
            },
            1 => Step::Store {
                src: t,
                view: view(rng, out_shape, spec.parts, spec.free, 0.1),
            },
            2 => Step::Memset {
                dst: t,
                value: value(rng),
            },
            3 => Step::Copy { dst: t, src: u },
            4 => Step::TensorTensor {
                dst: t,
                a: u,
                b: w,
                op: rng.pick(&alu),
            },
            5 => Step::TensorScalar {
                dst: t,
                src: u,
                op: rng.pick(&alu),
                scalar: value(rng),
            },
            _ if main == ntiles => Step::Copy { dst: t, src: u },
            _ => Step::ReduceRows {
                dst: if rng.chance(0.9) { main } else { t },
                src: u,
                op: rng.pick(&[Alu::Add, Alu::Max]),
            },
        };
        steps.push(step);
    }
    // Most programs end by storing a tile.
    if rng.chance(0.9) {
        let t = rng.range(0, ntiles - 1);
        let s = tiles[t];
        steps.push(Step::Store {
            src: t,
            view: view(rng, out_shape, s.parts, s.free, 0.0),
        });
    }
    Program {
        x_shape,
        out_shape,
        tiles,
        steps,
    }
}

// ---- the kernel: the program run by nki-rs ---------------------------------------------------

fn hbm_view(h: &HbmView, v: &View) -> HbmView {
    match v {
        View::Slice { r0, c0, rows, cols } => h.slice((*r0..r0 + rows, *c0..c0 + cols)),
        View::Ap { pattern, offset } => h.ap(pattern, *offset),
    }
}

fn out_view(h: &HbmOut<'_, f32>, v: &View) -> HbmViewMut {
    match v {
        View::Slice { r0, c0, rows, cols } => h.slice((*r0..r0 + rows, *c0..c0 + cols)),
        View::Ap { pattern, offset } => h.view().ap(pattern, *offset),
    }
}

#[nki_kernel(nki = "0.7")]
fn fuzz07(x: &Hbm<f32>, out: &mut Hbm<f32>, prog: &Program) {
    let tiles: Vec<Tensor> = prog
        .tiles
        .iter()
        .map(|s| {
            let dims = [s.parts, s.free];
            if s.psum {
                nl::ndarray(&dims, s.dtype, nl::psum)
            } else {
                nl::ndarray(&dims, s.dtype, nl::sbuf)
            }
        })
        .collect();
    for step in &prog.steps {
        match step {
            Step::Load { dst, view } => {
                nisa::dma_copy(&tiles[*dst], hbm_view(&x.view(), view), None)
            }
            Step::Store { src, view } => nisa::dma_copy(out_view(out, view), &tiles[*src], None),
            Step::Memset { dst, value } => nisa::memset(&tiles[*dst], *value, None),
            Step::Copy { dst, src } => nisa::tensor_copy(&tiles[*dst], &tiles[*src], None),
            Step::TensorTensor { dst, a, b, op } => {
                nisa::tensor_tensor(&tiles[*dst], &tiles[*a], &tiles[*b], op.op(), None)
            }
            Step::TensorScalar {
                dst,
                src,
                op,
                scalar,
            } => nisa::tensor_scalar(
                &tiles[*dst],
                &tiles[*src],
                op.op(),
                *scalar,
                None::<nisa::TensorScalarOpts>,
            ),
            Step::ReduceRows { dst, src, op } => {
                nisa::tensor_reduce(&tiles[*dst], op.op(), &tiles[*src], &[1], None)
            }
        }
    }
}

// ---- the reference: the same program in plain Rust -------------------------------------------

/// What the reference expects: the output's values, or a mistake (a short reason).
type Expected = Result<Vec<f32>, String>;

fn round_to(dtype: DType, v: f32) -> f32 {
    if dtype == DType::BF16 {
        bf16::from_f32(v).to_f32()
    } else {
        v
    }
}

/// The flat elements of `shape` that `v` reaches in row-major order, or why it cannot.
fn addresses(shape: [usize; 2], v: &View) -> Result<Vec<usize>, String> {
    let len = shape[0] * shape[1];
    let (pattern, offset) = match v {
        View::Slice { r0, c0, rows, cols } => {
            if r0 + rows > shape[0] || c0 + cols > shape[1] {
                return Err("slice out of bounds".into());
            }
            (vec![[shape[1], *rows], [1, *cols]], r0 * shape[1] + c0)
        }
        View::Ap { pattern, offset } => (pattern.clone(), *offset),
    };
    let last = pattern
        .iter()
        .try_fold(offset, |r, p| r.checked_add(p[0].checked_mul(p[1] - 1)?));
    if last.is_none_or(|l| l >= len) {
        return Err("pattern out of bounds".into());
    }
    let mut out = Vec::new();
    for i in 0..pattern[0][1] {
        for j in 0..pattern[1][1] {
            out.push(offset + i * pattern[0][0] + j * pattern[1][0]);
        }
    }
    Ok(out)
}

struct RefTile {
    spec: TileSpec,
    values: Vec<f32>,
    written: bool,
}

fn reference(prog: &Program, x: &[f32], out0: &[f32]) -> Expected {
    let mut out = out0.to_vec();
    let mut stored = false;
    let mut tiles: Vec<RefTile> = Vec::new();
    for s in &prog.tiles {
        if s.parts > 128 {
            return Err("partition limit".into());
        }
        tiles.push(RefTile {
            spec: *s,
            values: vec![0.0; s.parts * s.free],
            written: false,
        });
    }
    let read = |t: &RefTile| -> Result<Vec<f32>, String> {
        if t.written {
            Ok(t.values.clone())
        } else {
            Err("uninitialised read".into())
        }
    };
    let same_shape = |a: &TileSpec, b: &TileSpec| a.parts == b.parts && a.free == b.free;
    for step in &prog.steps {
        match step {
            Step::Load { dst, view } => {
                let t = &mut tiles[*dst];
                let addr = addresses(prog.x_shape, view)?;
                if t.spec.psum {
                    return Err("DMA into PSUM".into());
                }
                if addr.len() != t.values.len() {
                    return Err("DMA element counts differ".into());
                }
                for (k, a) in addr.iter().enumerate() {
                    t.values[k] = round_to(t.spec.dtype, x[*a]);
                }
                t.written = true;
            }
            Step::Store { src, view } => {
                let t = &tiles[*src];
                let addr = addresses(prog.out_shape, view)?;
                if t.spec.psum {
                    return Err("DMA from PSUM".into());
                }
                if addr.len() != t.values.len() {
                    return Err("DMA element counts differ".into());
                }
                let mut seen = addr.clone();
                seen.sort_unstable();
                seen.dedup();
                if seen.len() != addr.len() {
                    return Err("a store writing one element twice".into());
                }
                let v = read(t)?;
                for (k, a) in addr.iter().enumerate() {
                    out[*a] = v[k];
                }
                stored = true;
            }
            Step::Memset { dst, value } => {
                let t = &mut tiles[*dst];
                let v = round_to(t.spec.dtype, *value);
                t.values.iter_mut().for_each(|e| *e = v);
                t.written = true;
            }
            Step::Copy { dst, src } => {
                if !same_shape(&tiles[*dst].spec, &tiles[*src].spec) {
                    return Err("shapes differ".into());
                }
                let v = read(&tiles[*src])?;
                let t = &mut tiles[*dst];
                t.values = v.iter().map(|&e| round_to(t.spec.dtype, e)).collect();
                t.written = true;
            }
            Step::TensorTensor { dst, a, b, op } => {
                let (sa, sb, sd) = (tiles[*a].spec, tiles[*b].spec, tiles[*dst].spec);
                if !same_shape(&sd, &sa) || !same_shape(&sd, &sb) {
                    return Err("shapes differ".into());
                }
                if sa.psum && sb.psum {
                    return Err("both inputs in PSUM".into());
                }
                let (va, vb) = (read(&tiles[*a])?, read(&tiles[*b])?);
                let t = &mut tiles[*dst];
                t.values = va
                    .iter()
                    .zip(&vb)
                    .map(|(&p, &q)| round_to(t.spec.dtype, op.apply(p, q)))
                    .collect();
                t.written = true;
            }
            Step::TensorScalar {
                dst,
                src,
                op,
                scalar,
            } => {
                if !same_shape(&tiles[*dst].spec, &tiles[*src].spec) {
                    return Err("shapes differ".into());
                }
                let v = read(&tiles[*src])?;
                let t = &mut tiles[*dst];
                t.values = v
                    .iter()
                    .map(|&p| round_to(t.spec.dtype, op.apply(p, *scalar)))
                    .collect();
                t.written = true;
            }
            Step::ReduceRows { dst, src, op } => {
                let (ss, sd) = (tiles[*src].spec, tiles[*dst].spec);
                if sd.parts != ss.parts || sd.free != 1 {
                    return Err("reduce shapes".into());
                }
                let v = read(&tiles[*src])?;
                let t = &mut tiles[*dst];
                t.values = v
                    .chunks(ss.free)
                    .map(|row| {
                        let r = row.iter().skip(1).fold(row[0], |acc, &e| op.apply(acc, e));
                        round_to(t.spec.dtype, r)
                    })
                    .collect();
                t.written = true;
            }
        }
    }
    if !stored {
        return Err("the output is never written".into());
    }
    Ok(out)
}

// ---- the property ---------------------------------------------------------------------------

/// What one launch gave: the output's values, or the error.
type Outcome = Result<Vec<f32>, NkiError>;

/// Runs `prog` in `mode` on its own thread; a launch that does not end within a minute is a
/// hang (the test fails).
fn launch(prog: &Program, x: &[f32], out0: &[f32], mode: Mode) -> Outcome {
    let (tx, rx) = mpsc::channel();
    let (prog2, x, out0) = (prog.clone(), x.to_vec(), out0.to_vec());
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(|| {
            let (xs, os) = (prog2.x_shape, prog2.out_shape);
            let (x, mut out) = if mode == Mode::Estimate {
                (Hbm::<f32>::shape_only(xs), Hbm::<f32>::shape_only(os))
            } else {
                (
                    Hbm::from_vec(&xs, x).unwrap(),
                    Hbm::from_vec(&os, out0).unwrap(),
                )
            };
            let r = fuzz07::run(Launch::new(1).mode(mode), &x, &mut out, &prog2);
            r.map(|_| match mode {
                Mode::Estimate => Vec::new(),
                _ => out.to_f32_vec().unwrap(),
            })
        });
        let _ = tx.send(r);
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(p)) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
            panic!("{mode:?} launch panicked: {msg:?}\n{prog:#?}")
        }
        Err(_) => panic!("{mode:?} launch did not end within a minute\n{prog:#?}"),
    }
}

/// An error a user can act on: a kind that is a rule, a message, the user's line in this file.
fn is_clear(e: &NkiError) -> bool {
    e.kind() != ErrorKind::KernelPanic
        && !e.message().is_empty()
        && e.location().is_some_and(|l| l.file == FILE)
}

/// Runs one program in every mode and checks the property; returns whether it was valid.
fn check(seed: u64, prog: &Program) -> bool {
    let mut rng = Rng(seed ^ 0xA5A5);
    let x: Vec<f32> = (0..prog.x_shape[0] * prog.x_shape[1])
        .map(|_| value(&mut rng))
        .collect();
    let out0: Vec<f32> = (0..prog.out_shape[0] * prog.out_shape[1])
        .map(|k| 100.0 + k as f32)
        .collect();
    let want = reference(prog, &x, &out0);
    let exec = launch(prog, &x, &out0, Mode::Execute);
    let expected = match &want {
        Ok(v) => format!("{} values", v.len()),
        Err(why) => format!("a mistake: {why}"),
    };
    let ctx = || format!("seed {seed:#x}: expected {expected}\n{prog:?}");
    match (&want, &exec) {
        (Ok(w), Ok(got)) => {
            if w != got {
                let k = w.iter().zip(got).position(|(a, b)| a != b).unwrap_or(0);
                panic!(
                    "values differ from the reference at {k}: {} vs {}; {}",
                    got[k],
                    w[k],
                    ctx()
                );
            }
        }
        (Err(_), Err(e)) => assert!(is_clear(e), "unclear error {e:?}; {}", ctx()),
        (Ok(_), Err(e)) => panic!("a valid program failed: {e}; {}", ctx()),
        (Err(why), Ok(_)) => panic!("a mistake ({why}) went unreported; {}", ctx()),
    }
    let sim = launch(prog, &x, &out0, Mode::Simulate);
    match (&exec, &sim) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "simulate's values differ; {}", ctx()),
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{}", ctx()),
        _ => panic!("execute {exec:?} but simulate {sim:?}; {}", ctx()),
    }
    let est = launch(prog, &x, &out0, Mode::Estimate);
    match (&exec, &est) {
        (Ok(_), Ok(_)) => {}
        (Err(a), Err(b)) => {
            assert!(is_clear(b), "unclear estimate error {b:?}; {}", ctx());
            assert_eq!(a.kind(), b.kind(), "estimate: {b}; {}", ctx());
        }
        _ => panic!("execute {exec:?} but estimate {est:?}; {}", ctx()),
    }
    want.is_ok()
}

#[test]
fn random_small_07_kernels_give_the_reference_values_or_a_clear_error() {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let cases = env("NKI_FUZZ_CASES").unwrap_or(2000);
    let base = env("NKI_FUZZ_SEED").unwrap_or(0x5EED_0007);
    let mut valid = 0;
    for k in 0..cases {
        let seed = base.wrapping_add(k);
        let prog = program(&mut Rng(seed));
        valid += usize::from(check(seed, &prog));
    }
    // Both sides of the property are exercised.
    let n = cases as usize;
    eprintln!("{valid} of {n} programs valid, the others mistakes reported as errors");
    assert!(
        valid * 5 >= n && valid * 5 <= 4 * n,
        "{valid} of {n} programs valid"
    );
}
