/work/wt/arch/target-check/release/deps/indirect07-c2395f6f7231df57.d: nki-core/tests/indirect07.rs nki-core/tests/common/mod.rs

/work/wt/arch/target-check/release/deps/libindirect07-c2395f6f7231df57.rmeta: nki-core/tests/indirect07.rs nki-core/tests/common/mod.rs

nki-core/tests/indirect07.rs:
nki-core/tests/common/mod.rs:
