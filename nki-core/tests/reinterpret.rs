//! NKI 0.7's dtype reinterpretation through an access pattern, `t.ap(pattern, offset,
//! dtype=...)` (`ap_as` here): the pattern counts elements of the new dtype over the same
//! bytes, every instruction reads and writes the view as that dtype, and writes change only
//! the bytes they cover. References split and join the bit patterns by hand.

use nki_core::prelude::*;

/// An int32 `[4, 8]` tile seen as bfloat16 `[4, 16]` (the guide's example, scaled down):
/// element `2k` is the low half of int32 `k`, element `2k + 1` its high half.
#[test]
fn an_int32_tile_reads_as_bfloat16_halves() {
    let words: Vec<i32> = (0..32)
        .map(|k: i32| (0x3f80 + k) << 16 | (0x4000 + 3 * k))
        .collect();
    let a = Hbm::from_vec(&[4, 8], words.clone()).unwrap();
    for mode in [Mode::Execute, Mode::Simulate] {
        let mut out = Hbm::<bf16>::zeros([4, 16]);
        let o = out.as_output();
        Launch::new(1)
            .mode(mode)
            .run(|| {
                let t = nl::ndarray(&[4, 8], DType::I32, nl::sbuf);
                nisa::dma_copy(&t, &a, None);
                let halves = t.ap_as(&[[16, 4], [1, 16]], 0, DType::BF16);
                assert_eq!(
                    (halves.shape(), halves.dtype()),
                    (&[4, 16][..], DType::BF16)
                );
                let y = nl::ndarray(&[4, 16], DType::BF16, nl::sbuf);
                nisa::tensor_copy(&y, halves, None);
                nisa::dma_copy(o.view(), &y, None);
            })
            .unwrap();
        let want: Vec<f32> = words
            .iter()
            .flat_map(|&w| {
                let w = w as u32;
                [w & 0xffff, w >> 16].map(|h| f32::from_bits(h << 16))
            })
            .collect();
        assert_eq!(out.to_f32_vec().unwrap(), want, "{mode:?}");
    }
}

/// Writing the high halves of fp32 1.0 (0x3f80_0000) as int16 16384 (0x4000) makes 2.0; a
/// strided int16 view (step 2, offset 1) touches only those halves.
#[test]
fn writes_through_a_reinterpreting_view_change_only_their_bytes() {
    let mut out = Hbm::<f32>::zeros([2, 4]);
    let o = out.as_output();
    Launch::new(1)
        .run(|| {
            let t = nl::ndarray(&[2, 4], DType::F32, nl::sbuf);
            nisa::memset(&t, 1.0, None);
            nisa::memset(t.ap_as(&[[8, 2], [2, 4]], 1, DType::I16), 16384.0, None);
            nisa::dma_copy(o.view(), &t, None);
        })
        .unwrap();
    assert_eq!(out.to_f32_vec().unwrap(), vec![2.0; 8]);
}

#[test]
fn reinterpreting_views_follow_the_rules_with_clear_errors() {
    let run = |f: &(dyn Fn() + Sync)| Launch::new(1).run(f).unwrap_err();
    // A partition of 3 bf16 (6 bytes) is not a whole number of fp32 elements.
    let e = run(&|| {
        let t = nl::ndarray(&[2, 3], DType::BF16, nl::sbuf.name("odd"));
        let _ = t.ap_as(&[[1, 2], [1, 1]], 0, DType::F32);
    });
    assert_eq!(e.kind(), ErrorKind::DType, "{e}");
    assert!(e.message().contains("odd"), "{e}");
    // The partition step counts elements of the new dtype: 8 fp32 are 32 uint8.
    let e = run(&|| {
        let t = nl::ndarray(&[2, 8], DType::F32, nl::sbuf);
        let _ = t.ap_as(&[[8, 2], [1, 8]], 0, DType::U8);
    });
    assert_eq!(e.kind(), ErrorKind::PartitionOffset, "{e}");
    // Reaching past a partition's bytes.
    let e = run(&|| {
        let t = nl::ndarray(&[2, 8], DType::F32, nl::sbuf);
        let _ = t.ap_as(&[[16, 2], [1, 16]], 1, DType::BF16);
    });
    assert_eq!(e.kind(), ErrorKind::OutOfBounds, "{e}");
    // Reading bytes nothing wrote.
    let e = run(&|| {
        let t = nl::ndarray(&[2, 8], DType::F32, nl::sbuf);
        nisa::memset(t.slice((.., 0..4)), 0.0, None);
        let y = nl::ndarray(&[2, 4], DType::BF16, nl::sbuf);
        nisa::tensor_copy(&y, t.ap_as(&[[16, 2], [1, 4]], 6, DType::BF16), None);
    });
    assert_eq!(e.kind(), ErrorKind::UninitializedRead, "{e}");
    // HBM tensors are not reinterpreted (yet).
    let e = run(&|| {
        let h = nl::ndarray(&[2, 8], DType::F32, nl::private_hbm);
        let _ = h.ap_as(&[[16, 2], [1, 16]], 0, DType::BF16);
    });
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

/// `view_as` (NKI `tensor.view(dtype)`): an fp32 `[2, 3, 4]` tile read as uint16 `[2, 3, 8]`
/// (each fp32 its low then its high 16 bits), a column slice of it as bfloat16 (the high
/// halves of one fp32 column), and a uint8 tile widened to uint16 pairs.
#[test]
fn a_view_as_another_dtype_scales_the_last_dimension() {
    let vals: Vec<f32> = (0..24).map(|k| 1.0 + k as f32 / 64.0).collect();
    let a = Hbm::from_vec(&[2, 12], vals.clone()).unwrap();
    let mut halves = Hbm::<u16>::zeros([2, 24]);
    let mut high = Hbm::<bf16>::zeros([2, 3]);
    let (h, g) = (halves.as_output(), high.as_output());
    Launch::new(1)
        .run(|| {
            let t = nl::ndarray(&[2, 3, 4], DType::F32, nl::sbuf);
            nisa::dma_copy(t.reshape(&[2, 12]), &a, None);
            let u = t.view_as(DType::U16);
            assert_eq!((u.shape(), u.dtype()), (&[2, 3, 8][..], DType::U16));
            let y = nl::ndarray(&[2, 3, 8], DType::U16, nl::sbuf);
            nisa::tensor_copy(&y, u, None);
            nisa::dma_copy(h.view(), y.reshape(&[2, 24]), None);
            // Column 1 of every row of 4: its high half is bf16 element 3 of the 8.
            let col = t.slice((.., .., 1..2)).view_as(DType::BF16);
            assert_eq!(col.shape(), &[2, 3, 2]);
            let z = nl::ndarray(&[2, 3], DType::BF16, nl::sbuf);
            nisa::tensor_copy(z.reshape(&[2, 3, 1]), col.slice((.., .., 1..2)), None);
            nisa::dma_copy(g.view(), &z, None);
        })
        .unwrap();
    let bits: Vec<u32> = vals.iter().map(|v| v.to_bits()).collect();
    let want: Vec<f32> = bits
        .iter()
        .flat_map(|&b| [(b & 0xffff) as f32, (b >> 16) as f32])
        .collect();
    assert_eq!(halves.to_f32_vec().unwrap(), want);
    let want_high: Vec<f32> = (0..6)
        .map(|r| f32::from_bits(bits[4 * r + 1] & 0xffff_0000))
        .collect();
    assert_eq!(high.to_f32_vec().unwrap(), want_high);

    let bytes: Vec<u8> = (0..8).map(|k| 0x10 * k + 1).collect();
    let b = Hbm::from_vec(&[2, 4], bytes.clone()).unwrap();
    let mut pairs = Hbm::<u16>::zeros([2, 2]);
    let p = pairs.as_output();
    Launch::new(1)
        .run(|| {
            let t = nl::ndarray(&[2, 4], DType::U8, nl::sbuf);
            nisa::dma_copy(&t, &b, None);
            let y = nl::ndarray(&[2, 2], DType::U16, nl::sbuf);
            nisa::tensor_copy(&y, t.view_as(DType::U16), None);
            nisa::dma_copy(p.view(), &y, None);
        })
        .unwrap();
    let want: Vec<f32> = bytes
        .chunks(2)
        .map(|c| (c[0] as u32 | (c[1] as u32) << 8) as f32)
        .collect();
    assert_eq!(pairs.to_f32_vec().unwrap(), want);
}

#[test]
fn a_view_as_another_dtype_needs_whole_elements() {
    let run = |f: &(dyn Fn() + Sync)| Launch::new(1).run(f).unwrap_err();
    // 3 bf16 (6 bytes) in the last dimension are not a whole number of fp32.
    let e = run(&|| {
        let t = nl::ndarray(&[2, 2, 3], DType::BF16, nl::sbuf.name("odd"));
        let _ = t.view_as(DType::F32);
    });
    assert_eq!(e.kind(), ErrorKind::DType, "{e}");
    assert!(
        e.message().contains("odd") && e.message().contains("float32"),
        "{e}"
    );
    // A view starting at an odd bf16 cannot be read as fp32.
    let e = run(&|| {
        let t = nl::ndarray(&[2, 8], DType::BF16, nl::sbuf);
        let _ = t.slice((.., 1..5)).view_as(DType::F32);
    });
    assert_eq!(e.kind(), ErrorKind::DType, "{e}");
    // A strided last dimension is not a reinterpretable run of bytes.
    let e = run(&|| {
        let t = nl::ndarray(&[2, 8], DType::F32, nl::sbuf);
        let _ = t.slice((.., nl::stepped(0..8, 2))).view_as(DType::BF16);
    });
    assert_eq!(e.kind(), ErrorKind::DType, "{e}");
    // HBM tensors are not reinterpreted.
    let e = run(&|| {
        let h = nl::ndarray(&[2, 8], DType::F32, nl::private_hbm);
        let _ = h.view_as(DType::BF16);
    });
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}
