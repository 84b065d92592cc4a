/work/wt/arch/target-check/release/deps/nonzero-cf1c72b36cc8160a.d: nki-core/tests/nonzero.rs nki-core/tests/common/mod.rs

/work/wt/arch/target-check/release/deps/libnonzero-cf1c72b36cc8160a.rmeta: nki-core/tests/nonzero.rs nki-core/tests/common/mod.rs

nki-core/tests/nonzero.rs:
nki-core/tests/common/mod.rs:
