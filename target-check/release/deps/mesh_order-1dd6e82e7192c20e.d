/work/wt/arch/target-check/release/deps/mesh_order-1dd6e82e7192c20e.d: nki-core/tests/mesh_order.rs

/work/wt/arch/target-check/release/deps/libmesh_order-1dd6e82e7192c20e.rmeta: nki-core/tests/mesh_order.rs

nki-core/tests/mesh_order.rs:
