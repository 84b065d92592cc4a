/work/wt/arch/target-check/release/deps/module_cycles-dbcf0a6238b6e782.d: nki-core/tests/module_cycles.rs

/work/wt/arch/target-check/release/deps/libmodule_cycles-dbcf0a6238b6e782.rmeta: nki-core/tests/module_cycles.rs

nki-core/tests/module_cycles.rs:

# env-dep:CARGO_MANIFEST_DIR=/work/wt/arch/nki-core
