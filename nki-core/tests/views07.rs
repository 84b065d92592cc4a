//! NKI 0.7's tensor view methods on SBUF and HBM tensors: `rearrange` (einops-style),
//! `select`, `broadcast`, `expand_dim`, `squeeze_dim`, `reshape_dim`, `flatten_dims`,
//! `vector_select` and `get_pattern`, and the `nl.is_*` buffer predicates. Values go through
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

/// `reshape_dim` splits one dimension (one size inferred from `-1`), `flatten_dims` merges
/// contiguous ones: on chip `[4, 24] -> [4, 2, 3, 4]`, the second half selected and merged
/// back to `[4, 12]`; in HBM `[2, 3, 8] -> [6, 8]`, and `[2, 3, 8] -> [2, 3, 4, 2]` with the
/// even elements selected and merged to `[6, 4]`; a kernel-allocated tensor takes both.
#[test]
fn reshape_dim_and_flatten_dims_on_chip_and_in_hbm() {
    let x = Hbm::from_vec(&[4, 24], seq(96)).unwrap();
    let h = Hbm::from_vec(&[2, 3, 8], seq(48)).unwrap();
    for mode in [Mode::Execute, Mode::Simulate] {
        let got = run_with(mode, &x, &[4, 12], &|x, o| {
            let t = nl::ndarray(&[4, 24], DType::F32, nl::sbuf);
            nisa::dma_copy(&t, x, None);
            let r = t.reshape_dim(1, &[2, -1, 4]);
            assert_eq!(r.shape(), &[4, 2, 3, 4]);
            assert_eq!(r.get_pattern(), vec![[24, 4], [12, 2], [4, 3], [1, 4]]);
            let f = r.select(1, 1).flatten_dims(1, 2);
            assert_eq!((f.shape(), f.offset()), (&[4, 12][..], 12));
            let y = nl::ndarray(&[4, 12], DType::F32, nl::sbuf);
            nisa::tensor_copy(&y, f, None);
            nisa::dma_copy(o.view(), &y, None);
        });
        let want: Vec<f32> = (0..4)
            .flat_map(|p| (12..24).map(move |f| (p * 24 + f) as f32))
            .collect();
        assert_eq!(got, want, "{mode:?}");

        let got = run_with(mode, &h, &[6, 8], &|h, o| {
            let t = nl::ndarray(&[6, 8], DType::F32, nl::sbuf);
            let v = h.view().flatten_dims(0, 1);
            assert_eq!(
                (v.shape(), v.get_pattern()),
                (&[6, 8][..], vec![[8, 6], [1, 8]])
            );
            nisa::dma_copy(&t, v, None);
            // Through a kernel-allocated HBM tensor viewed [2, 3, 8] and flattened back.
            let s = nl::ndarray(&[2, 24], DType::F32, nl::private_hbm);
            nisa::dma_copy(s.reshape_dim(1, &[3, 8]).flatten_dims(0, 1), &t, None);
            let back = nl::ndarray(&[6, 8], DType::F32, nl::sbuf);
            nisa::dma_copy(&back, s.reshape_dim(1, &[-1, 8]).flatten_dims(0, 1), None);
            nisa::dma_copy(o.view(), &back, None);
        });
        assert_eq!(got, seq(48), "{mode:?}");

        let got = run_with(mode, &h, &[6, 4], &|h, o| {
            let v = h.view().reshape_dim(2, &[-1, 2]).select(3, 0);
            assert_eq!(v.shape(), &[2, 3, 4]);
            let t = nl::ndarray(&[6, 4], DType::F32, nl::sbuf);
            nisa::dma_copy(&t, v.flatten_dims(0, 1), None);
            nisa::dma_copy(
                o.view().reshape_dim(0, &[2, 3]).flatten_dims(0, 1),
                &t,
                None,
            );
        });
        let want: Vec<f32> = (0..24).map(|i| (2 * i) as f32).collect();
        assert_eq!(got, want, "{mode:?}");
    }
}

#[test]
fn reshape_dim_and_flatten_dims_errors_name_the_view_and_the_line() {
    let run = |f: &(dyn Fn() + Sync)| Launch::new(1).run(f).unwrap_err();
    let x = Hbm::from_vec(&[4, 24], seq(96)).unwrap();
    let here = |e: &NkiError| e.location().is_some_and(|l| l.file.ends_with("views07.rs"));
    for (sizes, says) in [
        (&[5, -1][..], "5 does not divide its size 24"),
        (&[2, 3], "product 6 is not its size 24"),
        (&[-1, -1], "at most one -1"),
        (&[0, 24], "positive"),
        (&[1, 2, 2, 2, 3], "1 to 5 dimensions"),
    ] {
        let e = run(&|| {
            let _ = x.view().reshape_dim(1, sizes);
        });
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch, "{sizes:?}: {e}");
        assert!(
            e.op() == "reshape_dim" && e.message().contains(says),
            "{sizes:?}: {e}"
        );
        assert!(e.message().contains("[4, 24]"), "{e}");
        assert!(here(&e), "{e:?}");
    }
    // Merging dimensions that are not contiguous (a selected half, a permutation).
    let e = run(&|| {
        let _ = x
            .view()
            .reshape_dim(1, &[2, 3, 4])
            .select(2, 1)
            .flatten_dims(1, 2);
    });
    assert_eq!(
        (e.kind(), e.op()),
        (ErrorKind::InvalidArgument, "flatten_dims"),
        "{e}"
    );
    assert!(e.message().contains("not contiguous"), "{e}");
    assert!(here(&e), "{e:?}");
    let e = run(&|| {
        let _ = x.view().permute(&[1, 0]).flatten_dims(0, 1);
    });
    assert!(e.message().contains("not contiguous"), "{e}");
    let e = run(&|| {
        let _ = x.view().flatten_dims(1, 2);
    });
    assert!(e.message().contains("start_dim <= end_dim < 2"), "{e}");
    // On chip the partition dimension is neither split nor merged.
    let e = run(&|| {
        let t = nl::ndarray(&[4, 24], DType::F32, nl::sbuf.name("acts"));
        let _ = t.reshape_dim(0, &[2, 2]);
    });
    assert_eq!(
        (e.kind(), e.op()),
        (ErrorKind::InvalidArgument, "reshape_dim"),
        "{e}"
    );
    assert!(
        e.message().contains("partition") && e.message().contains("acts"),
        "{e}"
    );
    let e = run(&|| {
        let t = nl::ndarray(&[4, 1, 24], DType::F32, nl::sbuf.name("acts"));
        let _ = t.flatten_dims(0, 1);
    });
    assert!(
        e.message().contains("partition") && e.message().contains("acts"),
        "{e}"
    );
    assert!(here(&e), "{e:?}");
    // The trivial split of the partition dimension is allowed, as in 0.7.
    Launch::new(1)
        .run(|| {
            let t = nl::ndarray(&[4, 24], DType::F32, nl::sbuf);
            assert_eq!(t.reshape_dim(0, &[4]).shape(), &[4, 24]);
        })
        .unwrap();
}

/// `vector_select(0, idx)` gathers rows `idx[p]` of a view (here of a whole tensor and of a
/// `[2..10, 1..5]` slice, where row `i` is tensor row `2 + i`) and scatters into a writable
/// view; in estimate mode it records the same instructions without values.
#[test]
fn vector_select_gathers_and_scatters_rows_of_a_view() {
    let data = Hbm::from_vec(&[10, 6], seq(60)).unwrap();
    let ids = Hbm::<i32>::from_vec(&[5, 1], vec![3, 0, 7, 3, 5]).unwrap();
    let ids3 = Hbm::<i32>::from_vec(&[3, 1], vec![4, 1, 8]).unwrap();
    let (sd, si, si3) = (
        Hbm::<f32>::shape_only([10, 6]),
        Hbm::<i32>::shape_only([5, 1]),
        Hbm::<i32>::shape_only([3, 1]),
    );
    let mut records = Vec::new();
    for mode in [Mode::Execute, Mode::Simulate, Mode::Estimate] {
        let (d, i, i3) = match mode {
            Mode::Estimate => (&sd, &si, &si3),
            _ => (&data, &ids, &ids3),
        };
        let mut whole = Hbm::<f32>::zeros([5, 6]);
        let mut part = Hbm::<f32>::zeros([5, 4]);
        let mut scattered = Hbm::<f32>::zeros([10, 6]);
        let (w, p, s) = (whole.as_output(), part.as_output(), scattered.as_output());
        let report = Launch::new(1)
            .mode(mode)
            .run(|| {
                let idx = nl::ndarray(&[5, 1], DType::I32, nl::sbuf);
                nisa::dma_copy(&idx, i, None);
                let g = d.view().vector_select(0, &idx);
                assert_eq!(g.shape(), &[5, 6]);
                let t = nl::ndarray(&[5, 6], DType::F32, nl::sbuf);
                nisa::dma_copy(&t, g, None);
                nisa::dma_copy(w.view(), &t, None);
                let u = nl::ndarray(&[5, 4], DType::F32, nl::sbuf);
                let sliced = d.view().slice((2..10, 1..5)).vector_select(0, &idx);
                nisa::dma_copy(&u, sliced, None);
                nisa::dma_copy(p.view(), &u, None);
                let idx3 = nl::ndarray(&[3, 1], DType::I32, nl::sbuf);
                nisa::dma_copy(&idx3, i3, None);
                nisa::dma_copy(s.view().vector_select(0, &idx3), t.slice((0..3, ..)), None);
            })
            .unwrap();
        records.push(report.profile.map(|p| (p.instruction_counts, p.latency_ns)));
        if mode == Mode::Estimate {
            continue;
        }
        let rows = |r: &[usize], lo: usize, hi: usize, base: usize| -> Vec<f32> {
            r.iter()
                .flat_map(|&k| (lo..hi).map(move |c| ((base + k) * 6 + c) as f32))
                .collect()
        };
        assert_eq!(
            whole.to_vec().unwrap(),
            rows(&[3, 0, 7, 3, 5], 0, 6, 0),
            "{mode:?}"
        );
        assert_eq!(
            part.to_vec().unwrap(),
            rows(&[3, 0, 7, 3, 5], 1, 5, 2),
            "{mode:?}"
        );
        let mut want = vec![0.0; 60];
        for (q, &k) in [4usize, 1, 8].iter().enumerate() {
            let src = [3usize, 0, 7][q];
            for c in 0..6 {
                want[k * 6 + c] = (src * 6 + c) as f32;
            }
        }
        assert_eq!(scattered.to_vec().unwrap(), want, "{mode:?}");
    }
    assert!(records[1].is_some());
    assert_eq!(
        records[1], records[2],
        "estimate records the same instructions and time"
    );
}

#[test]
fn vector_select_rules_are_clear_errors() {
    let data = Hbm::from_vec(&[10, 6], seq(60)).unwrap();
    let ids = Hbm::<i32>::from_vec(&[5, 1], vec![3, 0, 8, 3, 5]).unwrap();
    let here = |e: &NkiError| e.location().is_some_and(|l| l.file.ends_with("views07.rs"));
    // Index 8 is a row of the tensor but not of the [8, 4] slice: out of bounds under
    // oob_mode=error, naming the op, the index tile, the view and the line.
    let e = Launch::new(1)
        .run(|| {
            let idx = nl::ndarray(&[5, 1], DType::I32, nl::sbuf.name("ids"));
            nisa::dma_copy(&idx, &ids, None);
            let t = nl::ndarray(&[5, 4], DType::F32, nl::sbuf.name("rows"));
            nisa::dma_copy(
                &t,
                data.view().slice((2..10, 1..5)).vector_select(0, &idx),
                None,
            );
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfBounds, "{e}");
    let m = e.message();
    assert!(e.op().contains("dma_copy"), "{e}");
    assert!(
        m.contains("index 8 at partition 2") && m.contains("ids"),
        "{e}"
    );
    assert!(m.contains("rows 0..8") && m.contains("[10, 6]"), "{e}");
    assert!(here(&e), "{e:?}");
    // ... and skipped under oob_mode=skip: the row keeps what it held.
    let mut out = Hbm::<f32>::zeros([5, 4]);
    let o = out.as_output();
    Launch::new(1)
        .run(|| {
            let idx = nl::ndarray(&[5, 1], DType::I32, nl::sbuf);
            nisa::dma_copy(&idx, &ids, None);
            let t = nl::ndarray(&[5, 4], DType::F32, nl::sbuf);
            nisa::memset(&t, -1.0, None);
            let skip = nisa::DmaOpts::new().oob_mode(nisa::OobMode::Skip);
            nisa::dma_copy(
                &t,
                data.view().slice((2..10, 1..5)).vector_select(0, &idx),
                skip,
            );
            nisa::dma_copy(o.view(), &t, None);
        })
        .unwrap();
    let got = out.to_vec().unwrap();
    assert_eq!(&got[8..12], &[-1.0; 4], "row 2 skipped");
    assert_eq!(&got[..4], &[31.0, 32.0, 33.0, 34.0]);
    let run = |f: &(dyn Fn() + Sync)| Launch::new(1).run(f).unwrap_err();
    // Only dimension 0; not a broadcast dimension; HBM only; an int32/uint32 [P, 1] index.
    let e = run(&|| {
        let idx = nl::ndarray(&[6, 1], DType::I32, nl::sbuf);
        let _ = data.view().vector_select(1, &idx);
    });
    assert_eq!(
        (e.kind(), e.op()),
        (ErrorKind::InvalidArgument, "vector_select"),
        "{e}"
    );
    assert!(
        e.message().contains("dimension 0") && e.message().contains("[10, 6]"),
        "{e}"
    );
    assert!(here(&e), "{e:?}");
    let e = run(&|| {
        let idx = nl::ndarray(&[4, 1], DType::I32, nl::sbuf);
        let _ = data
            .view()
            .slice((0..1, ..))
            .broadcast(0, 4)
            .vector_select(0, &idx);
    });
    assert!(e.message().contains("broadcast"), "{e}");
    let e = run(&|| {
        let idx = nl::ndarray(&[4, 1], DType::I32, nl::sbuf);
        let t = nl::ndarray(&[4, 6], DType::F32, nl::sbuf.name("onchip"));
        let _ = t.vector_select(0, &idx);
    });
    assert_eq!(e.kind(), ErrorKind::WrongMemory, "{e}");
    assert!(e.message().contains("onchip"), "{e}");
    let e = run(&|| {
        let idx = nl::ndarray(&[4, 2], DType::F32, nl::sbuf.name("fidx"));
        let _ = data.view().vector_select(0, &idx);
    });
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(
        e.message().contains("fidx") && e.message().contains("int32"),
        "{e}"
    );
    // A view of a kernel input is not a scatter destination.
    let e = run(&|| {
        let idx = nl::ndarray(&[5, 1], DType::I32, nl::sbuf);
        nisa::dma_copy(&idx, &ids, None);
        let t = nl::ndarray(&[5, 6], DType::F32, nl::sbuf);
        nisa::memset(&t, 0.0, None);
        nisa::dma_copy(data.view().vector_select(0, &idx), &t, None);
    });
    assert!(e.message().contains("kernel input"), "{e}");
}

/// NKI 0.7's `nl.is_hbm` / `is_on_chip` / `is_psum` / `is_sbuf` on buffers (`t.buffer()`,
/// the `nl` buffer constants) and on the Beta-1 address spaces.
#[test]
fn buffer_predicates() {
    assert!(nl::is_psum(nl::psum) && !nl::is_sbuf(nl::psum) && nl::is_on_chip(nl::psum));
    assert!(nl::is_sbuf(nl::sbuf) && nl::is_on_chip(nl::sbuf) && !nl::is_hbm(nl::sbuf));
    for b in [nl::private_hbm, nl::shared_hbm, nl::hbm] {
        assert!(nl::is_hbm(b) && !nl::is_on_chip(b) && !nl::is_psum(b) && !nl::is_sbuf(b));
    }
    assert!(nl::is_hbm(MemKind::Hbm) && nl::is_psum(MemKind::Psum));
    Launch::new(1)
        .run(|| {
            let a = nl::ndarray(&[4, 4], DType::F32, nl::psum);
            let h = nl::ndarray(&[4, 4], DType::F32, nl::private_hbm);
            assert!(nl::is_psum(a.buffer()) && nl::is_hbm(h.buffer()));
            assert!(nl::is_on_chip(a.view().mem()) && !nl::is_on_chip(h.view().mem()));
        })
        .unwrap();
}
