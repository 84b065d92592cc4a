/work/wt/arch/target-check/release/deps/tensors-d082c47790c25157.d: nki-core/tests/tensors.rs

/work/wt/arch/target-check/release/deps/libtensors-d082c47790c25157.rmeta: nki-core/tests/tensors.rs

nki-core/tests/tensors.rs:
