/work/wt/arch/target-check/release/deps/indirect_dma-7e32aeaa1c37cee2.d: nki-core/tests/indirect_dma.rs

/work/wt/arch/target-check/release/deps/libindirect_dma-7e32aeaa1c37cee2.rmeta: nki-core/tests/indirect_dma.rs

nki-core/tests/indirect_dma.rs:
