/work/wt/arch/target-check/release/deps/shared_constant-acd1eea48c32ec87.d: nki-core/tests/shared_constant.rs

/work/wt/arch/target-check/release/deps/libshared_constant-acd1eea48c32ec87.rmeta: nki-core/tests/shared_constant.rs

nki-core/tests/shared_constant.rs:
