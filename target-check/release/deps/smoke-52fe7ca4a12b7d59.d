/work/wt/arch/target-check/release/deps/smoke-52fe7ca4a12b7d59.d: nki-core/tests/smoke.rs

/work/wt/arch/target-check/release/deps/libsmoke-52fe7ca4a12b7d59.rmeta: nki-core/tests/smoke.rs

nki-core/tests/smoke.rs:
