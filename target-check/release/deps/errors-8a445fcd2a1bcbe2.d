/work/wt/arch/target-check/release/deps/errors-8a445fcd2a1bcbe2.d: nki-core/tests/errors.rs

/work/wt/arch/target-check/release/deps/liberrors-8a445fcd2a1bcbe2.rmeta: nki-core/tests/errors.rs

nki-core/tests/errors.rs:
