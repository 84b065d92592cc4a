/work/wt/arch/target-check/release/deps/compile_fail-1b5bba7856247bad.d: nki-core/tests/compile_fail.rs

/work/wt/arch/target-check/release/deps/libcompile_fail-1b5bba7856247bad.rmeta: nki-core/tests/compile_fail.rs

nki-core/tests/compile_fail.rs:
