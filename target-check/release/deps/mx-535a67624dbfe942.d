/work/wt/arch/target-check/release/deps/mx-535a67624dbfe942.d: nki-core/tests/mx.rs nki-core/tests/common/mod.rs

/work/wt/arch/target-check/release/deps/libmx-535a67624dbfe942.rmeta: nki-core/tests/mx.rs nki-core/tests/common/mod.rs

nki-core/tests/mx.rs:
nki-core/tests/common/mod.rs:
