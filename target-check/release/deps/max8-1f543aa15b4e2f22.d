/work/wt/arch/target-check/release/deps/max8-1f543aa15b4e2f22.d: nki-core/tests/max8.rs nki-core/tests/common/mod.rs

/work/wt/arch/target-check/release/deps/libmax8-1f543aa15b4e2f22.rmeta: nki-core/tests/max8.rs nki-core/tests/common/mod.rs

nki-core/tests/max8.rs:
nki-core/tests/common/mod.rs:
