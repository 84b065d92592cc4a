/work/wt/arch/target-check/release/deps/spmd-d89dded995c434d8.d: nki-core/tests/spmd.rs

/work/wt/arch/target-check/release/deps/libspmd-d89dded995c434d8.rmeta: nki-core/tests/spmd.rs

nki-core/tests/spmd.rs:
