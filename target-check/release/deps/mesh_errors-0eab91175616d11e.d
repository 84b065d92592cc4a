/work/wt/arch/target-check/release/deps/mesh_errors-0eab91175616d11e.d: nki-core/tests/mesh_errors.rs

/work/wt/arch/target-check/release/deps/libmesh_errors-0eab91175616d11e.rmeta: nki-core/tests/mesh_errors.rs

nki-core/tests/mesh_errors.rs:
