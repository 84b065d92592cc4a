/work/wt/arch/target-check/release/deps/device_loops-3cc84115798e8349.d: nki-core/tests/device_loops.rs

/work/wt/arch/target-check/release/deps/libdevice_loops-3cc84115798e8349.rmeta: nki-core/tests/device_loops.rs

nki-core/tests/device_loops.rs:
