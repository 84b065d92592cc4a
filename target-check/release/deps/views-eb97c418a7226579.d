/work/wt/arch/target-check/release/deps/views-eb97c418a7226579.d: nki-core/tests/views.rs

/work/wt/arch/target-check/release/deps/libviews-eb97c418a7226579.rmeta: nki-core/tests/views.rs

nki-core/tests/views.rs:
