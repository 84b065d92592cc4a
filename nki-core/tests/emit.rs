//! The emitter (`nki_core::emit`): kernels traced and written as NKI 0.8 Python modules that
//! compile (`python3 -m py_compile`), use only the NKI 0.8 API list, re-roll their loops, and
//! whose drivers carry the traced data; Beta-1 kernels refused with what to port.

use nki_core::emit::{api_entries, check_api, EmittedKernel, Emitter};
use nki_core::prelude::*;
use std::path::PathBuf;

/// `c = (a * 2 + 1) + b` and each row's maximum of `c`, in `[128, 512]` tiles of a Rust loop
/// (unrolled in the trace, re-rolled by the emitter).
#[nki_kernel(nki = "0.7")]
fn scale_add(a: &Hbm<bf16>, b: &Hbm<bf16>) -> (Hbm<bf16>, Hbm<f32>) {
    let (rows, cols) = (a.shape()[0], a.shape()[1]);
    let c = nl::ndarray(&[rows, cols], a.dtype(), nl::shared_hbm);
    let m = nl::ndarray(&[rows, cols / 512], DType::F32, nl::shared_hbm);
    for t in 0..rows / 128 * (cols / 512) {
        let (i, j) = (t / (cols / 512) * 128, t % (cols / 512) * 512);
        let tile = (i..i + 128, j..j + 512);
        let x = nl::ndarray(&[128, 512], a.dtype(), nl::sbuf);
        let y = nl::ndarray(&[128, 512], b.dtype(), nl::sbuf);
        nisa::dma_copy(&x, a.slice(tile.clone()), None);
        nisa::dma_copy(&y, b.slice(tile.clone()), None);
        let args = nisa::TensorScalarOpts::new().then(nl::AluOp::Add, 1.0f32);
        nisa::tensor_scalar(&x, &x, nl::AluOp::Multiply, 2.0f32, args);
        nisa::tensor_tensor(&x, &x, &y, nl::AluOp::Add, None);
        let r = nl::ndarray(&[128, 1], DType::F32, nl::sbuf);
        nisa::tensor_reduce(&r, nl::AluOp::Maximum, &x, &[1], None);
        nisa::dma_copy(c.slice(tile), &x, None);
        nisa::dma_copy(m.slice((i..i + 128, j / 512..j / 512 + 1)), &r, None);
    }
    (c, m)
}

/// `result[M, N] = lhsT[K, M]^T @ rhs[K, N]` in tiles, the k loop accumulating in PSUM.
#[nki_kernel(nki = "0.7")]
fn matmul_tiled(lhs_t: &Hbm<bf16>, rhs: &Hbm<bf16>) -> Hbm<f32> {
    let (k, m, n) = (lhs_t.shape()[0], lhs_t.shape()[1], rhs.shape()[1]);
    let result = nl::ndarray(&[m, n], DType::F32, nl::shared_hbm);
    for mi in nl::affine_range(m / 128) {
        for ni in nl::affine_range(n / 512) {
            let acc = nl::ndarray(&[128, 512], DType::F32, nl::psum);
            for ki in nl::affine_range(k / 128) {
                let l = nl::ndarray(&[128, 128], lhs_t.dtype(), nl::sbuf);
                let r = nl::ndarray(&[128, 512], rhs.dtype(), nl::sbuf);
                let kr = ki * 128..(ki + 1) * 128;
                nisa::dma_copy(
                    &l,
                    lhs_t.slice((kr.clone(), mi * 128..(mi + 1) * 128)),
                    None,
                );
                nisa::dma_copy(&r, rhs.slice((kr, ni * 512..(ni + 1) * 512)), None);
                nisa::nc_matmul(&acc, &l, &r, None);
            }
            let out = nl::ndarray(&[128, 512], DType::F32, nl::sbuf);
            nisa::tensor_copy(&out, &acc, nisa::Opts::new().engine(nisa::Engine::Scalar));
            let rows = mi * 128..(mi + 1) * 128;
            nisa::dma_copy(result.slice((rows, ni * 512..(ni + 1) * 512)), &out, None);
        }
    }
    result
}

/// A Beta-1 kernel (`nl::load` / `nl::store`).
#[nki_kernel]
fn beta1_add(a: &Hbm<f32>, b: &Hbm<f32>, c: &mut Hbm<f32>) {
    let x = nl::load(a.slice((0..128, 0..512)));
    let y = nl::load(b.slice((0..128, 0..512)));
    nl::store(c.slice((0..128, 0..512)), &(&x + &y));
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nki-emit-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The checks every emitted module passes.
fn checked(k: &EmittedKernel) {
    k.check().unwrap_or_else(|e| panic!("{e}\n{}", k.module()));
    check_api(k.module()).unwrap();
}

fn emit_scale_add() -> EmittedKernel {
    let a = Hbm::<bf16>::from_array(&ndarray::Array2::from_shape_fn((256, 1024), |(i, j)| {
        bf16::from_f32((i + j) as f32)
    }))
    .unwrap();
    let b = Hbm::<bf16>::full([256, 1024], bf16::from_f32(2.0));
    let mut e = Emitter::new("scale_add");
    scale_add::run(e.launch(Launch::new(1)), &a, &b).unwrap();
    e.finish().unwrap()
}

#[test]
fn calls_are_written_destination_first_with_keywords() {
    let k = emit_scale_add();
    checked(&k);
    let m = k.module();
    // Parameters and outputs found from the trace, named after the kernel's parameters.
    assert!(m.contains("@nki.jit\ndef scale_add(a, b):\n"), "{m}");
    assert!(
        m.contains("    c = nl.ndarray((256, 1024), dtype=nl.bfloat16, buffer=nl.shared_hbm)\n"),
        "{m}"
    );
    assert!(
        m.contains("nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)"),
        "{m}"
    );
    // The Rust loop over the [128, 512] tiles, re-rolled as two host loops (rows, columns).
    assert!(
        m.contains("    for i0 in nl.static_range(2):\n        for i1 in nl.static_range(2):\n"),
        "{m}"
    );
    assert!(
        m.contains(", src=a[128 * i0:128 * i0 + 128, 512 * i1:512 * i1 + 512])\n"),
        "{m}"
    );
    assert!(
        m.contains("op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=1.0)"),
        "{m}"
    );
    assert!(m.contains(", op=nl.add)\n"), "{m}");
    assert!(m.contains("nisa.tensor_reduce(dst=sb_"), "{m}");
    assert!(m.contains(", op=nl.maximum, data=sb_"), "{m}");
    assert!(m.contains(", axis=1)\n"), "{m}");
    assert!(
        m.contains(
            "nisa.dma_copy(dst=c[128 * i0:128 * i0 + 128, 512 * i1:512 * i1 + 512], src=sb_"
        ),
        "{m}"
    );
    assert!(
        m.contains("nisa.dma_copy(dst=m[128 * i0:128 * i0 + 128, i1:i1 + 1], src=sb_"),
        "{m}"
    );
    assert!(m.trim_end().ends_with("return c, m"), "{m}");
}

#[test]
fn the_driver_and_its_data_are_written() {
    let k = emit_scale_add();
    let dir = scratch("driver");
    let files = k.write(&dir).unwrap();
    assert_eq!(files.len(), 2 + 4, "{files:?}");
    let npy = std::fs::read(dir.join("scale_add_data/in_a.npy")).unwrap();
    assert!(npy.starts_with(b"\x93NUMPY"));
    // Header, then 256 x 1024 float32 values: a[1, 2] = 3.
    let h = u16::from_le_bytes([npy[8], npy[9]]) as usize;
    let at = 10 + h + (1024 + 2) * 4;
    assert_eq!(f32::from_le_bytes(npy[at..at + 4].try_into().unwrap()), 3.0);
    let d = k.driver();
    assert!(
        d.contains("INPUTS = [(\"a\", \"bfloat16\"), (\"b\", \"bfloat16\")]"),
        "{d}"
    );
    assert!(
        d.contains("OUTPUTS = [(\"c\", \"bfloat16\"), (\"m\", \"float32\")]"),
        "{d}"
    );
    assert!(
        d.contains("nki.execute if args.device else nki.simulate"),
        "{d}"
    );
}

#[test]
fn loops_are_rerolled_a_4096_cubed_matmul_is_a_short_module() {
    let a = Hbm::<bf16>::shape_only([4096, 4096]);
    let b = Hbm::<bf16>::shape_only([4096, 4096]);
    let mut e = Emitter::new("matmul_tiled");
    e.input("lhs_t", &a).input("rhs", &b);
    let launch = e.launch(Launch::new(1).mode(Mode::Estimate));
    let (r, _) = matmul_tiled::run(launch, &a, &b).unwrap();
    e.output("result", &r).unwrap();
    let k = e.finish().unwrap();
    checked(&k);
    assert!(!k.has_data());
    let m = k.module();
    assert!(k.module_lines() < 40, "{} lines:\n{m}", k.module_lines());
    for want in [
        "    for i0 in nl.affine_range(32):\n        for i1 in nl.affine_range(8):\n",
        "            for i2 in nl.affine_range(32):\n",
        "src=lhs_t[128 * i2:128 * i2 + 128, 128 * i0:128 * i0 + 128])",
        "src=rhs[128 * i2:128 * i2 + 128, 512 * i1:512 * i1 + 512])",
        "nisa.tensor_copy(dst=sb_",
        "engine=nisa.scalar_engine)",
        "nisa.dma_copy(dst=result[128 * i0:128 * i0 + 128, 512 * i1:512 * i1 + 512], src=sb_",
    ] {
        assert!(m.contains(want), "missing {want:?} in\n{m}");
    }
    // The PSUM accumulator is allocated in the n loop, outside the k loop.
    let acc = m.find("buffer=nl.psum)").unwrap();
    assert!(acc < m.find("for i2 in").unwrap(), "{m}");
}

#[test]
fn beta1_kernels_are_refused_with_what_to_port() {
    let a = Hbm::<f32>::zeros([128, 512]);
    let b = Hbm::<f32>::zeros([128, 512]);
    let mut c = Hbm::<f32>::zeros([128, 512]);
    let mut e = Emitter::new("beta1_add");
    e.input("a", &a).input("b", &b);
    beta1_add::run(e.launch(Launch::new(1)), &a, &b, &mut c).unwrap();
    e.output("c", &c).unwrap();
    let err = e.finish().unwrap_err().to_string();
    for want in [
        "'load'",
        "NKI Beta 1",
        "no longer exists",
        "nisa::dma_copy",
        "nl::ndarray",
    ] {
        assert!(err.contains(want), "missing {want:?} in: {err}");
    }
}

#[test]
fn a_kernel_launched_without_the_emitters_launch_is_an_error() {
    let mut e = Emitter::new("nothing");
    let err = e.finish().unwrap_err().to_string();
    assert!(err.contains("Emitter::launch"), "{err}");
}

#[test]
fn every_listed_callable_is_an_entry_of_the_api_document() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/nki-api.md"))
        .unwrap();
    let mut missing = Vec::new();
    for e in api_entries() {
        let Some(short) = e.name.strip_prefix("nisa.").or(e.name.strip_prefix("nl.")) else {
            continue;
        };
        if e.keywords.is_some() && !doc.contains(&format!("`{short}`")) {
            missing.push(e.name);
        }
    }
    assert!(missing.is_empty(), "not in docs/nki-api.md: {missing:?}");
}

/// Four tiles kept in a `Vec` (filled by a Rust loop), then summed pairwise in an
/// `affine_range` loop that indexes the `Vec`.
#[nki_kernel(nki = "0.7")]
fn vec_of_tiles(a: &Hbm<f32>) -> Hbm<f32> {
    let out = nl::ndarray(&[128, 1024], DType::F32, nl::shared_hbm);
    let mut tiles = Vec::new();
    for t in 0..4 {
        let x = nl::ndarray(&[128, 512], DType::F32, nl::sbuf);
        nisa::dma_copy(&x, a.slice((.., t * 512..(t + 1) * 512)), None);
        tiles.push(x);
    }
    for j in nl::affine_range(2) {
        let s = nl::ndarray(&[128, 512], DType::F32, nl::sbuf);
        nisa::tensor_tensor(&s, &tiles[2 * j], &tiles[2 * j + 1], nl::AluOp::Add, None);
        nisa::dma_copy(out.slice((.., j * 512..(j + 1) * 512)), &s, None);
    }
    out
}

#[test]
fn tiles_alive_at_once_are_a_list_and_host_loops_reroll() {
    let a = Hbm::<f32>::full([128, 2048], 1.0);
    let mut e = Emitter::new("vec_of_tiles");
    let (out, _) = vec_of_tiles::run(e.launch(Launch::new(1)), &a).unwrap();
    e.output("out", &out).unwrap();
    let k = e.finish().unwrap();
    checked(&k);
    let m = k.module();
    for want in [
        " = [None] * 4\n",
        "    for i0 in nl.static_range(4):\n",
        "[i0] = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)\n",
        "[i0], src=a[:, 512 * i0:512 * i0 + 512])\n",
        "    for i0 in nl.affine_range(2):\n",
        "[2 * i0], data2=sb_",
        "[2 * i0 + 1], op=nl.add)\n",
    ] {
        assert!(m.contains(want), "missing {want:?} in\n{m}");
    }
    assert!(k.module_lines() < 30, "{m}");
}
