//! Writes a kernel as an NKI 0.8 Python module with its driver (`nki_core::emit`): the
//! README's `tensor_add` (also as `kernel[2]`, `tensor_add_lnc2`), the LNC=2 matmul of
//! `examples/lnc2.rs` (`lnc2`), the kernel-optimization tutorial's five versions, the NKI
//! Library ports. `kernel_optimization` names the five versions, `all` every example.
//!
//! ```text
//! cargo run --release --example emit -- NAME [DIR]      # DIR defaults to emitted/
//! python3 DIR/NAME_run.py            # nki.simulate, or --device for nki.execute on a Trainium
//! ```
//!
//! Prints one line per kernel: the files written and the module's length, or why the
//! emitter refused it.

use nki_kernels::emit_examples::{emit, names};
use nki_kernels::kernel_optimization::Version;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(name) = args.first() else {
        eprintln!(
            "usage: emit NAME [DIR]; NAME: all, kernel_optimization, {}",
            names().join(", ")
        );
        return ExitCode::FAILURE;
    };
    let dir = args.get(1).map_or("emitted", String::as_str);
    let chosen: Vec<&str> = match name.as_str() {
        "all" => names(),
        "kernel_optimization" => Version::ALL.iter().map(|v| v.name()).collect(),
        n => vec![n],
    };
    let mut ok = true;
    for n in chosen {
        match emit(n).and_then(|k| Ok((k.write(dir)?, k.module_lines()))) {
            Ok((files, lines)) => {
                println!(
                    "  {n:<18} {lines:>4} lines  {} files in {dir}/",
                    files.len()
                )
            }
            Err(e) => {
                ok = false;
                println!("  {n:<18} refused: {e}");
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
