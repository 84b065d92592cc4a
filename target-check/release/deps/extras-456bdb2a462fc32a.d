/work/wt/arch/target-check/release/deps/extras-456bdb2a462fc32a.d: nki-core/tests/extras.rs nki-core/tests/common/mod.rs

/work/wt/arch/target-check/release/deps/libextras-456bdb2a462fc32a.rmeta: nki-core/tests/extras.rs nki-core/tests/common/mod.rs

nki-core/tests/extras.rs:
nki-core/tests/common/mod.rs:
