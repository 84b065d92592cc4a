//! Where nki-rs followed its own reading of NKI and the documentation says otherwise: each
//! test is built from the documented example it cites, and fails on the earlier reading.

use nki_core::prelude::*;
use std::sync::Mutex;

mod common;
use common::{assert_f32_close, fails_with, hbm, Rng};

/// The NkiTensor indexing docstring and the language guide ("Tensor Values"): integers keep
/// an on-chip view at least 2-D: `t[0, 0, 10]` of a 3-D SBUF tensor is `[1, 1]`,
/// `t[:, 0, 10]` is `[P, 1]`; an HBM view drops integer-indexed dimensions (`x[:, 1, 0:2]`
/// of `[2, 128, 1024]` is `[2, 2]`).
#[test]
fn integer_indexing_keeps_on_chip_views_two_dimensional() {
    let shapes = Mutex::new(Vec::new());
    let x = Hbm::<f32>::zeros([2, 128, 1024]);
    Launch::new(1)
        .run(|| {
            let t = nl::ndarray(&[128, 3, 16], DType::F32, nl::sbuf);
            let b1 = nl::ndarray(&[128, 3, 16], DType::F32, nl::SBUF);
            let mut s = shapes.lock().unwrap();
            s.push(t.slice((0, 0, 10)).shape().to_vec());
            s.push(t.slice((.., 0, 10)).shape().to_vec());
            s.push(t.slice((.., 1)).shape().to_vec());
            s.push(b1.slice((.., 0, 10)).shape().to_vec());
            s.push(x.slice((.., 1, 0..2)).shape().to_vec());
        })
        .unwrap();
    assert_eq!(
        shapes.into_inner().unwrap(),
        vec![
            vec![1, 1],
            vec![128, 1],
            vec![128, 16],
            vec![128, 1],
            vec![2, 2]
        ]
    );
}

/// `nl.store` takes any HBM tensor (the `nki.language.store` page): here the output the
/// kernel allocated in shared HBM and returns, the 0.7 way of writing a kernel's output.
#[nki_kernel(nki = "0.7")]
fn copy_rows_07(a: &Hbm<f32>) -> Hbm<f32> {
    let out = nl::ndarray(a.shape(), DType::F32, nl::shared_hbm);
    let top = nl::load(a.slice((0..64, ..)));
    let bottom = nl::load(a.slice((64..128, ..)));
    nl::store(out.slice((0..64, ..)), &top);
    nl::store(out.slice((64..128, ..)), &bottom);
    out
}

#[test]
fn store_into_an_hbm_tensor_the_kernel_allocated() {
    let vals: Vec<f32> = (0..128 * 8).map(|v| v as f32).collect();
    let a = hbm(&[128, 8], vals.clone());
    let (out, _) = copy_rows_07::launch(1, &a).unwrap();
    assert_eq!(out.to_f32_vec().unwrap(), vals);
    // Storing into an on-chip tensor is an error naming the memory.
    fails_with(ErrorKind::WrongMemory, || {
        let t = nl::ndarray(&[4, 8], DType::F32, nl::sbuf);
        let s = nl::ndarray(&[4, 8], DType::F32, nl::sbuf);
        nisa::memset(&s, 1.0, None);
        nl::store(&t, &s);
    });
}

/// The programming guide's 2-D pooling (AveragePool2D tutorial): a `[C, H, W]` tile seen as
/// the 5-D pattern `[C, H/k, k, W/k, k]` and summed over axes `[2, 4]` (the pooling window).
#[test]
fn pooling_reduces_non_trailing_free_axes() {
    let (c, h, w, k) = (16, 8, 12, 2);
    let mut rng = Rng(7);
    let xs = rng.vec(c * h * w, -4.0, 4.0);
    let a = hbm(&[c, h, w], xs.clone());
    let (ho, wo) = (h / k, w / k);
    let got = Mutex::new((Vec::new(), Vec::new(), Vec::new()));
    Launch::new(1)
        .run(|| {
            let t = nl::load(&a);
            let win = t.reshape(&[c, ho, k, wo, k]);
            let sum = nl::sum(win, &[2, 4], false);
            let max = nl::max(win, &[4, 2], true);
            let mut g = got.lock().unwrap();
            g.0 = sum.shape().to_vec();
            g.1 = sum.values();
            g.2 = max.values();
            assert_eq!(max.shape(), &[c, ho, 1, wo, 1]);
        })
        .unwrap();
    let (shape, sums, maxes) = got.into_inner().unwrap();
    assert_eq!(shape, vec![c, ho, wo]);
    let (mut want_sum, mut want_max) = (Vec::new(), Vec::new());
    for p in 0..c {
        for i in 0..ho {
            for j in 0..wo {
                let win: Vec<f32> = (0..k)
                    .flat_map(|di| (0..k).map(move |dj| (di, dj)))
                    .map(|(di, dj)| xs[(p * h + i * k + di) * w + j * k + dj])
                    .collect();
                want_sum.push(win.iter().map(|&v| v as f64).sum::<f64>() as f32);
                want_max.push(win.iter().copied().fold(f32::MIN, f32::max));
            }
        }
    }
    assert_f32_close(&sums, &want_sum, "2-D pooling sum over axes [2, 4]");
    assert_eq!(maxes, want_max);
}

/// `nl.softmax(x, axis=[...])`: the normalisation runs over every listed free axis
/// together, wherever they are in the view.
#[test]
fn softmax_over_a_list_of_axes() {
    let (p, a1, a2) = (8, 3, 5);
    let mut rng = Rng(11);
    let xs = rng.vec(p * a1 * a2, -3.0, 3.0);
    let x = hbm(&[p, a1, a2], xs.clone());
    let got = Mutex::new((Vec::new(), Vec::new()));
    Launch::new(1)
        .run(|| {
            let t = nl::load(&x);
            let both = nl::softmax(&t, [1, 2]);
            let middle = nl::softmax(&t, [1]);
            *got.lock().unwrap() = (both.values(), middle.values());
        })
        .unwrap();
    let (both, middle) = got.into_inner().unwrap();
    let soft = |idx: &[usize]| -> Vec<f64> {
        let m = idx.iter().map(|&i| xs[i] as f64).fold(f64::MIN, f64::max);
        let e: Vec<f64> = idx.iter().map(|&i| (xs[i] as f64 - m).exp()).collect();
        let s: f64 = e.iter().sum();
        e.into_iter().map(|v| v / s).collect()
    };
    let mut want_both = vec![0.0f32; xs.len()];
    let mut want_middle = vec![0.0f32; xs.len()];
    for q in 0..p {
        let all: Vec<usize> = (0..a1 * a2).map(|j| q * a1 * a2 + j).collect();
        for (i, v) in all.iter().zip(soft(&all)) {
            want_both[*i] = v as f32;
        }
        for j in 0..a2 {
            let col: Vec<usize> = (0..a1).map(|i| (q * a1 + i) * a2 + j).collect();
            for (i, v) in col.iter().zip(soft(&col)) {
                want_middle[*i] = v as f32;
            }
        }
    }
    assert_f32_close(&both, &want_both, "softmax over [1, 2]");
    assert_f32_close(&middle, &want_middle, "softmax over [1] of a 3-D tile");
}

/// `nl.device_print` records no instruction: a kernel with prints has the same profile as
/// one without, and estimate mode (no values) runs it too.
#[test]
fn device_print_costs_nothing_on_the_device() {
    let a = hbm(&[4, 8], (0..32).map(|v| v as f32).collect());
    let body = |print: bool| {
        let a = &a;
        move || {
            let t = nl::load(a);
            if print {
                nl::device_print("t =", &t);
            }
            let _ = nl::exp(&t);
        }
    };
    let run = |print: bool, mode: Mode| {
        Launch::new(1)
            .mode(mode)
            .target(Target::Trn2)
            .run(body(print))
            .unwrap()
            .profile
            .expect("modelled")
    };
    let (with, without) = (run(true, Mode::Simulate), run(false, Mode::Simulate));
    assert_eq!(with.instruction_counts, without.instruction_counts);
    assert_eq!(with.latency_ns, without.latency_ns);
    let est = run(true, Mode::Estimate);
    assert_eq!(est.instruction_counts, without.instruction_counts);
}

/// One partition stored per step of a `static_range` loop: a DMA reads any SBUF partition,
/// so the start-partition rule (compute engines only, docs/checks.md) does not apply to
/// `nl.store`; a compute instruction on the same one-partition view still obeys it.
#[test]
fn storing_one_partition_per_step_is_a_dma_without_the_start_partition_rule() {
    let vals: Vec<f32> = (0..8 * 5).map(|v| v as f32).collect();
    let a = hbm(&[8, 5], vals.clone());
    let out = Hbm::<f32>::zeros([8, 5]);
    let got = common::run_into(out, |o| {
        let t = nl::load(&a);
        for i in nl::static_range(8) {
            nl::store(o.slice((i..i + 1, ..)), t.slice((i..i + 1, ..)));
        }
    })
    .unwrap();
    assert_eq!(got, vals);
    fails_with(ErrorKind::PartitionOffset, || {
        let t = nl::load(&a);
        let _ = nl::exp(t.slice((3..4, ..)));
    });
}
