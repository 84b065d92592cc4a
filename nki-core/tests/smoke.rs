use nki_core::prelude::*;

#[nki_kernel]
fn tensor_add(a: &Hbm<f32>, b: &Hbm<f32>, c: &mut Hbm<f32>) {
    let (i, j) = (nl::program_id(0) * 128, nl::program_id(1) * 512);
    let x = nl::load(a.slice((i..i + 128, j..j + 512)));
    let y = nl::load(b.slice((i..i + 128, j..j + 512)));
    nl::store(c.slice((i..i + 128, j..j + 512)), &nl::add(&x, &y));
}

#[test]
fn add_runs_on_grid() {
    let a = Hbm::<f32>::from_array(&ndarray::Array2::from_shape_fn((256, 1024), |(i, j)| {
        (i * 1024 + j) as f32
    }))
    .unwrap();
    let b = Hbm::<f32>::full([256, 1024], 1.0);
    let mut c = Hbm::<f32>::zeros([256, 1024]);
    let r = launch!(tensor_add[2, 2](&a, &b, &mut c)).unwrap();
    assert_eq!(r.instances.len(), 4);
    let out = c.to_array().unwrap();
    assert_eq!(out[[255, 1023]], (255 * 1024 + 1023) as f32 + 1.0);
    let r = launch!(tensor_add[spmd_dim(1, nc(2)), 2](&a, &b, &mut c)).unwrap();
    assert_eq!(r.instances.iter().filter(|i| i.nc == 1).count(), 2);
}

#[nki_kernel]
fn racy(a: &Hbm<f32>, c: &mut Hbm<f32>) {
    let x = nl::load(a.slice((0..128, 0..512)));
    nl::store(c.slice((0..128, 0..512)), &x);
}

#[test]
fn race_between_instances_is_reported() {
    let a = Hbm::<f32>::full([128, 512], 1.0);
    let mut c = Hbm::<f32>::zeros([128, 512]);
    let e = launch!(racy[2](&a, &mut c)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutputDependency);
    assert!(e.to_string().contains("program id [0]"), "{e}");
}

/// Partial last tiles (NKI's masks) by slicing with `nl::tile_range`: 250 rows = 128 + 122.
#[nki_kernel]
fn scale_rows(a: &Hbm<f32>, c: &mut Hbm<f32>) {
    let rows = a.shape()[0];
    for t in nl::affine_range(nl::num_tiles(rows, 128)) {
        let r = nl::tile_range(t, 128, rows);
        let x = nl::load(a.slice((r.clone(), ..)));
        nl::store(c.slice((r, ..)), &nl::multiply(&x, 2.0f32));
    }
}

#[test]
fn partial_tiles_by_tile_range() {
    let a = Hbm::<f32>::from_array(&ndarray::Array2::from_shape_fn((250, 64), |(i, j)| {
        (i * 64 + j) as f32
    }))
    .unwrap();
    let mut c = Hbm::<f32>::zeros([250, 64]);
    launch!(scale_rows[1](&a, &mut c)).unwrap();
    let out = c.to_array().unwrap();
    assert_eq!(out[[249, 63]], 2.0 * (249 * 64 + 63) as f32);
    assert_eq!(out[[127, 0]], 2.0 * (127 * 64) as f32);
    assert_eq!(nl::tile_range(1, 128, 250), 128..250);
    assert_eq!(nl::tile_range(2, 128, 250), 250..250);
}
