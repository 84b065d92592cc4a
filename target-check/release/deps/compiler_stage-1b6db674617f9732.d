/work/wt/arch/target-check/release/deps/compiler_stage-1b6db674617f9732.d: nki-core/tests/compiler_stage.rs

/work/wt/arch/target-check/release/deps/libcompiler_stage-1b6db674617f9732.rmeta: nki-core/tests/compiler_stage.rs

nki-core/tests/compiler_stage.rs:
