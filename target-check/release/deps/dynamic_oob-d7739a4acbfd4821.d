/work/wt/arch/target-check/release/deps/dynamic_oob-d7739a4acbfd4821.d: nki-core/tests/dynamic_oob.rs

/work/wt/arch/target-check/release/deps/libdynamic_oob-d7739a4acbfd4821.rmeta: nki-core/tests/dynamic_oob.rs

nki-core/tests/dynamic_oob.rs:
