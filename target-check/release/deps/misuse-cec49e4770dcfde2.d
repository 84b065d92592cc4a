/work/wt/arch/target-check/release/deps/misuse-cec49e4770dcfde2.d: nki-core/tests/misuse.rs

/work/wt/arch/target-check/release/deps/libmisuse-cec49e4770dcfde2.rmeta: nki-core/tests/misuse.rs

nki-core/tests/misuse.rs:
