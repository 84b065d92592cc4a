//! NKI 0.7's tensor view methods on SBUF and HBM tensors: `rearrange` (einops-style),
//! `select`, `broadcast`, `expand_dim`, `squeeze_dim` and `get_pattern`. Values go through
//! real instructions (`tensor_copy`, `dma_copy`) in execute and simulate mode and are
//! checked against plain index loops; each rule has a test of its error.

use nki_core::prelude::*;

fn seq(n: usize) -> Vec<f32> {
    (0..n).map(|x| x as f32).collect()
}

/// Runs `body` in `mode` with `x` as input and an output of `shape`; returns the output.
fn run_with(
    mode: Mode,
    x: &Hbm<f32>,
    shape: &[usize],
    body: &(dyn Fn(&Hbm<f32>, &HbmOut<'_, f32>) + Sync),
) -> Vec<f32> {
    let mut out = Hbm::from_vec(shape, vec![0.0f32; shape.iter().product()]).unwrap();
    let o = out.as_output();
    Launch::new(1).mode(mode).run(|| body(x, &o)).unwrap();
    out.to_f32_vec().unwrap()
}

/// An SBUF `[4, 6]` tensor rearranged as `p (a b) -> p b a` (a = 2): element `(p, b, a)` is
/// `x[p, a * 3 + b]`; then one column selected, a size-1 dimension added and removed.
#[test]
fn on_chip_rearrange_select_expand_and_squeeze() {
    let x = Hbm::from_vec(&[4, 6], seq(24)).unwrap();
    for mode in [Mode::Execute, Mode::Simulate] {
        let got = run_with(mode, &x, &[4, 3, 2], &|x, o| {
            let t = nl::ndarray(&[4, 6], DType::F32, nl::sbuf);
            nisa::dma_copy(&t, x, None);
            let r = t.rearrange("p (a b) -> p b a", &[("a", 2)]);
            assert_eq!(r.shape(), &[4, 3, 2]);
            assert_eq!(r.get_pattern(), vec![[6, 4], [1, 3], [3, 2]]);
            let y = nl::ndarray(&[4, 3, 2], DType::F32, nl::sbuf);
            nisa::tensor_copy(&y, r, None);
            nisa::dma_copy(o.view(), &y, None);
        });
        let mut want = vec![0.0; 24];
        for p in 0..4 {
            for b in 0..3 {
                for a in 0..2 {
                    want[p * 6 + b * 2 + a] = (p * 6 + a * 3 + b) as f32;
                }
            }
        }
        assert_eq!(got, want, "{mode:?}");

        let got = run_with(mode, &x, &[4, 3], &|x, o| {
            let t = nl::ndarray(&[4, 6], DType::F32, nl::sbuf);
            nisa::dma_copy(&t, x, None);
            // [4, 6] -> [4, 3, 2] -> select a = 1 -> [4, 3] -> [4, 1, 3] -> [4, 3]
            let r = t.reshape(&[4, 3, 2]).select(2, 1);
            let e = r.expand_dim(1);
            assert_eq!(e.shape(), &[4, 1, 3]);
            let s = e.squeeze_dim(1);
            assert_eq!(
                (s.shape(), s.get_pattern()),
                (&[4, 3][..], vec![[6, 4], [2, 3]])
            );
            assert_eq!(s.offset(), 1);
            let y = nl::ndarray(&[4, 3], DType::F32, nl::sbuf);
            nisa::tensor_copy(&y, s, None);
            nisa::dma_copy(o.view(), &y, None);
        });
        let want: Vec<f32> = (0..4)
            .flat_map(|p| (0..3).map(move |b| (p * 6 + b * 2 + 1) as f32))
            .collect();
        assert_eq!(got, want, "{mode:?}");
    }
}

/// Selecting on the partition dimension keeps one partition (as `t[i]` does on chip), and a
/// `[4, 1]` column broadcast along the free dimension feeds an instruction 5 copies of it.
#[test]
fn on_chip_partition_select_and_free_broadcast() {
    let x = Hbm::from_vec(&[4, 6], seq(24)).unwrap();
    for mode in [Mode::Execute, Mode::Simulate] {
        // Partition 32 (a legal start for one partition).
        let tall = Hbm::from_vec(&[40, 3], seq(120)).unwrap();
        let got = run_with(mode, &tall, &[1, 3], &|x, o| {
            let t = nl::ndarray(&[40, 3], DType::F32, nl::sbuf);
            nisa::dma_copy(&t, x, None);
            let row = t.select(0, 32);
            assert_eq!(row.shape(), &[1, 3]);
            let y = nl::ndarray(&[1, 3], DType::F32, nl::sbuf);
            nisa::tensor_copy(&y, row, None);
            nisa::dma_copy(o.view(), &y, None);
        });
        assert_eq!(got, vec![96.0, 97.0, 98.0], "{mode:?}");

        let got = run_with(mode, &x, &[4, 5], &|x, o| {
            let t = nl::ndarray(&[4, 6], DType::F32, nl::sbuf);
            nisa::dma_copy(&t, x, None);
            let b = t.slice((.., 4..5)).broadcast(1, 5);
            assert_eq!(b.get_pattern(), vec![[6, 4], [0, 5]]);
            let y = nl::ndarray(&[4, 5], DType::F32, nl::sbuf);
            nisa::tensor_copy(&y, b, None);
            nisa::dma_copy(o.view(), &y, None);
        });
        let want: Vec<f32> = (0..4).flat_map(|p| [(p * 6 + 4) as f32; 5]).collect();
        assert_eq!(got, want, "{mode:?}");
    }
}

/// HBM views: a `[2, 12]` tensor rearranged as `r (h d) -> h r d` (h = 3) is loaded into a
/// `[3, 2, 4]` tile; `select` drops an HBM dimension; a kernel-allocated HBM tensor takes
/// the same methods; the writable output view takes `expand_dim`/`squeeze_dim`.
#[test]
fn hbm_rearrange_select_and_writable_views() {
    let x = Hbm::from_vec(&[2, 12], seq(24)).unwrap();
    for mode in [Mode::Execute, Mode::Simulate] {
        let got = run_with(mode, &x, &[3, 2, 4], &|x, o| {
            let v = x.view().rearrange("r (h d) -> h r d", &[("h", 3)]);
            assert_eq!(v.shape(), &[3, 2, 4]);
            assert_eq!(v.get_pattern(), vec![[4, 3], [12, 2], [1, 4]]);
            let t = nl::ndarray(&[3, 2, 4], DType::F32, nl::sbuf);
            nisa::dma_copy(&t, v, None);
            nisa::dma_copy(o.view(), &t, None);
        });
        let mut want = vec![0.0; 24];
        for h in 0..3 {
            for r in 0..2 {
                for d in 0..4 {
                    want[h * 8 + r * 4 + d] = (r * 12 + h * 4 + d) as f32;
                }
            }
        }
        assert_eq!(got, want, "{mode:?}");

        // select(0, 1) of [2, 12] is row 1 as [12]; reshape it [3, 4]; through a scratch
        // HBM tensor (a `Tensor`) and into the output viewed [1, 3, 4] -> [3, 4].
        let got = run_with(mode, &x, &[1, 3, 4], &|x, o| {
            let row = x.view().select(0, 1);
            assert_eq!(row.shape(), &[12]);
            let t = nl::ndarray(&[3, 4], DType::F32, nl::sbuf);
            nisa::dma_copy(&t, row.reshape(&[3, 4]), None);
            let h = nl::ndarray(&[1, 3, 4], DType::F32, nl::private_hbm);
            nisa::dma_copy(h.squeeze_dim(0), &t, None);
            let back = nl::ndarray(&[3, 4], DType::F32, nl::sbuf);
            nisa::dma_copy(&back, h.select(0, 0), None);
            nisa::dma_copy(o.view().squeeze_dim(0), &back, None);
        });
        assert_eq!(got, seq(24)[12..].to_vec(), "{mode:?}");
    }
}

#[test]
fn view_methods_follow_the_rules_with_clear_errors() {
    let run = |f: &(dyn Fn() + Sync)| Launch::new(1).run(f).unwrap_err();
    // The partition axis must stay first on chip.
    let e = run(&|| {
        let t = nl::ndarray(&[4, 6], DType::F32, nl::sbuf.name("tp"));
        let _ = t.rearrange("p f -> f p", &[]);
    });
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(
        e.message().contains("partition") && e.message().contains("tp"),
        "{e}"
    );
    // A merge of axes that are not contiguous relative to each other needs a copy.
    let x = Hbm::from_vec(&[2, 3], seq(6)).unwrap();
    let e = run(&|| {
        let _ = x.view().rearrange("a b -> (b a)", &[]);
    });
    assert!(e.message().contains("cannot be merged"), "{e}");
    assert!(e.message().contains("a b -> (b a)"), "{e}");
    assert!(
        e.location().is_some_and(|l| l.file.ends_with("views07.rs")),
        "{e:?}"
    );
    // Pattern mistakes name the pattern.
    for (pattern, sizes, says) in [
        ("a b -> a", &[][..], "missing on the right"),
        ("a b -> a b c", &[], "not on the left"),
        ("a -> a", &[], "names 1 dimensions"),
        ("a (b c) -> a b c", &[], "more than one size"),
        ("a (b c) -> a b c", &[("b", 2)], "do not divide"),
        ("a b -> a b", &[("z", 2)], "not a split axis"),
        ("a (b -> a b", &[], "unbalanced"),
        ("a b", &[], "->"),
    ] {
        let e = run(&|| {
            let _ = x.view().rearrange(pattern, sizes);
        });
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{pattern}: {e}");
        assert!(e.message().contains(says), "{pattern}: {e}");
    }
    // squeeze_dim of a dimension that is not 1; expand_dim before the partition dim.
    let e = run(&|| {
        let t = nl::ndarray(&[4, 6], DType::F32, nl::sbuf);
        let _ = t.squeeze_dim(1);
    });
    assert!(e.message().contains("size-1"), "{e}");
    let e = run(&|| {
        let t = nl::ndarray(&[4, 6], DType::F32, nl::sbuf);
        let _ = t.expand_dim(0);
    });
    assert!(e.message().contains("partition dimension"), "{e}");
    let e = run(&|| {
        let _ = x.view().expand_dim(3);
    });
    assert!(e.message().contains("0..=2"), "{e}");
    // select out of range.
    let e = run(&|| {
        let _ = x.view().select(2, 0);
    });
    assert!(e.message().contains("no dimension 2"), "{e}");
    let e = run(&|| {
        let _ = x.view().select(1, 3);
    });
    assert_eq!(e.kind(), ErrorKind::OutOfBounds, "{e}");
    // Only a free dimension of size 1 broadcasts on chip, and a broadcast view is read-only.
    let e = run(&|| {
        let t = nl::ndarray(&[1, 6], DType::F32, nl::sbuf);
        let _ = t.broadcast(0, 4);
    });
    assert!(e.message().contains("partition"), "{e}");
    let e = run(&|| {
        let t = nl::ndarray(&[4, 1], DType::F32, nl::sbuf.name("col"));
        nisa::memset(t.broadcast(1, 3), 0.0, None);
    });
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(
        e.message().contains("read-only") && e.message().contains("col"),
        "{e}"
    );
}

/// `nl::zeros_like` / `nl::empty_like` take the shape and dtype of any tensor or view (here
/// a kernel's `Hbm` parameter and an on-chip view), or another dtype.
#[test]
fn zeros_like_and_empty_like_copy_shape_and_dtype() {
    let x = Hbm::from_vec(&[4, 6], seq(24)).unwrap();
    for mode in [Mode::Execute, Mode::Simulate] {
        let got = run_with(mode, &x, &[4, 6], &|x, o| {
            let z = nl::zeros_like(x, None, nl::sbuf);
            assert_eq!((z.shape(), z.dtype()), (&[4, 6][..], DType::F32));
            let t = nl::empty_like(&z, Some(DType::BF16), nl::sbuf);
            assert_eq!((t.shape(), t.dtype()), (&[4, 6][..], DType::BF16));
            nisa::dma_copy(&t, x, None);
            // A view's shape: the [4, 3] column slice.
            let half = nl::zeros_like(&t.slice((.., 0..3)), None, nl::sbuf);
            assert_eq!((half.shape(), half.dtype()), (&[4, 3][..], DType::BF16));
            nisa::tensor_tensor(&z, &z, &t, nisa::AluOp::Add, None);
            nisa::dma_copy(o.view(), &z, None);
        });
        assert_eq!(got, seq(24), "{mode:?}");
    }
    // Read before written: empty_like allocates without a fill.
    let e = Launch::new(1)
        .run(|| {
            let t = nl::empty_like(&x, None, nl::sbuf);
            let y = nl::ndarray(&[4, 6], DType::F32, nl::sbuf);
            nisa::tensor_copy(&y, &t, None);
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UninitializedRead, "{e}");
}
