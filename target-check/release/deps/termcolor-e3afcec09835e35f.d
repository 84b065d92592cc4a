/work/wt/arch/target-check/release/deps/termcolor-e3afcec09835e35f.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/termcolor-1.4.1/src/lib.rs

/work/wt/arch/target-check/release/deps/libtermcolor-e3afcec09835e35f.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/termcolor-1.4.1/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/termcolor-1.4.1/src/lib.rs:
