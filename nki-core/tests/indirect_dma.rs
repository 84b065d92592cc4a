//! Indirect DMA (NKI 0.7 `.ap(pattern, offset, vector_offset=idx, indirect_dim=0)`): gathers
//! and scatters of HBM rows chosen by an SBUF index tile through `nisa::dma_copy`, the
//! read-modify-write forms of `nisa::dma_compute`, `oob_mode` error / skip, distinct scatter
//! rows (`unique_indices`), the software-DGE rule, and what the records say in every mode.
//! References are plain loops over the same indices (the records: `isa/dma_indirect.rs`).

use nki_core::prelude::*;

/// This file's name as error locations show it.
const FILE: &str = file!();

fn seq(n: usize) -> Vec<f32> {
    (0..n).map(|x| x as f32).collect()
}

/// `data[rows, cols]` laid out row-major, read at `(row, col)` for every index and column
/// of a pattern starting at `col0` with `ncols` columns (the reference of a gather).
fn gather_ref(data: &[f32], cols: usize, ids: &[i32], col0: usize, ncols: usize) -> Vec<f32> {
    let mut out = Vec::new();
    for &i in ids {
        for c in 0..ncols {
            out.push(data[i as usize * cols + col0 + c]);
        }
    }
    out
}

/// Gathers rows `ids` of `data` (`[10, 6]` f32), columns `col0..col0 + ncols`, into an SBUF
/// tile and stores it to `out` (`[P, ncols]`), in `mode`.
fn gather(
    data: &Hbm<f32>,
    ids: &Hbm<i32>,
    out: &mut Hbm<f32>,
    col0: usize,
    oob: nisa::OobMode,
    mode: Mode,
) -> Result<LaunchReport, NkiError> {
    let p = ids.shape()[0];
    let ncols = out.shape()[1];
    let o = out.as_output();
    Launch::new(1).mode(mode).run(|| {
        let idx = nl::ndarray(&[p, 1], DType::I32, nl::sbuf.name("idx"));
        nisa::dma_copy(&idx, ids, None);
        let t = nl::ndarray(&[p, ncols], DType::F32, nl::sbuf);
        nisa::memset(&t, -1.0, None);
        let src = data.view().ap_indirect(&[[6, p], [1, ncols]], col0, &idx);
        nisa::dma_copy(&t, src, nisa::DmaOpts::new().oob_mode(oob));
        nisa::dma_copy(o.view(), &t, None);
    })
}

#[test]
fn a_gather_reads_the_rows_the_index_tile_names() {
    let data = Hbm::from_vec(&[10, 6], seq(60)).unwrap();
    let ids = [3, 0, 9, 3, 7];
    let idx = Hbm::from_vec(&[5, 1], ids.to_vec()).unwrap();
    // Whole rows, then columns 2..5 (the pattern's offset), in execute and simulate modes.
    for (col0, ncols) in [(0, 6), (2, 3)] {
        for mode in [Mode::Execute, Mode::Simulate] {
            let mut out = Hbm::<f32>::zeros([5, ncols]);
            gather(&data, &idx, &mut out, col0, nisa::OobMode::Error, mode).unwrap();
            assert_eq!(
                out.to_f32_vec().unwrap(),
                gather_ref(&seq(60), 6, &ids, col0, ncols),
                "columns {col0}.. in {mode:?}"
            );
        }
    }
}

#[test]
fn an_out_of_range_index_under_oob_error_names_op_tensor_shape_and_line() {
    let data = Hbm::from_vec(&[10, 6], seq(60)).unwrap();
    let idx = Hbm::from_vec(&[4, 1], vec![3, 10, 1, -2]).unwrap();
    let line = std::sync::atomic::AtomicU32::new(0);
    let e = Launch::new([2])
        .run(|| {
            let ix = nl::ndarray(&[4, 1], DType::I32, nl::sbuf.name("rows_idx"));
            nisa::dma_copy(&ix, &idx, None);
            let t = nl::ndarray(&[4, 6], DType::F32, nl::sbuf);
            let src = data.view().ap_indirect(&[[6, 4], [1, 6]], 0, &ix);
            line.store(line!() + 1, std::sync::atomic::Ordering::Relaxed);
            nisa::dma_copy(&t, src, None);
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfBounds, "{e}");
    let m = e.message();
    for part in [
        "dma_copy",
        "index 10 at partition 1",
        "rows_idx",
        "[10, 6]",
        "oob_mode=error",
    ] {
        assert!(m.contains(part), "missing {part:?}: {e}");
    }
    assert_eq!(e.program_id(), Some(&[0][..]));
    let loc = e.location().unwrap();
    let want = line.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!((loc.file, loc.line), (FILE, want), "{e}");
}

#[test]
fn oob_skip_leaves_the_rows_of_bad_indices_as_they_were() {
    let data = Hbm::from_vec(&[10, 6], seq(60)).unwrap();
    let ids = [3, 10, 1, -2];
    let idx = Hbm::from_vec(&[4, 1], ids.to_vec()).unwrap();
    let mut out = Hbm::<f32>::zeros([4, 6]);
    gather(
        &data,
        &idx,
        &mut out,
        0,
        nisa::OobMode::Skip,
        Mode::Simulate,
    )
    .unwrap();
    let mut want = Vec::new();
    for i in ids {
        if (0..10).contains(&i) {
            want.extend((0..6).map(|c| (i * 6 + c) as f32));
        } else {
            want.extend([-1.0; 6]); // the memset value: the row was not transferred
        }
    }
    assert_eq!(out.to_f32_vec().unwrap(), want);
}

/// Scatters the rows of `src` (`[P, 4]`) into rows `ids` of `out` (`[8, 4]`) with `dma_copy`.
fn scatter(
    src: &Hbm<f32>,
    ids: &Hbm<u32>,
    out: &mut Hbm<f32>,
    oob: nisa::OobMode,
    mode: Mode,
) -> Result<LaunchReport, NkiError> {
    let p = ids.shape()[0];
    let o = out.as_output();
    Launch::new(1).mode(mode).run(|| {
        let idx = nl::ndarray(&[p, 1], DType::U32, nl::sbuf);
        nisa::dma_copy(&idx, ids, None);
        let t = nl::ndarray(&[p, 4], DType::F32, nl::sbuf);
        nisa::dma_copy(&t, src, None);
        let dst = o.view().ap_indirect(&[[4, p], [1, 4]], 0, &idx);
        nisa::dma_copy(dst, &t, nisa::DmaOpts::new().oob_mode(oob));
    })
}

#[test]
fn a_scatter_writes_the_rows_the_index_tile_names() {
    let src = Hbm::from_vec(&[3, 4], seq(12).iter().map(|x| 100.0 + x).collect()).unwrap();
    let ids = [5u32, 0, 2];
    let idx = Hbm::from_vec(&[3, 1], ids.to_vec()).unwrap();
    for mode in [Mode::Execute, Mode::Simulate] {
        let mut out = Hbm::<f32>::from_vec(&[8, 4], vec![-1.0; 32]).unwrap();
        scatter(&src, &idx, &mut out, nisa::OobMode::Error, mode).unwrap();
        let mut want = vec![-1.0; 32];
        for (k, &i) in ids.iter().enumerate() {
            for c in 0..4 {
                want[i as usize * 4 + c] = 100.0 + (k * 4 + c) as f32;
            }
        }
        assert_eq!(out.to_f32_vec().unwrap(), want, "{mode:?}");
    }
    // Estimate mode: the whole output counts as written (no OutputNotWritten, no race).
    let mut so = Hbm::<f32>::shape_only([8, 4]);
    let (ss, si) = (
        Hbm::<f32>::shape_only([3, 4]),
        Hbm::<u32>::shape_only([3, 1]),
    );
    scatter(&ss, &si, &mut so, nisa::OobMode::Error, Mode::Estimate).unwrap();
}

#[test]
fn scatter_rows_must_be_distinct_and_oob_skip_drops_bad_ones() {
    let src = Hbm::from_vec(&[3, 4], seq(12)).unwrap();
    let dup = Hbm::from_vec(&[3, 1], vec![1u32, 4, 1]).unwrap();
    let mut out = Hbm::<f32>::zeros([8, 4]);
    let e = scatter(&src, &dup, &mut out, nisa::OobMode::Error, Mode::Execute).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(
        e.message().contains("partitions 0 and 2") && e.message().contains("row 1"),
        "{e}"
    );

    let bad = Hbm::from_vec(&[3, 1], vec![7u32, 8, 0]).unwrap();
    let mut out = Hbm::<f32>::from_vec(&[8, 4], vec![-1.0; 32]).unwrap();
    let e = scatter(&src, &bad, &mut out, nisa::OobMode::Error, Mode::Execute).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfBounds, "{e}");
    scatter(&src, &bad, &mut out, nisa::OobMode::Skip, Mode::Execute).unwrap();
    let got = out.to_f32_vec().unwrap();
    assert_eq!(
        &got[28..32],
        &[0.0, 1.0, 2.0, 3.0],
        "row 7 from partition 0"
    );
    assert_eq!(
        &got[0..4],
        &[8.0, 9.0, 10.0, 11.0],
        "row 0 from partition 2"
    );
    assert!(
        got[4..28].iter().all(|&x| x == -1.0),
        "nothing else written"
    );
}

#[test]
fn dma_compute_scatter_adds_into_hbm_and_gather_adds_into_sbuf() {
    let ids = [6u32, 1, 3];
    let idx = Hbm::from_vec(&[3, 1], ids.to_vec()).unwrap();
    let table = Hbm::from_vec(&[8, 4], seq(32)).unwrap();
    let mut acc = Hbm::<f32>::from_vec(&[8, 4], vec![0.5; 32]).unwrap();
    let mut gathered = Hbm::<f32>::zeros([3, 4]);
    let (a, g) = (acc.as_output(), gathered.as_output());
    Launch::new(1)
        .mode(Mode::Simulate)
        .run(|| {
            let ix = nl::ndarray(&[3, 1], DType::U32, nl::sbuf);
            nisa::dma_copy(&ix, &idx, None);
            let ones = nl::ndarray(&[3, 4], DType::BF16, nl::sbuf);
            nisa::memset(&ones, 1.0, None);
            // Scatter-add: acc[ids] += ones.
            let rows = a.view().ap_indirect(&[[4, 3], [1, 4]], 0, &ix);
            let srcs = [
                nisa::DmaEndpoint::of(rows.clone()),
                nisa::DmaEndpoint::of(&ones),
            ];
            nisa::dma_compute(rows, &srcs, nl::AluOp::Add, None);
            // Gather-add: t = t + table[ids].
            let t = nl::ndarray(&[3, 4], DType::F32, nl::sbuf);
            nisa::memset(&t, 10.0, None);
            let from = table.view().ap_indirect(&[[4, 3], [1, 4]], 0, &ix);
            let srcs = [nisa::DmaEndpoint::of(&t), nisa::DmaEndpoint::of(from)];
            nisa::dma_compute(&t, &srcs, nl::AluOp::Add, None);
            nisa::dma_copy(g.view(), &t, None);
        })
        .unwrap();
    let mut want = vec![0.5; 32];
    for &i in &ids {
        for c in 0..4 {
            want[i as usize * 4 + c] += 1.0;
        }
    }
    assert_eq!(acc.to_f32_vec().unwrap(), want);
    let want: Vec<f32> = gather_ref(&seq(32), 4, &[6, 1, 3], 0, 4)
        .iter()
        .map(|x| x + 10.0)
        .collect();
    assert_eq!(gathered.to_f32_vec().unwrap(), want);
}

#[test]
fn indirect_rules_are_clear_errors() {
    let data = Hbm::from_vec(&[10, 6], seq(60)).unwrap();
    let idx = Hbm::from_vec(&[4, 1], vec![0, 1, 2, 3]).unwrap();
    let run = |f: &(dyn Fn(&Tensor, &Tensor) + Sync)| {
        Launch::new(1)
            .run(|| {
                let ix = nl::ndarray(&[4, 1], DType::I32, nl::sbuf.name("ix"));
                nisa::dma_copy(&ix, &idx, None);
                let t = nl::ndarray(&[4, 6], DType::F32, nl::sbuf.name("t"));
                f(&ix, &t);
            })
            .unwrap_err()
    };
    // Hardware DGE cannot gather.
    let e = run(&|ix, t| {
        let src = data.view().ap_indirect(&[[6, 4], [1, 6]], 0, ix);
        nisa::dma_copy(t, src, nisa::DmaOpts::new().dge_mode(nisa::DgeMode::Hwdge));
    });
    assert!(e.message().contains("software DGE"), "{e}");
    // The index tile is [P, 1] int32/uint32 in SBUF, P the pattern's first count.
    let e = run(&|ix, _| {
        let _ = data.view().ap_indirect(&[[6, 2], [1, 6]], 0, ix);
    });
    assert!(
        e.message().contains("[2, 1]") && e.message().contains("ix"),
        "{e}"
    );
    // A pattern reaching outside the tensor for row 0.
    let e = run(&|ix, _| {
        let _ = data.view().ap_indirect(&[[6, 4], [1, 6]], 56, ix);
    });
    assert_eq!(e.kind(), ErrorKind::OutOfBounds, "{e}");
    // A kernel input is not a scatter destination.
    let e = run(&|ix, t| {
        nisa::memset(t, 0.0, None);
        nisa::dma_copy(data.view().ap_indirect(&[[6, 4], [1, 6]], 0, ix), t, None);
    });
    assert!(e.message().contains("kernel input"), "{e}");
    // Non-unique indices are not supported with a vector_offset (0.7).
    let e = run(&|ix, t| {
        nisa::memset(t, 0.0, None);
        let src = data.view().ap_indirect(&[[6, 4], [1, 6]], 0, ix);
        let srcs = [nisa::DmaEndpoint::of(t), nisa::DmaEndpoint::of(src)];
        nisa::dma_compute(
            t,
            &srcs,
            nl::AluOp::Add,
            nisa::DmaOpts::new().unique_indices(false),
        );
    });
    assert!(e.message().contains("unique_indices"), "{e}");
    // On-chip tensors take no vector_offset.
    let e = run(&|ix, t| {
        let _ = t.view().ap_indirect(&[[6, 4], [1, 6]], 0, ix);
    });
    assert_eq!(e.kind(), ErrorKind::WrongMemory, "{e}");
}

/// A bf16 HBM tensor of `shape` holding `(i * 7) % 251` at flat index `i` (exact in bf16).
fn bf16_table(shape: &[usize]) -> Hbm<half::bf16> {
    let n: usize = shape.iter().product();
    let vals = (0..n).map(|i| half::bf16::from_f32(((i * 7) % 251) as f32));
    Hbm::from_vec(shape, vals.collect()).unwrap()
}

/// `dma_transpose` of an indirect source (0.7's gather-transpose): rows `idx.T.flatten()` of
/// the tensor gathered, then transposed into SBUF. 2-D with a `[32, 1]` index (and the same
/// index covering a 16-row pattern), 2-D with a
/// `[128, 2]` index (row `k` takes `idx[k % 128, k / 128]`), and 4-D with axes (3, 1, 2, 0).
#[test]
fn dma_transpose_gathers_rows_then_transposes() {
    let table = bf16_table(&[300, 16]);
    let vals = table.to_f32_vec().unwrap();
    let ids1: Vec<u32> = (0..32).map(|k| (k * 37 + 5) % 300).collect();
    let ids2: Vec<u32> = (0..256).map(|k| (k * 11 + 3) % 300).collect();
    let t4 = bf16_table(&[40, 1, 2, 4]);
    let v4 = t4.to_f32_vec().unwrap();
    let ids4: Vec<u32> = (0..16).map(|k| (k * 3 + 1) % 40).collect();
    let (i1, i4) = (
        Hbm::from_vec(&[32, 1], ids1.clone()).unwrap(),
        Hbm::from_vec(&[16, 1], ids4.clone()).unwrap(),
    );
    // The [128, 2] tile holds idx[r, c] = ids2[c * 128 + r], so that idx.T.flatten() = ids2.
    let cols: Vec<u32> = (0..256).map(|f| ids2[(f % 2) * 128 + f / 2]).collect();
    let i2 = Hbm::from_vec(&[128, 2], cols).unwrap();
    for mode in [Mode::Execute, Mode::Simulate] {
        let mut o1 = Hbm::<half::bf16>::zeros([16, 32]);
        let mut o16 = Hbm::<half::bf16>::zeros([16, 16]);
        let mut o2 = Hbm::<half::bf16>::zeros([16, 256]);
        let mut o4 = Hbm::<half::bf16>::zeros([4, 1, 2, 16]);
        let (w1, w2, w4) = (o1.as_output(), o2.as_output(), o4.as_output());
        let w16 = o16.as_output();
        Launch::new(1)
            .mode(mode)
            .run(|| {
                let ix = nl::ndarray(&[32, 1], DType::U32, nl::sbuf);
                nisa::dma_copy(&ix, &i1, None);
                let d = nl::ndarray(&[16, 32], DType::BF16, nl::sbuf);
                let src = table.view().ap_indirect(&[[16, 32], [1, 16]], 0, &ix);
                nisa::dma_transpose(&d, src, &[1, 0], None);
                nisa::dma_copy(w1.view(), &d, None);
                // The same 32-row index covering a 16-row pattern: its first 16 rows.
                let d = nl::ndarray(&[16, 16], DType::BF16, nl::sbuf);
                let src = table.view().ap_indirect(&[[16, 16], [1, 16]], 0, &ix);
                nisa::dma_transpose(&d, src, &[1, 0], None);
                nisa::dma_copy(w16.view(), &d, None);

                let ix = nl::ndarray(&[128, 2], DType::U32, nl::sbuf);
                nisa::dma_copy(&ix, &i2, None);
                let d = nl::ndarray(&[16, 256], DType::BF16, nl::sbuf);
                let src = table.view().ap_indirect(&[[16, 256], [1, 16]], 0, &ix);
                nisa::dma_transpose(&d, src, &[1, 0], None);
                nisa::dma_copy(w2.view(), &d, None);

                let ix = nl::ndarray(&[16, 1], DType::U32, nl::sbuf);
                nisa::dma_copy(&ix, &i4, None);
                let d = nl::ndarray(&[4, 1, 2, 16], DType::BF16, nl::sbuf);
                let pattern = [[8, 16], [8, 1], [4, 2], [1, 4]];
                let src = t4.view().ap_indirect(&pattern, 0, &ix);
                nisa::dma_transpose(&d, src, &[3, 1, 2, 0], None);
                nisa::dma_copy(w4.view(), &d, None);
            })
            .unwrap();
        let want = |ids: &[u32], f: usize| -> Vec<f32> {
            (0..16)
                .flat_map(|c| (0..f).map(move |k| (c, k)))
                .map(|(c, k)| vals[ids[k] as usize * 16 + c])
                .collect()
        };
        assert_eq!(o1.to_f32_vec().unwrap(), want(&ids1, 32), "{mode:?}");
        assert_eq!(o16.to_f32_vec().unwrap(), want(&ids1, 16), "{mode:?}");
        assert_eq!(o2.to_f32_vec().unwrap(), want(&ids2, 256), "{mode:?}");
        let mut w = Vec::new();
        for c in 0..4 {
            for b in 0..2 {
                for &row in &ids4 {
                    w.push(v4[row as usize * 8 + b * 4 + c]);
                }
            }
        }
        assert_eq!(o4.to_f32_vec().unwrap(), w, "{mode:?}");
    }
}

#[test]
fn dma_transpose_limits_are_clear_errors() {
    let table = bf16_table(&[300, 16]);
    let mut ids: Vec<u32> = (0..32).collect();
    ids[5] = 1000;
    let idx = Hbm::from_vec(&[32, 1], ids).unwrap();
    let run_on = |target: Target, f: &(dyn Fn(&Tensor) + Sync)| {
        Launch::new(1).target(target).run(|| {
            let ix = nl::ndarray(&[32, 1], DType::U32, nl::sbuf.name("ix"));
            nisa::dma_copy(&ix, &idx, None);
            f(&ix);
        })
    };
    let run = |f: &(dyn Fn(&Tensor) + Sync)| run_on(Target::Trn2, f).unwrap_err();
    let here = |e: &NkiError| e.location().is_some_and(|l| l.file == FILE);
    // Index 1000 is outside the 300 rows: an error under oob_mode=error ...
    let e = run(&|ix| {
        let d = nl::ndarray(&[16, 32], DType::BF16, nl::sbuf);
        let src = table.view().ap_indirect(&[[16, 32], [1, 16]], 0, ix);
        nisa::dma_transpose(&d, src, &[1, 0], None);
    });
    assert_eq!(e.kind(), ErrorKind::OutOfBounds, "{e}");
    assert!(
        e.op().contains("dma_transpose") && e.message().contains("index 1000"),
        "{e}"
    );
    assert!(
        e.message().contains("ix") && e.message().contains("[300, 16]"),
        "{e}"
    );
    assert!(here(&e), "{e:?}");
    // ... and a column left as it was under oob_mode=skip.
    let mut out = Hbm::<half::bf16>::zeros([16, 32]);
    let o = out.as_output();
    run_on(Target::Trn2, &|ix| {
        let d = nl::ndarray(&[16, 32], DType::BF16, nl::sbuf);
        nisa::memset(&d, -1.0, None);
        let src = table.view().ap_indirect(&[[16, 32], [1, 16]], 0, ix);
        let skip = nisa::DmaOpts::new().oob_mode(nisa::OobMode::Skip);
        nisa::dma_transpose(&d, src, &[1, 0], skip);
        nisa::dma_copy(o.view(), &d, None);
    })
    .unwrap();
    let got = out.to_f32_vec().unwrap();
    let vals = table.to_f32_vec().unwrap();
    for c in 0..16 {
        for k in 0..32 {
            let want = if k == 5 { -1.0 } else { vals[k * 16 + c] };
            assert_eq!(got[c * 32 + k], want, "({c}, {k})");
        }
    }
    // The limits of 0.7's page, each named.
    let x = bf16_table(&[16, 128]);
    for (what, says) in [
        ("int32 indices", "uint32"),
        ("24 rows", "multiple of 16"),
        ("hwdge gather", "software DGE"),
        ("hwdge direct shape", "src.shape[0] == 16"),
        ("hwdge direct columns", "multiple of 128"),
        ("skip direct", "needs an indirect src"),
        ("swdge direct", "unknown or hwdge"),
        ("dst in HBM", "must be a tile in SBUF"),
    ] {
        let e = run(&|ix| match what {
            "int32 indices" => {
                let j = nl::zeros(&[32, 1], DType::I32, nl::sbuf);
                let d = nl::ndarray(&[16, 32], DType::BF16, nl::sbuf);
                let src = table.view().ap_indirect(&[[16, 32], [1, 16]], 0, &j);
                nisa::dma_transpose(&d, src, &[1, 0], None);
            }
            "24 rows" => {
                let j = nl::zeros(&[24, 1], DType::U32, nl::sbuf);
                let d = nl::ndarray(&[16, 24], DType::BF16, nl::sbuf);
                let src = table.view().ap_indirect(&[[16, 24], [1, 16]], 0, &j);
                nisa::dma_transpose(&d, src, &[1, 0], None);
            }
            "hwdge gather" => {
                let d = nl::ndarray(&[16, 32], DType::BF16, nl::sbuf);
                let src = table.view().ap_indirect(&[[16, 32], [1, 16]], 0, ix);
                let o = nisa::DmaOpts::new().dge_mode(nisa::DgeMode::Hwdge);
                nisa::dma_transpose(&d, src, &[1, 0], o);
            }
            "hwdge direct shape" => {
                let d = nl::ndarray(&[16, 32], DType::BF16, nl::sbuf);
                let o = nisa::DmaOpts::new().dge_mode(nisa::DgeMode::Hwdge);
                nisa::dma_transpose(&d, table.view().slice((0..32, ..)), &[1, 0], o);
            }
            "hwdge direct columns" => {
                let d = nl::ndarray(&[16, 16], DType::BF16, nl::sbuf);
                let o = nisa::DmaOpts::new().dge_mode(nisa::DgeMode::Hwdge);
                nisa::dma_transpose(&d, table.view().slice((0..16, ..)), &[1, 0], o);
            }
            "skip direct" => {
                let d = nl::ndarray(&[128, 16], DType::BF16, nl::sbuf);
                let o = nisa::DmaOpts::new().oob_mode(nisa::OobMode::Skip);
                nisa::dma_transpose(&d, x.view(), &[1, 0], o);
            }
            "swdge direct" => {
                let d = nl::ndarray(&[128, 16], DType::BF16, nl::sbuf);
                let o = nisa::DmaOpts::new().dge_mode(nisa::DgeMode::Swdge);
                nisa::dma_transpose(&d, x.view(), &[1, 0], o);
            }
            _ => {
                let h = nl::ndarray(&[128, 16], DType::BF16, nl::private_hbm.name("hout"));
                nisa::dma_transpose(&h, x.view(), &[1, 0], None);
            }
        });
        assert!(e.message().contains(says), "{what}: {e}");
        assert!(e.op().contains("dma_transpose"), "{what}: {e}");
        assert!(here(&e), "{what}: {e:?}");
    }
    // A hardware-DGE transpose within its limits runs; a gather-transpose needs trn2+.
    run_on(Target::Trn2, &|_| {
        let d = nl::ndarray(&[128, 16], DType::BF16, nl::sbuf);
        let o = nisa::DmaOpts::new().dge_mode(nisa::DgeMode::Hwdge);
        nisa::dma_transpose(&d, x.view(), &[1, 0], o);
    })
    .unwrap();
    let e = Launch::new(1)
        .target(Target::Trn1)
        .run(|| {
            let j = nl::zeros(&[32, 1], DType::U32, nl::sbuf);
            let d = nl::ndarray(&[16, 32], DType::BF16, nl::sbuf);
            let src = table.view().ap_indirect(&[[16, 32], [1, 16]], 0, &j);
            nisa::dma_transpose(&d, src, &[1, 0], None);
        })
        .unwrap_err();
    assert!(e.message().contains("trn2+"), "{e}");
    // dma_copy takes one index per partition, not the gather-transpose's [128, n].
    let e = Launch::new(1)
        .run(|| {
            let j = nl::zeros(&[128, 2], DType::U32, nl::sbuf);
            let d = nl::ndarray(&[128, 32], DType::BF16, nl::sbuf);
            nisa::dma_copy(
                &d,
                table.view().ap_indirect(&[[16, 256], [1, 16]], 0, &j),
                None,
            );
        })
        .unwrap_err();
    assert!(e.message().contains("dma_transpose's gather form"), "{e}");
}

/// `dma_compute`'s 0.7 rules: 1 to 16 sources, addresses known at compile time (no dynamic
/// offset), and none of `dma_copy`'s DGE / oob / engine / priority options.
#[test]
fn dma_compute_rules_are_clear_errors() {
    let x = Hbm::from_vec(&[4, 6], seq(24)).unwrap();
    let here = |e: &NkiError| e.location().is_some_and(|l| l.file == FILE);
    let run = |f: &(dyn Fn(&Tensor) + Sync)| {
        Launch::new(1)
            .run(|| {
                let acc = nl::zeros(&[4, 6], DType::F32, nl::sbuf.name("acc"));
                f(&acc);
            })
            .unwrap_err()
    };
    let e = run(&|acc| {
        let srcs: Vec<_> = (0..17).map(|_| nisa::DmaEndpoint::of(x.view())).collect();
        nisa::dma_compute(acc, &srcs, nl::AluOp::Add, None);
    });
    assert!(e.message().contains("1 to 16 sources, not 17"), "{e}");
    assert!(e.op().contains("dma_compute") && here(&e), "{e:?}");
    let e = run(&|acc| {
        let i = nl::zeros(&[1, 1], DType::I32, nl::sbuf);
        let row = x.view().reshape(&[1, 4, 6]).select(0, &i);
        let srcs = [nisa::DmaEndpoint::of(acc), nisa::DmaEndpoint::of(row)];
        nisa::dma_compute(acc, &srcs, nl::AluOp::Add, None);
    });
    assert!(
        e.message().contains("dynamic offset") && e.message().contains("[4, 6]"),
        "{e}"
    );
    assert!(here(&e), "{e:?}");
    let e = run(&|acc| {
        let srcs = [nisa::DmaEndpoint::of(acc), nisa::DmaEndpoint::of(x.view())];
        let skip = nisa::DmaOpts::new().oob_mode(nisa::OobMode::Skip);
        nisa::dma_compute(acc, &srcs, nl::AluOp::Add, skip);
    });
    assert!(e.message().contains("unique_indices only"), "{e}");
    // Within the rules it adds: acc = 0 + x + x.
    let mut out = Hbm::<f32>::zeros([4, 6]);
    let o = out.as_output();
    Launch::new(1)
        .run(|| {
            let acc = nl::zeros(&[4, 6], DType::F32, nl::sbuf);
            let srcs = [
                nisa::DmaEndpoint::of(&acc),
                nisa::DmaEndpoint::of(x.view()),
                nisa::DmaEndpoint::of(x.view()),
            ];
            nisa::dma_compute(&acc, &srcs, nl::AluOp::Add, None);
            nisa::dma_copy(o.view(), &acc, None);
        })
        .unwrap();
    let want: Vec<f32> = seq(24).iter().map(|v| 2.0 * v).collect();
    assert_eq!(out.to_vec().unwrap(), want);
}
