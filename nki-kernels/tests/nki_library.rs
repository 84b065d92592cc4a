//! The NKI Library ports against their independent references, in execute, simulate and
//! estimate mode (simulate and estimate must model the same latency), plus argument errors.

use nki_core::prelude::*;
use nki_kernels::nki_library::check::{run, KERNELS};
use nki_kernels::nki_library::{cumsum, router_topk};

#[test]
fn every_port_matches_in_three_modes() {
    for name in KERNELS {
        let mut lat = Vec::new();
        for mode in [Mode::Execute, Mode::Simulate, Mode::Estimate] {
            let (cmp, rep) = run(name, Launch::new(1).mode(mode)).unwrap();
            if let Err(e) = cmp {
                panic!("{name} ({mode:?}): {e}");
            }
            if let Some(p) = rep.profile {
                assert!(p.latency_ns > 0.0, "{name}");
                lat.push(p.latency_ns);
            }
        }
        assert_eq!(lat.len(), 2, "{name}");
        assert_eq!(lat[0], lat[1], "{name}: simulate vs estimate");
    }
}

#[test]
fn cumsum_edge_shapes() {
    // One row, a partial partition tile and a partial free tile with a carry.
    for (rows, cols) in [(1, 5), (130, 3000)] {
        let x: Vec<f32> = (0..rows * cols).map(|i| ((i % 7) as f32) - 3.0).collect();
        let xh = Hbm::from_vec(&[rows, cols], x.clone()).unwrap();
        let mut y = Hbm::<f32>::zeros_dyn(&[rows, cols]).unwrap();
        cumsum::launch(1, &xh, &mut y).unwrap();
        let got = y.to_f32_vec().unwrap();
        let want = nki_kernels::nki_library::reference::cumsum(rows, cols, &x);
        assert_eq!(got, want, "[{rows}, {cols}]");
    }
}

#[test]
fn router_rejects_k_above_8() {
    let x = Hbm::<f32>::zeros([128, 4]);
    let w = Hbm::<f32>::zeros([128, 16]);
    let b = Hbm::<f32>::zeros([1, 16]);
    let (mut lg, mut aff) = (Hbm::<f32>::zeros([4, 16]), Hbm::<f32>::zeros([4, 16]));
    let mut idx = Hbm::<u32>::zeros([4, 9]);
    let e = router_topk::launch(1, &x, &w, &b, &mut lg, &mut aff, &mut idx, 9, false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("k <= 8"), "{e}");
}
