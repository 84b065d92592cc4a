/work/wt/arch/target-check/release/deps/alu07-fef5cd41a3d9df8b.d: nki-core/tests/alu07.rs nki-core/tests/common/mod.rs

/work/wt/arch/target-check/release/deps/libalu07-fef5cd41a3d9df8b.rmeta: nki-core/tests/alu07.rs nki-core/tests/common/mod.rs

nki-core/tests/alu07.rs:
nki-core/tests/common/mod.rs:
