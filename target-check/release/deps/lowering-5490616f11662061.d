/work/wt/arch/target-check/release/deps/lowering-5490616f11662061.d: nki-core/tests/lowering.rs

/work/wt/arch/target-check/release/deps/liblowering-5490616f11662061.rmeta: nki-core/tests/lowering.rs

nki-core/tests/lowering.rs:
