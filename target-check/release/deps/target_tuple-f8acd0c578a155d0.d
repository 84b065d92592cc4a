/work/wt/arch/target-check/release/deps/target_tuple-f8acd0c578a155d0.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/target-tuple-1.0.2/src/lib.rs /work/wt/arch/target-check/release/build/target-tuple-5e7ea832f5777015/out/macros.rs

/work/wt/arch/target-check/release/deps/libtarget_tuple-f8acd0c578a155d0.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/target-tuple-1.0.2/src/lib.rs /work/wt/arch/target-check/release/build/target-tuple-5e7ea832f5777015/out/macros.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/target-tuple-1.0.2/src/lib.rs:
/work/wt/arch/target-check/release/build/target-tuple-5e7ea832f5777015/out/macros.rs:

# env-dep:OUT_DIR=/work/wt/arch/target-check/release/build/target-tuple-5e7ea832f5777015/out
