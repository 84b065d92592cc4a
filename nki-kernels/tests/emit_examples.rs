//! Every example `cargo run --example emit` writes: emitted modules compile and use only the
//! NKI 0.8 API list (`EmittedKernel::check`); every example (the README's `tensor_add`, the
//! kernel-optimization tutorial's five versions, the NKI Library ports) is emitted with its
//! data; an example the emitter cannot write would be refused with an error naming the call
//! and its line.

use nki_kernels::emit_examples::{emit, names};

#[test]
fn every_example_is_emitted_and_checked_or_refused_naming_the_call() {
    // Every example the emit example lists is written (the NKI Library ports included).
    let must: Vec<&str> = names();
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

#[test]
fn a_partial_last_tile_stays_an_iteration_of_its_loop() {
    // 300 rows: two full tiles of 128 and one of 44, all three iterations of one loop.
    let k = emit("layernorm_tkg").unwrap();
    let m = k.module();
    assert!(
        m.contains("    for i0 in nl.affine_range(3):\n        if i0 < 2:\n"),
        "{m}"
    );
    assert!(m.contains("        else:\n"), "{m}");
    assert!(m.contains("src=x[256:300, :])"), "{m}");
    assert!(m.contains("nisa.bn_stats(dst=sb_"), "{m}");
    assert!(m.contains(" = nl.broadcast_to(src=sb_"), "{m}");
    assert!(m.contains("nisa.activation(dst=sb_"), "{m}");
    assert!(m.contains("op=nl.rsqrt"), "{m}");
}

#[test]
fn an_lnc2_launch_is_written_once_with_the_program_id_in_its_numbers() {
    // The cores' calls differ only in numbers affine in the core: one body over `pid`.
    let k = emit("lnc2").unwrap();
    let m = k.module();
    assert!(m.contains("    pid = nl.program_id(0)\n"), "{m}");
    assert!(m.contains("src=at[128 * pid:128 * pid + 128, :]"), "{m}");
    assert!(
        m.contains("nki.lnc.sendrecv(src=sb_33, dst=sb_36, send_to_rank=-pid + 1, recv_from_rank=-pid + 1)"),
        "{m}"
    );
    assert!(
        m.contains("import nki.lnc\n") && !m.contains("if pid"),
        "{m}"
    );
    assert!(k.driver().contains("GRID = 2\n"), "{}", k.driver());
    // The README's tensor_add as kernel[2]: each core's tiles are its own columns.
    let t = emit("tensor_add_lnc2").unwrap();
    assert!(
        t.module().contains("512 * pid:512 * pid + 512]"),
        "{}",
        t.module()
    );
    assert!(emit("tensor_add").unwrap().driver().contains("GRID = 1\n"));
}
