/work/wt/arch/target-check/release/deps/serde_spanned-2a418364b92381ca.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/serde_spanned-1.1.3/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/serde_spanned-1.1.3/src/spanned.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/serde_spanned-1.1.3/src/de.rs

/work/wt/arch/target-check/release/deps/libserde_spanned-2a418364b92381ca.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/serde_spanned-1.1.3/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/serde_spanned-1.1.3/src/spanned.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/serde_spanned-1.1.3/src/de.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/serde_spanned-1.1.3/src/lib.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/serde_spanned-1.1.3/src/spanned.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/serde_spanned-1.1.3/src/de.rs:
