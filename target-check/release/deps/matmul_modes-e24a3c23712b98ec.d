/work/wt/arch/target-check/release/deps/matmul_modes-e24a3c23712b98ec.d: nki-core/tests/matmul_modes.rs nki-core/tests/common/mod.rs

/work/wt/arch/target-check/release/deps/libmatmul_modes-e24a3c23712b98ec.rmeta: nki-core/tests/matmul_modes.rs nki-core/tests/common/mod.rs

nki-core/tests/matmul_modes.rs:
nki-core/tests/common/mod.rs:
