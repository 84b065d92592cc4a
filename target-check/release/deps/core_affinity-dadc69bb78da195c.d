/work/wt/arch/target-check/release/deps/core_affinity-dadc69bb78da195c.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/core_affinity-0.8.3/src/lib.rs

/work/wt/arch/target-check/release/deps/libcore_affinity-dadc69bb78da195c.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/core_affinity-0.8.3/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/core_affinity-0.8.3/src/lib.rs:
