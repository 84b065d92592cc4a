/work/wt/arch/target-check/release/deps/timing-464d33cf2ccbef67.d: nki-core/tests/timing.rs

/work/wt/arch/target-check/release/deps/libtiming-464d33cf2ccbef67.rmeta: nki-core/tests/timing.rs

nki-core/tests/timing.rs:
