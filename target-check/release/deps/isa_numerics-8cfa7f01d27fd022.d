/work/wt/arch/target-check/release/deps/isa_numerics-8cfa7f01d27fd022.d: nki-core/tests/isa_numerics.rs nki-core/tests/common/mod.rs

/work/wt/arch/target-check/release/deps/libisa_numerics-8cfa7f01d27fd022.rmeta: nki-core/tests/isa_numerics.rs nki-core/tests/common/mod.rs

nki-core/tests/isa_numerics.rs:
nki-core/tests/common/mod.rs:
