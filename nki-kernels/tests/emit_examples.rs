//! Every example `cargo run --example emit` writes: emitted modules compile and use only the
//! NKI 0.8 API list (`EmittedKernel::check`); the README's `tensor_add` and the
//! kernel-optimization tutorial's five versions are emitted with their data; an example the
//! emitter cannot write yet is refused with an error naming the call and its line.

use nki_kernels::emit_examples::{emit, names};
use nki_kernels::kernel_optimization::Version;

#[test]
fn every_example_is_emitted_and_checked_or_refused_naming_the_call() {
    let must: Vec<&str> = std::iter::once("tensor_add")
        .chain(Version::ALL.iter().map(|v| v.name()))
        .collect();
    let mut emitted = Vec::new();
    for name in names() {
        match emit(name) {
            Ok(k) => {
                k.check()
                    .unwrap_or_else(|e| panic!("{name}: {e}\n{}", k.module()));
                assert!(k.has_data(), "{name}");
                emitted.push(name);
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(!must.contains(&name), "{name} refused: {msg}");
                assert!(
                    msg.starts_with("emit: ") && msg.contains(".rs:"),
                    "{name}: {msg}"
                );
            }
        }
    }
    for name in must {
        assert!(emitted.contains(&name), "{name} not emitted");
    }
}

#[test]
fn the_tiled_matmul_keeps_its_three_loops() {
    let k = emit("mm_tiled").unwrap();
    let m = k.module();
    assert!(k.module_lines() < 40, "{m}");
    assert!(m.contains("for i0 in nl.affine_range(2):"), "{m}");
    assert!(m.contains("for i1 in nl.affine_range(2):"), "{m}");
    assert!(m.contains("for i2 in nl.affine_range(2):"), "{m}");
}

#[test]
fn the_fully_blocked_matmul_rerolls_its_vecs_of_tiles_and_host_loops() {
    let k = emit("mm_fully_blocked").unwrap();
    let m = k.module();
    // 849 lines when its Vec tiles and Rust loops stayed unrolled.
    assert!(k.module_lines() < 60, "{} lines:\n{m}", k.module_lines());
    // The 32 SBUF partial sums: one list, filled by one host loop.
    assert!(m.contains(" = [None] * 32\n"), "{m}");
    assert!(m.contains("in nl.static_range(32):"), "{m}");
    assert!(m.contains("nisa.memset(dst=sb_"), "{m}");
    // The partial sum of tile (bm, bn) is entry bm + 2 * bn: affine in the loop indices.
    assert!(m.contains("[i2 + 2 * i3], data1=sb_"), "{m}");
}
