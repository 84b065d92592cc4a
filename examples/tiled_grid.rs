//! NKI 0.8's tiled-programming tutorials in Rust: tile-grid views, block grids and software
//! pipelining with stream buffers.
//!
//! 1. **Tile grids** (`nl::tiles`): `c = a + b` over `[1000, 700]` tensors walked in
//!    `[128, 512]` tiles. The grid is `8 x 2` tiles; the last row of tiles has 104 rows and
//!    the last column 188 columns: `grid.get((i, j)).data()` is the clamped view of a partial
//!    tile, and `element_shape()` sizes the SBUF tile that receives it. No index arithmetic
//!    and no special case for the edges.
//! 2. **Block grids** (`nl::blocks`): the same sum computed in `[128, 128]` tiles (512 bytes
//!    per partition, below the DMA's efficient size), moved either one tile per DMA or in
//!    blocks of `1 x 4` tiles (2 KiB per partition, one DMA per block) while the add still
//!    runs tile by tile over `nl::tiles` of the block's SBUF copy. The tile shape stays the
//!    compute grain and the block shape becomes a tuning knob for the transfer grain.
//! 3. **Software pipelining** (`nl::alloc_stream_buffers`): `y = exp(x)` over `[2000, 1024]`
//!    streamed in 128-row steps through two pools of slots, one for the loads and one for the
//!    results. Step `k` uses slot `k % num_slots` of each pool; the last step (80 rows) is a
//!    clamped view of its slot. With one slot, the load of step `k + 1` waits until step `k`
//!    has been read (its slot is overwritten); with two or three, the next load runs beside
//!    the current step's compute and the previous step's store. The modelled time shows what
//!    each extra slot buys.
//!
//! Every version runs in simulate mode on trn2 (values and the modelled time) and in estimate
//! mode (no values); the example prints "match" per version when its output equals the
//! ndarray reference and estimate models the time simulate does.
//!
//! Run with `cargo run --release --example tiled_grid`.

use ndarray::Array2;
use nki_core::nl::ActFn;
use nki_core::prelude::*;
use std::process::ExitCode;

/// `c = a + b`, tile by tile over a `[128, 512]` tile grid (partial tiles at the edges).
#[nki_kernel(nki = "0.8")]
fn add_grid(a: &Hbm<f32>, b: &Hbm<f32>) -> Hbm<f32> {
    let c = nl::ndarray(a.shape(), DType::F32, nl::shared_hbm);
    let (ga, gb, gc) = (
        nl::tiles(a.view(), &[128, 512]),
        nl::tiles(b.view(), &[128, 512]),
        nl::tiles(&c, &[128, 512]),
    );
    for i in 0..ga.shape()[0] {
        for j in 0..ga.shape()[1] {
            let shape = ga.get((i, j)).element_shape();
            let ta = nl::ndarray(&shape, DType::F32, nl::sbuf);
            let tb = nl::ndarray(&shape, DType::F32, nl::sbuf);
            nisa::dma_copy(&ta, ga.get((i, j)).data(), None);
            nisa::dma_copy(&tb, gb.get((i, j)).data(), None);
            nisa::tensor_tensor(&ta, &ta, &tb, nl::AluOp::Add, None);
            nisa::dma_copy(gc.get((i, j)).data(), &ta, None);
        }
    }
    c
}

/// `c = a + b` in `[128, 128]` compute tiles moved `per_dma` tiles at a time: blocks of
/// `1 x per_dma` tiles, one DMA per block and operand, the add tile by tile.
#[nki_kernel(nki = "0.8")]
fn add_blocks(a: &Hbm<f32>, b: &Hbm<f32>, per_dma: usize) -> Hbm<f32> {
    let c = nl::ndarray(a.shape(), DType::F32, nl::shared_hbm);
    let (tile, block) = ([128, 128], [1, per_dma]);
    let (ga, gb, gc) = (
        nl::blocks(a.view(), &tile, &block),
        nl::blocks(b.view(), &tile, &block),
        nl::blocks(&c, &tile, &block),
    );
    for i in 0..ga.shape()[0] {
        for j in 0..ga.shape()[1] {
            let shape = ga.get((i, j)).element_shape();
            let ta = nl::ndarray(&shape, DType::F32, nl::sbuf);
            let tb = nl::ndarray(&shape, DType::F32, nl::sbuf);
            nisa::dma_copy(&ta, ga.get((i, j)).data(), None);
            nisa::dma_copy(&tb, gb.get((i, j)).data(), None);
            let (xa, xb) = (nl::tiles(&ta, &tile), nl::tiles(&tb, &tile));
            for k in 0..xa.shape()[1] {
                let (x, y) = (xa.get((0, k)).data(), xb.get((0, k)).data());
                nisa::tensor_tensor(&x, &x, &y, nl::AluOp::Add, None);
            }
            nisa::dma_copy(gc.get((i, j)).data(), &ta, None);
        }
    }
    c
}

/// `y = exp(x)` streamed in 128-row steps through `slots` input and `slots` output slots.
#[nki_kernel(nki = "0.8")]
fn exp_stream(x: &Hbm<f32>, slots: usize) -> Hbm<f32> {
    let y = nl::ndarray(x.shape(), DType::F32, nl::shared_hbm);
    let w = x.shape()[1];
    let (gx, gy) = (nl::tiles(x.view(), &[128, w]), nl::tiles(&y, &[128, w]));
    let ins = nl::alloc_stream_buffers(gx.clone(), nl::sbuf, 0, slots, None);
    let outs = nl::alloc_stream_buffers(gx.clone(), nl::sbuf, 0, slots, None);
    for k in 0..ins.num_steps() {
        let (t, r) = (ins.get(k), outs.get(k));
        nisa::dma_copy(&t, gx.at(k).data(), None);
        nisa::activation(&r, ActFn::Exp, &t, None);
        nisa::dma_copy(gy.at(k).data(), &r, None);
    }
    y
}

/// A deterministic value in `[-0.5, 0.5)` for element `i` of stream `seed`.
fn value(seed: u64, i: usize) -> f32 {
    let h = (i as u64 ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_mul(0xBF58_476D_1CE4_E5B9)
        .rotate_left(31);
    (h >> 40) as f32 / (1u64 << 24) as f32 - 0.5
}

/// The largest relative difference between `got` and `want`.
fn worst(got: &[f32], want: &Array2<f32>) -> f32 {
    got.iter()
        .zip(want.iter())
        .map(|(a, b)| (a - b).abs() / (1e-3 + b.abs()))
        .fold(0.0f32, f32::max)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One result line: the version, whether it matched, the modelled times.
fn report(name: &str, diff: f32, sim: &Profile, est: &Profile) -> bool {
    let agree = (est.latency_ns - sim.latency_ns).abs() <= 1e-6 * sim.latency_ns;
    let ok = diff < 1e-5 && agree;
    println!(
        "  {name:<14} {} (largest relative difference {diff:.1e}); modelled {:>8.2} us \
         (estimate {:.2} us), {} instructions",
        if ok { "match" } else { "MISMATCH" },
        sim.latency_us(),
        est.latency_us(),
        sim.instructions
    );
    ok
}

fn run() -> Result<bool, NkiError> {
    let estimate = || Launch::new(1).target(Target::Trn2).mode(Mode::Estimate);
    let no_profile = || NkiError::new(ErrorKind::NoData, "estimate", "no profile");
    let mut all_ok = true;

    let (m, n) = (1000, 700);
    let a = Array2::from_shape_fn((m, n), |(i, j)| value(1, i * n + j));
    let b = Array2::from_shape_fn((m, n), |(i, j)| value(2, i * n + j));
    let want = &a + &b;
    let ah = Hbm::from_vec(&[m, n], a.iter().copied().collect())?;
    let bh = Hbm::from_vec(&[m, n], b.iter().copied().collect())?;
    println!("tile grid: c = a + b over [{m}, {n}] in [128, 512] tiles (8 x 2, partial edges)");
    let (c, sim) = add_grid::simulate(1, Target::Trn2, &ah, &bh)?;
    let shape = Hbm::<f32>::shape_only([m, n]);
    let est = add_grid::run(estimate(), &shape, &shape)?.1.profile;
    all_ok &= report(
        "tiles",
        worst(&c.to_f32_vec()?, &want),
        &sim,
        &est.ok_or_else(no_profile)?,
    );

    println!("block grid: the same sum in [128, 128] tiles, moved 1 or 4 tiles per DMA");
    for per_dma in [1, 4] {
        let (c, sim) = add_blocks::simulate(1, Target::Trn2, &ah, &bh, per_dma)?;
        let est = add_blocks::run(estimate(), &shape, &shape, per_dma)?
            .1
            .profile;
        all_ok &= report(
            &format!("blocks 1x{per_dma}"),
            worst(&c.to_f32_vec()?, &want),
            &sim,
            &est.ok_or_else(no_profile)?,
        );
    }

    let (m, n) = (2000, 1024);
    let x = Array2::from_shape_fn((m, n), |(i, j)| value(3, i * n + j));
    let want = x.mapv(f32::exp);
    let xh = Hbm::from_vec(&[m, n], x.iter().copied().collect())?;
    println!(
        "software pipelining: y = exp(x) over [{m}, {n}] in 128-row steps (16, the last 80 rows)"
    );
    for slots in [1, 2, 3] {
        let (y, sim) = exp_stream::simulate(1, Target::Trn2, &xh, slots)?;
        let shape = Hbm::<f32>::shape_only([m, n]);
        let est = exp_stream::run(estimate(), &shape, slots)?.1.profile;
        let name = format!("{slots} slot{}", if slots > 1 { "s" } else { "" });
        all_ok &= report(
            &name,
            worst(&y.to_f32_vec()?, &want),
            &sim,
            &est.ok_or_else(no_profile)?,
        );
    }
    Ok(all_ok)
}
