/work/wt/arch/target-check/release/deps/accumulators-75c176e64ea06560.d: nki-core/tests/accumulators.rs nki-core/tests/common/mod.rs

/work/wt/arch/target-check/release/deps/libaccumulators-75c176e64ea06560.rmeta: nki-core/tests/accumulators.rs nki-core/tests/common/mod.rs

nki-core/tests/accumulators.rs:
nki-core/tests/common/mod.rs:
