/work/wt/arch/target-check/release/deps/trn3-83672e62683a6cce.d: nki-core/tests/trn3.rs nki-core/tests/common/mod.rs

/work/wt/arch/target-check/release/deps/libtrn3-83672e62683a6cce.rmeta: nki-core/tests/trn3.rs nki-core/tests/common/mod.rs

nki-core/tests/trn3.rs:
nki-core/tests/common/mod.rs:
