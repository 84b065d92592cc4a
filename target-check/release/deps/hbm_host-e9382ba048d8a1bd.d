/work/wt/arch/target-check/release/deps/hbm_host-e9382ba048d8a1bd.d: nki-core/tests/hbm_host.rs

/work/wt/arch/target-check/release/deps/libhbm_host-e9382ba048d8a1bd.rmeta: nki-core/tests/hbm_host.rs

nki-core/tests/hbm_host.rs:
