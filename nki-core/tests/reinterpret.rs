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
