/work/wt/arch/target-check/release/deps/reinterpret-e619ce3c4435651c.d: nki-core/tests/reinterpret.rs

/work/wt/arch/target-check/release/deps/libreinterpret-e619ce3c4435651c.rmeta: nki-core/tests/reinterpret.rs

nki-core/tests/reinterpret.rs:
