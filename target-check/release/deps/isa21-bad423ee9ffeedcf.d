/work/wt/arch/target-check/release/deps/isa21-bad423ee9ffeedcf.d: nki-core/tests/isa21.rs nki-core/tests/common/mod.rs

/work/wt/arch/target-check/release/deps/libisa21-bad423ee9ffeedcf.rmeta: nki-core/tests/isa21.rs nki-core/tests/common/mod.rs

nki-core/tests/isa21.rs:
nki-core/tests/common/mod.rs:
