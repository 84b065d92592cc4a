/work/wt/arch/target-check/release/deps/integers-06742db5bff014ad.d: nki-core/tests/integers.rs

/work/wt/arch/target-check/release/deps/libintegers-06742db5bff014ad.rmeta: nki-core/tests/integers.rs

nki-core/tests/integers.rs:
