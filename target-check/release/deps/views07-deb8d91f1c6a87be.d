/work/wt/arch/target-check/release/deps/views07-deb8d91f1c6a87be.d: nki-core/tests/views07.rs

/work/wt/arch/target-check/release/deps/libviews07-deb8d91f1c6a87be.rmeta: nki-core/tests/views07.rs

nki-core/tests/views07.rs:
