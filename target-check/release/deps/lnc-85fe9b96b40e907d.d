/work/wt/arch/target-check/release/deps/lnc-85fe9b96b40e907d.d: nki-core/tests/lnc.rs

/work/wt/arch/target-check/release/deps/liblnc-85fe9b96b40e907d.rmeta: nki-core/tests/lnc.rs

nki-core/tests/lnc.rs:
