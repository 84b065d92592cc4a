//! The distributed matmul of the seed notebook (a JAX/Pallas 2x2-mesh study), re-told on an
//! nki-rs mesh: `out = inputs @ weights` with inputs [2048, 2048] bf16 sharded P('x', 'y'),
//! weights [2048, 1024] bf16 sharded P('x', None) and the output P('x', None).
//!
//! Four kernels, each run on a 2x2 and a 4x4 mesh of trn2 logical NeuronCores:
//!
//! - **(a) all-gather + matmul**: all-gather the inputs over y and the weights over x with the
//!   library collective, then a local tiled matmul (as the seed's `xla_matmul`).
//! - **(b) hand-written ring**: the same all-gathers written with remote DMAs and semaphores,
//!   one ring step at a time (the seed's `all_gather_kernel_1D`, for any ring length).
//! - **(c) collective matmul**: the input K-blocks travel around the y ring while each device
//!   multiplies the block it holds into its output column block; the next block arrives during
//!   the compute. The column blocks are all-gathered at the end.
//! - **(d) all-reduce**: contraction-sharded: each device multiplies its input shard by the
//!   matching weight rows and the partial sums are all-reduced over y (reduce-scatter then
//!   all-gather, f32 accumulation), as the seed's `xla_matmul3`.
//!
//! Each result is checked against a single-device f32 matmul ("match": atol 1e-2, rtol 1e-2 as
//! the seed's `allclose`) and printed with its modelled trn2 time. A final section runs 64
//! devices (8x8) in estimate mode: a 1 MiB-per-device all-gather and variant (d).
//!
//! ```text
//! cargo run --release --example distributed_matmul [-- --mesh 2x2|4x4] [--skip-scale] [--report] [--trace DIR]
//! ```
//!
//! `--report` prints each run's per-device timeline summary and its collectives with algorithm
//! and bus bandwidth (busbw = algbw x factor, as nccom-test); `--trace DIR` writes one Chrome
//! trace per run with a process per device (open in Perfetto).

use half::bf16;
use nki_core::mesh::{
    self, Algorithm, Mesh, MeshLaunch, MeshReport, PartitionSpec, ReplicaGroups, ShardedHbm,
};
use nki_core::prelude::*;
use nki_core::{HbmView, HbmViewMut};
use nki_kernels::testing::{allclose, random_bf16};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// The seed's problem size: inputs [M, K], weights [K, N].
const M: usize = 2048;
const K: usize = 2048;
const N: usize = 1024;
/// Partition tile (rows of a matmul tile, contraction step).
const P: usize = 128;

/// Command-line options.
struct Options {
    meshes: Vec<[usize; 2]>,
    scale: bool,
    report: bool,
    trace: Option<PathBuf>,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        meshes: vec![[2, 2], [4, 4]],
        scale: true,
        report: false,
        trace: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--mesh" => {
                let m = args.next().ok_or("--mesh needs 2x2 or 4x4")?;
                let (x, y) = m.split_once('x').ok_or("--mesh takes XxY, e.g. 2x2")?;
                let p = |s: &str| s.parse::<usize>().map_err(|e| format!("--mesh {m}: {e}"));
                o.meshes = vec![[p(x)?, p(y)?]];
            }
            "--skip-scale" => o.scale = false,
            "--report" => o.report = true,
            "--trace" => o.trace = Some(args.next().ok_or("--trace needs a directory")?.into()),
            "-h" | "--help" => return Err(
                "usage: distributed_matmul [--mesh XxY] [--skip-scale] [--report] [--trace DIR]"
                    .into(),
            ),
            other => return Err(format!("unknown argument '{other}' (try --help)")),
        }
    }
    Ok(o)
}

/// `out (+)= a @ b` on one device: a [m, k] and b [k, n] in HBM, m and k multiples of 128,
/// n a multiple of min(n, 512). The a tiles of a row block are loaded and transposed on
/// TensorE once; each [128, <=512] output tile accumulates over k in one PSUM bank and is
/// added to `acc` (an f32 running sum) when given.
fn local_matmul(a: &HbmView, b: &HbmView, out: &HbmViewMut, acc: Option<&HbmView>) {
    let (m, k, n) = (a.shape()[0], a.shape()[1], b.shape()[1]);
    let nt = n.min(512);
    for mi in nl::affine_range(m / P) {
        let rows = mi * P..(mi + 1) * P;
        let a_t: Vec<Tile> = (0..k / P)
            .map(|ki| {
                let t = nl::load(a.slice((rows.clone(), ki * P..(ki + 1) * P)));
                nl::copy(&nl::transpose(&t), Some(a.dtype()))
            })
            .collect();
        for ni in nl::affine_range(n / nt) {
            let cols = ni * nt..(ni + 1) * nt;
            let psum = nl::ndarray(&[P, nt], DType::F32, MemKind::Psum);
            for (ki, at) in a_t.iter().enumerate() {
                let bt = nl::load(b.slice((ki * P..(ki + 1) * P, cols.clone())));
                nl::matmul_acc(&psum, at, &bt, true);
            }
            let res = match acc {
                Some(acc) => nl::add(&psum, &nl::load(acc.slice((rows.clone(), cols.clone())))),
                None => nl::copy(&psum, None),
            };
            nl::store(out.slice((rows.clone(), cols)), &res);
        }
    }
}

/// The four kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    AllGather,
    HandRing,
    CollectiveMatmul,
    AllReduce,
}

impl Variant {
    const ALL: [Variant; 4] = [
        Variant::AllGather,
        Variant::HandRing,
        Variant::CollectiveMatmul,
        Variant::AllReduce,
    ];

    fn name(self) -> &'static str {
        match self {
            Variant::AllGather => "(a) all-gather + matmul",
            Variant::HandRing => "(b) hand-written ring",
            Variant::CollectiveMatmul => "(c) collective matmul",
            Variant::AllReduce => "(d) matmul + all-reduce",
        }
    }
}

fn spec(dims: [Option<&str>; 2]) -> PartitionSpec {
    PartitionSpec::new(dims)
}

/// The operands and buffers of one run: all allocated on the host, symmetric on every device.
struct Buffers {
    inputs: ShardedHbm<bf16>,
    weights: ShardedHbm<bf16>,
    out: ShardedHbm<bf16>,
    /// Inputs gathered over y: [M/X, K] per device.
    in_full: ShardedHbm<bf16>,
    /// Weights gathered over x: [K, N] per device.
    w_full: ShardedHbm<bf16>,
    /// f32 per-device scratch [M/X, N] (partial sums of (d)) and [M/X, N/Y] (running sums of
    /// (c)).
    partial: ShardedHbm<f32>,
    acc: ShardedHbm<f32>,
    /// (c): each device's bf16 output column block.
    part: ShardedHbm<bf16>,
}

impl Buffers {
    /// Buffers for `mesh`; `values` gives the operands (None: shapes only, for estimates).
    fn new(
        mesh: &Mesh,
        values: Option<(&ndarray::Array2<bf16>, &ndarray::Array2<bf16>)>,
    ) -> Result<Buffers, NkiError> {
        let (xy, x_, rep) = (
            spec([Some("x"), Some("y")]),
            spec([Some("x"), None]),
            PartitionSpec::replicated(2),
        );
        let (inputs, weights) = match values {
            Some((a, w)) => (
                ShardedHbm::from_array(mesh, a, xy.clone())?,
                ShardedHbm::from_array(mesh, w, x_.clone())?,
            ),
            None => (
                ShardedHbm::shape_only(mesh, &[M, K], xy.clone())?,
                ShardedHbm::shape_only(mesh, &[K, N], x_.clone())?,
            ),
        };
        let make_bf16 = |shape: &[usize], s: PartitionSpec| match values {
            Some(_) => ShardedHbm::zeros(mesh, shape, s),
            None => ShardedHbm::shape_only(mesh, shape, s),
        };
        let make_f32 = |shape: &[usize], s: PartitionSpec| match values {
            Some(_) => ShardedHbm::zeros(mesh, shape, s),
            None => ShardedHbm::shape_only(mesh, shape, s),
        };
        Ok(Buffers {
            out: make_bf16(&[M, N], x_.clone())?,
            in_full: make_bf16(&[M, K], x_.clone())?,
            w_full: make_bf16(&[K, N], rep)?,
            partial: make_f32(&[M, N], x_)?,
            acc: make_f32(&[M, N], xy.clone())?,
            part: make_bf16(&[M, N], xy)?,
            inputs,
            weights,
        })
    }
}

/// All-gathers `src` into `dst` along `dim` over the ring of mesh axis `axis`, by hand: a
/// local copy of the own block, then r-1 steps each forwarding the block received last to
/// the right neighbour with a remote copy and waiting for the left neighbour's.
fn ring_all_gather(src: &ShardedHbm<bf16>, dst: &ShardedHbm<bf16>, dim: usize, axis: &str) {
    let (me, r) = (mesh::axis_index(axis), mesh::axis_size(axis));
    let mut coords: Vec<usize> = dst
        .mesh()
        .axis_names()
        .iter()
        .map(|a| mesh::axis_index(a))
        .collect();
    let ax = dst
        .mesh()
        .axis(axis)
        .expect("the axis exists: axis_index succeeded");
    coords[ax] = (me + 1) % r;
    let right = dst.mesh().device_at(&coords).expect("in the mesh");
    let len = dst.shard_shape()[dim] / r;
    let block = |i: usize| {
        let v = dst.view();
        if dim == 0 {
            v.slice((i * len..(i + 1) * len, ..))
        } else {
            v.slice((.., i * len..(i + 1) * len))
        }
    };
    let (local, send, recv) = (
        mesh::semaphore("local"),
        mesh::semaphore("send"),
        mesh::semaphore("recv"),
    );
    let c = mesh::async_copy(src.view(), &block(me), &local);
    c.start();
    c.wait();
    for step in 0..r - 1 {
        let b = block((me + r - step) % r);
        let copy = mesh::remote_copy(&b, &b.on(right), &send, &recv);
        copy.start();
        copy.wait();
    }
}

/// The kernel of `v` on the running device.
fn kernel(v: Variant, b: &Buffers, gx: &ReplicaGroups, gy: &ReplicaGroups) {
    let y = mesh::axis_index("y");
    let ny = mesh::axis_size("y");
    let k_blk = K / ny;
    match v {
        Variant::AllGather | Variant::HandRing => {
            if v == Variant::AllGather {
                mesh::all_gather(b.inputs.view(), b.in_full.view(), 1, gy, Algorithm::Ring);
                mesh::all_gather(b.weights.view(), b.w_full.view(), 0, gx, Algorithm::Ring);
            } else {
                ring_all_gather(&b.inputs, &b.in_full, 1, "y");
                ring_all_gather(&b.weights, &b.w_full, 0, "x");
            }
            local_matmul(
                &b.in_full.local().view(),
                &b.w_full.local().view(),
                &b.out.local_out().view(),
                None,
            );
        }
        Variant::CollectiveMatmul => {
            mesh::all_gather(b.weights.view(), b.w_full.view(), 0, gx, Algorithm::Ring);
            let n_blk = N / ny;
            let cols = y * n_blk..(y + 1) * n_blk;
            let (local, send, recv) = (
                mesh::semaphore("local"),
                mesh::semaphore("send"),
                mesh::semaphore("recv"),
            );
            let block = |i: usize| b.in_full.view().slice((.., i * k_blk..(i + 1) * k_blk));
            let c = mesh::async_copy(b.inputs.view(), &block(y), &local);
            c.start();
            c.wait();
            let right = b
                .out
                .mesh()
                .device_at(&[mesh::axis_index("x"), (y + 1) % ny])
                .expect("in the mesh");
            let w = b.w_full.local();
            let in_full = b.in_full.local();
            let (acc, part) = (b.acc.local_out(), b.part.local_out());
            for step in 0..ny {
                let blk = (y + ny - step) % ny;
                let next = (step + 1 < ny).then(|| {
                    let v = block(blk);
                    let copy = mesh::remote_copy(&v, &v.on(right), &send, &recv);
                    copy.start();
                    copy
                });
                let a = in_full.slice((.., blk * k_blk..(blk + 1) * k_blk));
                let wb = w.slice((blk * k_blk..(blk + 1) * k_blk, cols.clone()));
                let last = step + 1 == ny;
                let sum = (step > 0).then(|| acc.view().as_read());
                let dst = if last { part.view() } else { acc.view() };
                local_matmul(&a, &wb, &dst, sum.as_ref());
                if let Some(copy) = next {
                    copy.wait();
                }
            }
            mesh::all_gather(b.part.view(), b.out.view(), 1, gy, Algorithm::Ring);
        }
        Variant::AllReduce => {
            mesh::all_gather(b.weights.view(), b.w_full.view(), 0, gx, Algorithm::Ring);
            let w_rows = b.w_full.local().slice((y * k_blk..(y + 1) * k_blk, ..));
            local_matmul(
                &b.inputs.local().view(),
                &w_rows,
                &b.partial.local_out().view(),
                None,
            );
            mesh::all_reduce(b.partial.view(), b.out.view(), gy, Algorithm::Ring);
        }
    }
}

/// Runs `v` on `mesh` over `b` in `mode` on trn2.
fn run_variant(
    v: Variant,
    mesh: &Mesh,
    b: &Buffers,
    mode: Mode,
    spans: bool,
) -> Result<MeshReport, NkiError> {
    let gx = ReplicaGroups::along(mesh, &["x"])?;
    let gy = ReplicaGroups::along(mesh, &["y"])?;
    MeshLaunch::new(mesh)
        .target(Target::Trn2)
        .mode(mode)
        .engine_spans(spans)
        .run(|| kernel(v, b, &gx, &gy))
}

/// The modelled time of the local matmul alone on one device (no communication).
fn single_device_us() -> Result<f64, NkiError> {
    let one = Mesh::new([1, 1], ["x", "y"])?;
    let b = Buffers::new(&one, None)?;
    let r = MeshLaunch::new(&one)
        .target(Target::Trn2)
        .mode(Mode::Estimate)
        .engine_spans(false)
        .run(|| {
            local_matmul(
                &b.inputs.local().view(),
                &b.weights.local().view(),
                &b.out.local_out().view(),
                None,
            )
        })?;
    Ok(r.latency_us())
}

/// Peak resident memory of this process in MiB (Linux), if known.
fn peak_rss_mib() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn run(o: &Options) -> Result<bool, NkiError> {
    let a = random_bf16(M, K, 1);
    let w = random_bf16(K, N, 2);
    let t = Instant::now();
    let want = a.mapv(f32::from).dot(&w.mapv(f32::from));
    println!(
        "inputs [{M}, {K}] bf16 P('x', 'y'), weights [{K}, {N}] bf16 P('x', None), output P('x', None); reference: one f32 matmul ({:.1} s on the host)",
        t.elapsed().as_secs_f64()
    );
    let single = single_device_us()?;
    println!("one trn2 NeuronCore, local matmul only: modelled {single:.1} us\n");
    println!(
        "  {:<26} {:>5} {:>8} {:>12} {:>9} {:>12} {:>11} {:>9}",
        "kernel", "mesh", "result", "modelled us", "speedup", "compute us", "wait us", "host s"
    );
    let mut all_match = true;
    for shape in &o.meshes {
        let mesh = Mesh::new(*shape, ["x", "y"])?;
        for v in Variant::ALL {
            let b = Buffers::new(&mesh, Some((&a, &w)))?;
            let t = Instant::now();
            let report = run_variant(v, &mesh, &b, Mode::Simulate, o.trace.is_some())?;
            let host = t.elapsed().as_secs_f64();
            let ok = allclose(&b.out.to_array()?, &want, 1e-2, 1e-2).is_ok();
            all_match &= ok;
            let slowest = report
                .devices
                .iter()
                .max_by(|p, q| p.end_ns.total_cmp(&q.end_ns))
                .expect("devices");
            println!(
                "  {:<26} {:>5} {:>8} {:>12.1} {:>8.2}x {:>12.1} {:>11.1} {:>9.2}",
                v.name(),
                format!("{}x{}", shape[0], shape[1]),
                if ok { "match" } else { "MISMATCH" },
                report.latency_us(),
                single / report.latency_us(),
                slowest.compute_ns / 1e3,
                slowest.wait_ns / 1e3,
                host
            );
            if o.report {
                println!("{report}");
            }
            if let Some(dir) = &o.trace {
                let path = dir.join(format!(
                    "distributed_matmul_{}x{}_{}.json",
                    shape[0],
                    shape[1],
                    &v.name()[1..2]
                ));
                report.write_chrome_trace(&path)?;
            }
        }
    }
    if o.scale {
        scale_run()?;
    }
    if let Some(dir) = &o.trace {
        println!(
            "\nChrome traces (a process per device) written to {}",
            dir.display()
        );
    }
    Ok(all_match)
}

/// 64 devices (an 8x8 mesh, 16 trn2 chips) in estimate mode: a 1 MiB-per-device all-gather
/// with each algorithm, and variant (d).
fn scale_run() -> Result<(), NkiError> {
    println!("\n64 devices (8x8 mesh of trn2 logical cores, 16 chips), estimate mode:");
    let mesh = Mesh::new([8, 8], ["x", "y"])?;
    let all = ReplicaGroups::all(&mesh);
    let rows = 512; // [512, 1024] bf16 = 1 MiB per device
    let src = ShardedHbm::<bf16>::shape_only(
        &mesh,
        &[64 * rows, 1024],
        PartitionSpec::multi(&[&["x", "y"], &[]]),
    )?;
    let dst =
        ShardedHbm::<bf16>::shape_only(&mesh, &[64 * rows, 1024], PartitionSpec::replicated(2))?;
    for alg in [
        Algorithm::Ring,
        Algorithm::RecursiveDoubling,
        Algorithm::Direct,
    ] {
        let t = Instant::now();
        let r = MeshLaunch::new(&mesh)
            .mode(Mode::Estimate)
            .engine_spans(false)
            .run(|| mesh::all_gather(src.view(), dst.view(), 0, &all, alg))?;
        let c = &r.collectives[0];
        println!(
            "  all_gather 1 MiB/device {:<19} modelled {:>9.1} us  algbw {:>6.1} GiB/s  busbw {:>6.1} GiB/s  (host {:.2} s)",
            alg.to_string(),
            r.latency_us(),
            c.algbw_gib_s,
            c.busbw_gib_s,
            t.elapsed().as_secs_f64()
        );
    }
    let b = Buffers::new(&mesh, None)?;
    let t = Instant::now();
    let r = run_variant(Variant::AllReduce, &mesh, &b, Mode::Estimate, false)?;
    println!(
        "  {} on 8x8: modelled {:.1} us (host {:.2} s)",
        Variant::AllReduce.name(),
        r.latency_us(),
        t.elapsed().as_secs_f64()
    );
    if let Some(mib) = peak_rss_mib() {
        println!("  peak resident memory of the whole example: {mib:.0} MiB");
    }
    Ok(())
}

fn main() -> ExitCode {
    nki_kernels::report::main_with_options(parse_args(), |o| o.trace.as_deref(), run)
}
