//! The examples the emitter writes as NKI 0.8 Python (`cargo run --release --example emit --
//! NAME [DIR]`, see `nki_core::emit`): the README's `tensor_add` (on one core, and as
//! `kernel[2]` on both cores of a logical NeuronCore), the LNC=2 matmul whose cores swap
//! partial products (`lnc2`), the five versions of the kernel-optimization tutorial and the
//! NKI Library ports, each traced on its inputs (simulate mode, so the driver carries
//! nki-rs's outputs and the module its modelled latency).

use crate::kernel_optimization::Version;
use crate::nki_library;
use crate::testing::{random_bf16, random_f32};
use nki_core::emit::{EmittedKernel, Emitter};
use nki_core::prelude::*;

/// The README's NKI 0.7 `tensor_add`: `c = a + b` in `[128, 512]` tiles, core `program_id(0)`
/// of `num_programs(0)` taking every other tile.
#[nki_kernel(nki = "0.7")]
pub fn tensor_add(a: &Hbm<bf16>, b: &Hbm<bf16>) -> Hbm<bf16> {
    let c = nl::ndarray(a.shape(), a.dtype(), nl::shared_hbm);
    let cols = a.shape()[1] / 512;
    let tiles = a.shape()[0] / 128 * cols;
    for t in (nl::program_id(0)..tiles).step_by(nl::num_programs(0)) {
        let (i, j) = (t / cols * 128, t % cols * 512);
        let tile = (i..i + 128, j..j + 512);
        let x = nl::ndarray(&[128, 512], a.dtype(), nl::sbuf);
        let y = nl::ndarray(&[128, 512], b.dtype(), nl::sbuf);
        let z = nl::ndarray(&[128, 512], a.dtype(), nl::sbuf);
        nisa::dma_copy(&x, a.slice(tile.clone()), None);
        nisa::dma_copy(&y, b.slice(tile.clone()), None);
        nisa::tensor_tensor(&z, &x, &y, nl::AluOp::Add, None);
        nisa::dma_copy(c.slice(tile), &z, None);
    }
    c
}

/// The names [`emit`] knows, in the order the example lists them.
pub fn names() -> Vec<&'static str> {
    let mut n = vec!["tensor_add", "tensor_add_lnc2", "lnc2"];
    n.extend(Version::ALL.iter().map(|v| v.name()));
    n.extend(nki_library::check::KERNELS);
    n
}

/// The example `name` traced (a simulate launch on trn2: values and the modelled timeline)
/// and emitted, with its modelled latency ([`EmittedKernel::with_profile`]).
pub fn emit(name: &str) -> Result<EmittedKernel, NkiError> {
    let mut e = Emitter::new(name);
    // NKI's kernel[2] (LNC=2) for the examples launched on both cores of a logical
    // NeuronCore, kernel[1] for the others.
    let grid = if name.ends_with("lnc2") { 2 } else { 1 };
    let launch = e.launch(Launch::new(grid).mode(Mode::Simulate).target(Target::Trn2));
    let report = if name == "tensor_add" || name == "tensor_add_lnc2" {
        let a = Hbm::from_array(&random_bf16(256, 1024, 1))?;
        let b = Hbm::from_array(&random_bf16(256, 1024, 2))?;
        e.input("a", &a).input("b", &b);
        tensor_add::run(launch, &a, &b)?.1
    } else if name == "lnc2" {
        use crate::lnc2::{matmul_lnc2, K, M, N};
        let at = Hbm::from_array(&random_f32(K, M, 5))?;
        let b = Hbm::from_array(&random_f32(K, N, 6))?;
        let mut c = Hbm::<f32>::zeros([M, N]);
        e.input("at", &at).input("b", &b);
        let report = matmul_lnc2::run(launch, &at, &b, &mut c)?;
        e.output("c", &c)?;
        report
    } else if let Some(v) = Version::ALL.iter().find(|v| v.name() == name) {
        let (k, m, n) = v.small_kmn();
        let lhs_t = Hbm::from_array(&random_bf16(k, m, 3))?;
        let rhs = Hbm::from_array(&random_bf16(k, n, 4))?;
        e.input("lhsT", &lhs_t).input("rhs", &rhs);
        v.run(launch, &lhs_t, &rhs)?.1
    } else if nki_library::check::KERNELS.contains(&name) {
        nki_library::check::run(name, launch)?.1
    } else {
        return Err(NkiError::new(
            ErrorKind::InvalidArgument,
            "emit",
            format!("no example '{name}': one of {}", names().join(", ")),
        ));
    };
    let kernel = e.finish()?;
    Ok(match &report.profile {
        Some(p) => kernel.with_profile(p),
        None => kernel,
    })
}
