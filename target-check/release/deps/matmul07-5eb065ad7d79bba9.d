/work/wt/arch/target-check/release/deps/matmul07-5eb065ad7d79bba9.d: nki-core/tests/matmul07.rs nki-core/tests/common/mod.rs

/work/wt/arch/target-check/release/deps/libmatmul07-5eb065ad7d79bba9.rmeta: nki-core/tests/matmul07.rs nki-core/tests/common/mod.rs

nki-core/tests/matmul07.rs:
nki-core/tests/common/mod.rs:
