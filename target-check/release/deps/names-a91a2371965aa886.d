/work/wt/arch/target-check/release/deps/names-a91a2371965aa886.d: nki-core/tests/names.rs

/work/wt/arch/target-check/release/deps/libnames-a91a2371965aa886.rmeta: nki-core/tests/names.rs

nki-core/tests/names.rs:
