/work/wt/arch/target-check/release/deps/rawpointer-cd706e346fb3558d.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rawpointer-0.2.1/src/lib.rs

/work/wt/arch/target-check/release/deps/librawpointer-cd706e346fb3558d.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rawpointer-0.2.1/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rawpointer-0.2.1/src/lib.rs:
