/work/wt/arch/target-check/release/deps/collectives07-e04c5e1bcbd2c0fd.d: nki-core/tests/collectives07.rs

/work/wt/arch/target-check/release/deps/libcollectives07-e04c5e1bcbd2c0fd.rmeta: nki-core/tests/collectives07.rs

nki-core/tests/collectives07.rs:
