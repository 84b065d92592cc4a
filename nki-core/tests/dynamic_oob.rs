//! `dma_copy` of a view moved by a dynamic offset (`view.scalar_offset(s, indirect_dim)`,
//! NKI 0.7's `scalar_offset=`) outside its tensor: as in 0.7 the offset is checked when the
//! DMA runs ("oob_mode: how to handle out-of-bounds (oob) array indices during indirect access
//! operations"): `oob_mode=error` fails naming the op, the tensors, the offset and the line;
//! `oob_mode=skip` "silently skips" the transfer: the destination keeps its values and the
//! DMA is still issued and costed (the same instructions and modelled time as an in-range
//! one). Any other use of such a view's values (`nl::load`) is the out-of-bounds error.

use nki_core::nisa::{DmaOpts, NkiScalar, OobMode};
use nki_core::prelude::*;

const FILE: &str = file!();

/// The result of a kernel that loads the scalar `at` from HBM and DMAs row `at` of `x`
/// (`[8, 16]`, by `scalar_offset` on dimension 0) into a tile first set to -1, under
/// `oob_mode`; also the same row written to row `at` of `back` (`[8, 16]`, first zero) as a
/// scatter through a moved destination. Returns the tile's values, `back`'s values and the
/// profile's instruction counts and latency (simulate mode).
fn run(at: i32, oob: OobMode) -> Result<(Vec<f32>, Vec<f32>, String, f64), NkiError> {
    let x = Hbm::<f32>::from_vec(&[8, 16], (0..128).map(|v| v as f32).collect())?;
    let c = Hbm::<i32>::from_vec(&[1, 1], vec![at])?;
    let mut row = Hbm::<f32>::zeros([1, 16]);
    let mut back = Hbm::<f32>::zeros([8, 16]);
    let report = {
        let (r, b) = (row.as_output(), back.as_output());
        Launch::new(1)
            .target(Target::Trn2)
            .mode(Mode::Simulate)
            .run(|| {
                let ct = nl::ndarray(&[1, 1], DType::I32, nl::sbuf);
                nisa::dma_copy(&ct, c.view(), None);
                let s: NkiScalar = nisa::scalar_load(&ct);
                let t = nl::ndarray(&[1, 16], DType::F32, nl::sbuf);
                nisa::memset(&t, -1.0, None);
                let opts = DmaOpts::new().oob_mode(oob);
                nisa::dma_copy(&t, x.slice((0..1, ..)).scalar_offset(s, 0), opts);
                nisa::dma_copy(r.view(), &t, None);
                // The scatter side: row `at` of `back` (its other rows stay written by this one
                // copy of the whole tensor first).
                let z = nl::ndarray(&[8, 16], DType::F32, nl::sbuf);
                nisa::memset(&z, 0.0, None);
                nisa::dma_copy(b.view(), &z, None);
                let ones = nl::ndarray(&[1, 16], DType::F32, nl::sbuf);
                nisa::memset(&ones, 1.0, None);
                nisa::dma_copy(b.slice((0..1, ..)).scalar_offset(s, 0), &ones, opts);
            })?
    };
    let p = report.profile.expect("a simulate profile");
    Ok((
        row.to_vec()?,
        back.to_vec()?,
        format!("{:?}", p.instruction_counts),
        p.latency_ns,
    ))
}

#[test]
fn in_range_offsets_move_the_row() {
    for at in [0, 3, 7] {
        for oob in [OobMode::Error, OobMode::Skip] {
            let (row, back, _, _) = run(at, oob).unwrap();
            let want: Vec<f32> = (0..16).map(|j| (at * 16 + j) as f32).collect();
            assert_eq!(row, want, "row {at}");
            let mut want_back = vec![0.0; 128];
            want_back[at as usize * 16..][..16].fill(1.0);
            assert_eq!(back, want_back, "back {at}");
        }
    }
}

#[test]
fn an_offset_outside_the_tensor_is_an_error_when_the_dma_runs() {
    for at in [8, 9, -1] {
        let e = run(at, OobMode::Error).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::OutOfBounds, "{e}");
        let msg = e.to_string();
        assert!(msg.contains("dma_copy"), "{msg}");
        assert!(msg.contains(&format!("scalar_offset {at}")), "{msg}");
        assert!(msg.contains("oob_mode=error"), "{msg}");
        assert!(msg.contains("[1, 16]"), "the shapes: {msg}");
        assert_eq!(e.location().unwrap().file, FILE);
    }
}

#[test]
fn oob_mode_skip_skips_the_transfer_but_issues_it() {
    let (_, _, counts_in, latency_in) = run(2, OobMode::Skip).unwrap();
    for at in [8, 100, -3] {
        let (row, back, counts, latency) = run(at, OobMode::Skip).unwrap();
        assert_eq!(row, vec![-1.0; 16], "dst keeps its values (at = {at})");
        assert_eq!(back, vec![0.0; 128], "no HBM row written (at = {at})");
        assert_eq!(counts, counts_in, "the same instructions are issued");
        assert_eq!(latency, latency_in, "and costed the same");
    }
}
