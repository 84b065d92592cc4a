/work/wt/arch/target-check/release/deps/nki_macros-2c889bd4ee1db7c4.d: nki-macros/src/lib.rs nki-macros/src/expand.rs nki-macros/src/model.rs

/work/wt/arch/target-check/release/deps/libnki_macros-2c889bd4ee1db7c4.so: nki-macros/src/lib.rs nki-macros/src/expand.rs nki-macros/src/model.rs

nki-macros/src/lib.rs:
nki-macros/src/expand.rs:
nki-macros/src/model.rs:
