/work/wt/arch/target-check/release/deps/lang_numerics-cb8c1ff2edfa03a4.d: nki-core/tests/lang_numerics.rs nki-core/tests/common/mod.rs

/work/wt/arch/target-check/release/deps/liblang_numerics-cb8c1ff2edfa03a4.rmeta: nki-core/tests/lang_numerics.rs nki-core/tests/common/mod.rs

nki-core/tests/lang_numerics.rs:
nki-core/tests/common/mod.rs:
