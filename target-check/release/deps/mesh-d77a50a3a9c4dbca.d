/work/wt/arch/target-check/release/deps/mesh-d77a50a3a9c4dbca.d: nki-core/tests/mesh.rs nki-core/tests/common/mod.rs

/work/wt/arch/target-check/release/deps/libmesh-d77a50a3a9c4dbca.rmeta: nki-core/tests/mesh.rs nki-core/tests/common/mod.rs

nki-core/tests/mesh.rs:
nki-core/tests/common/mod.rs:
