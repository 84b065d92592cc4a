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
