/work/wt/arch/target-check/release/deps/glob-f15ced65ab4cb024.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/glob-0.3.4/src/lib.rs

/work/wt/arch/target-check/release/deps/libglob-f15ced65ab4cb024.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/glob-0.3.4/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/glob-0.3.4/src/lib.rs:
