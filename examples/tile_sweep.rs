//! Tuning your own kernel's tile sizes on modelled time.
//!
//! The kernel below is written the way a user writes one: a fused `relu(x @ w)` layer with two
//! knobs, the width of the output tile (`tile_n`, columns per PSUM accumulation) and how many
//! 128-row output tiles share one loaded block of `w` (`m_block`). `nki_core::sweep` estimates
//! every combination on all host cores (shape-only tensors: nothing is computed), lists the
//! combinations the hardware rules reject (a PSUM tile over one 2 KiB bank, SBUF capacity) or
//! the kernel cannot take (a block that does not divide M) with their reasons, and prints the
//! table and the best configuration. `--csv PATH` / `--json PATH` write the report, `--html
//! PATH` the best configuration's profile as an HTML page.
//!
//! ```text
//! cargo run --release --example tile_sweep [-- --target trn1|trn2|trn3] [--csv out.csv] [--json out.json] [--html best.html]
//! ```
//!
//! The same grid runs under `cargo bench` with the criterion measurement of modelled time
//! (`nki_core::sweep::bench_grid`, feature `criterion`): see `benches/sweeps.rs`.

use nki_core::prelude::*;
use nki_core::sweep::{ParamGrid, Sweep};
use std::process::ExitCode;

/// `out = relu(x @ w)` with `x` given transposed (`x_t: [K, M]`, as TensorE takes its
/// stationary operand), `w: [K, N]`, `out: [M, N]`, all bf16, accumulating in fp32 PSUM.
///
/// For each block of `m_block` row tiles, the kernel loads their K column of `x_t` tiles once;
/// then for each `tile_n`-wide column strip it loads the K column of `w` tiles once and reuses
/// it for every row tile of the block.
#[nki_kernel]
fn matmul_relu(x_t: &Hbm<bf16>, w: &Hbm<bf16>, out: &mut Hbm<bf16>, tile_n: usize, m_block: usize) {
    let (k, m, n) = (x_t.shape()[0], x_t.shape()[1], w.shape()[1]);
    let k_tiles = k / 128;
    for mb in nl::affine_range(m / (128 * m_block)) {
        // The stationary tiles of this block: x_tiles[bm][kt] is [128, 128].
        let mut x_tiles = Vec::with_capacity(m_block);
        for bm in 0..m_block {
            let r0 = (mb * m_block + bm) * 128;
            let column: Vec<Tile> = (0..k_tiles)
                .map(|kt| nl::load(x_t.slice((kt * 128..(kt + 1) * 128, r0..r0 + 128))))
                .collect();
            x_tiles.push(column);
        }
        for nb in nl::affine_range(n / tile_n) {
            let cols = nb * tile_n..(nb + 1) * tile_n;
            let w_tiles: Vec<Tile> = (0..k_tiles)
                .map(|kt| nl::load(w.slice((kt * 128..(kt + 1) * 128, cols.clone()))))
                .collect();
            for (bm, column) in x_tiles.iter().enumerate() {
                let r0 = (mb * m_block + bm) * 128;
                let acc = nl::zeros(&[128, tile_n], DType::F32, nl::PSUM);
                for (xt, wt) in column.iter().zip(&w_tiles) {
                    nl::matmul_acc(&acc, xt, wt, true);
                }
                let y = nl::copy(&nl::relu(&acc), Some(DType::BF16));
                nl::store(out.slice((r0..r0 + 128, cols.clone())), &y);
            }
        }
    }
}

/// Problem size: x [M, K] @ w [K, N].
const M: usize = 4096;
const K: usize = 4096;
const N: usize = 4096;

struct Options {
    target: Target,
    csv: Option<String>,
    json: Option<String>,
    html: Option<String>,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        target: Target::Trn2,
        csv: None,
        json: None,
        html: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--target" => {
                let t = args.next().ok_or("--target needs trn1, trn2 or trn3")?;
                o.target = Target::parse(&t).ok_or(format!("unknown target '{t}'"))?;
            }
            "--csv" => o.csv = Some(args.next().ok_or("--csv needs a path")?),
            "--json" => o.json = Some(args.next().ok_or("--json needs a path")?),
            "--html" => o.html = Some(args.next().ok_or("--html needs a path")?),
            "-h" | "--help" => {
                return Err(
                    "usage: tile_sweep [--target trn1|trn2|trn3] [--csv PATH] [--json PATH]".into(),
                )
            }
            other => return Err(format!("unknown argument '{other}' (try --help)")),
        }
    }
    Ok(o)
}

fn main() -> ExitCode {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let x_t = Hbm::<bf16>::shape_only([K, M]);
    let w = Hbm::<bf16>::shape_only([K, N]);
    let grid = ParamGrid::new()
        .axis("tile_n", [128, 256, 512, 1024])
        .axis("m_block", [1, 2, 3, 4, 8, 16, 32]);
    let report = Sweep::new(grid)
        .reject_if(|p| {
            let rows = 128 * p["m_block"];
            (!M.is_multiple_of(rows))
                .then(|| format!("M = {M} is not a multiple of 128 x m_block = {rows}"))
        })
        .run(|p| {
            let mut out = Hbm::<bf16>::shape_only([M, N]);
            matmul_relu::estimate(1, o.target, &x_t, &w, &mut out, p["tile_n"], p["m_block"])
        });
    println!(
        "relu(x @ w), x [{M}, {K}] @ w [{K}, {N}] bf16, on {}:",
        o.target
    );
    print!("{report}");
    for (path, text) in [(&o.csv, report.to_csv()), (&o.json, report.to_json())] {
        if let Some(path) = path {
            if let Err(e) = std::fs::write(path, text) {
                eprintln!("cannot write {path}: {e}");
                return ExitCode::FAILURE;
            }
            println!("wrote {path}");
        }
    }
    let Some(best) = report.best() else {
        return ExitCode::FAILURE;
    };
    if let Some(path) = &o.html {
        // The sweep keeps a summary per point: estimate the best one again for its profile.
        let mut out = Hbm::<bf16>::shape_only([M, N]);
        let (tile_n, m_block) = (best.params["tile_n"], best.params["m_block"]);
        let written = matmul_relu::estimate(1, o.target, &x_t, &w, &mut out, tile_n, m_block)
            .map_err(|e| e.to_string())
            .and_then(|p| p.write_html(path).map_err(|e| e.to_string()));
        match written {
            Ok(()) => println!("wrote {path} (the best configuration's profile)"),
            Err(e) => {
                eprintln!("cannot write {path}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
