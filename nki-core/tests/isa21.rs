//! The NKI 0.7 instructions of issue 21's last batch, each against a plain-Rust reference
//! written from its documentation: `nc_stream_shuffle` (quadrant moves, 255 = keep, in place),
//! `nc_n_gather` (per-partition gather), `local_gather` (16-partition GpSimd core groups),
//! `sequence_bounds` (the reference page's NumPy equivalent), and the random-number family
//! `rng` / `rand2` / `rand_set_state` / `rand_get_state` / `set_rng_seed` (XORWOW as in
//! Marsaglia 2003), with their documented rules as errors and their costs.

use nki_core::nisa::{Engine, Opts};
use nki_core::prelude::*;

mod common;
use common::{fails_on, fails_with, hbm, Rng};

/// Runs `body` once on `target`, writing into `out`; returns `out`'s elements.
fn run_on<T: Element + Copy>(
    target: Target,
    mut out: Hbm<T>,
    body: impl Fn(&HbmOut<'_, T>) + Sync,
) -> Vec<T> {
    {
        let o = out.as_output();
        Launch::new(1).target(target).run(|| body(&o)).unwrap();
    }
    out.to_vec().unwrap()
}

// ---- nc_stream_shuffle -------------------------------------------------------------------

/// The documented shuffle: in every quadrant, output partition i takes input partition
/// mask[i] of that quadrant, 255 keeps the output.
fn shuffle_ref(src: &[i32], dst: &[i32], f: usize, mask: &[u32]) -> Vec<i32> {
    let mut out = dst.to_vec();
    let parts = dst.len() / f;
    for d in 0..parts {
        let m = mask[d % 32];
        if m != 255 {
            let s = (d / 32) * 32 + m as usize;
            out[d * f..(d + 1) * f].copy_from_slice(&src[s * f..(s + 1) * f]);
        }
    }
    out
}

fn shuffle_mask() -> Vec<u32> {
    // A reversal with two kept partitions and one source used twice.
    let mut m: Vec<u32> = (0..32).rev().collect();
    m[3] = 255;
    m[17] = 255;
    m[20] = 5;
    m
}

#[test]
fn nc_stream_shuffle_moves_partitions_within_each_quadrant() {
    let (p, f) = (128, 6);
    let mut rng = Rng(71);
    // int32 bit patterns, including ones no f32 holds exactly: the move is bit-exact.
    let src: Vec<i32> = rng
        .ints(p * f, -(1 << 30), 1 << 30)
        .into_iter()
        .map(|v| v as i32 | 1)
        .collect();
    let init: Vec<i32> = (0..(p * f) as i32).map(|v| -v - 1).collect();
    let (sh, ih) = (
        Hbm::from_vec(&[p, f], src.clone()).unwrap(),
        Hbm::from_vec(&[p, f], init.clone()).unwrap(),
    );
    let mask = shuffle_mask();
    let got = run_on(Target::Trn2, Hbm::<i32>::zeros([p, f]), |o| {
        let (s, d) = (nl::load(&sh), nl::load(&ih));
        nisa::nc_stream_shuffle(&d, &s, &mask);
        nl::store(o, &d);
    });
    assert_eq!(got, shuffle_ref(&src, &init, f, &mask));
    // In place (dst is src): every source row is read before any is written.
    let got = run_on(Target::Trn2, Hbm::<i32>::zeros([p, f]), |o| {
        let s = nl::load(&sh);
        nisa::nc_stream_shuffle(&s, &s, &mask);
        nl::store(o, &s);
    });
    assert_eq!(got, shuffle_ref(&src, &src, f, &mask));
    // One quadrant from partition 32 into a 32-partition tile at partition 96 (32 active
    // partitions: starts 0/32/64/96 are legal).
    let got = run_on(Target::Trn2, Hbm::<i32>::zeros([32, f]), |o| {
        let (s, d) = (nl::load(&sh), nl::load(&ih));
        nisa::nc_stream_shuffle(d.slice((96..128, ..)), s.slice((32..64, ..)), &mask);
        nl::store(o, d.slice((96..128, ..)));
    });
    let want = shuffle_ref(&src[32 * f..64 * f], &init[96 * f..], f, &mask);
    assert_eq!(got, want);
}

#[test]
fn nc_stream_shuffle_rules() {
    let mask = shuffle_mask();
    let tile = |p| nl::ndarray(&[p, 4], DType::F32, MemKind::Sbuf);
    // A 64-partition dst makes 64 partitions active: the 32-partition src (which alone
    // could start at 32) must start at 0 or 64.
    let e = fails_with(ErrorKind::PartitionOffset, || {
        let (s, d) = (tile(128), tile(64));
        nisa::memset(&s, 0.0, None);
        nisa::nc_stream_shuffle(&d, s.slice((32..64, ..)), &mask);
    });
    assert!(e.to_string().contains("[0, 64]"), "{e}");
    let e = fails_with(ErrorKind::InvalidArgument, || {
        let (s, d) = (tile(32), tile(32));
        nisa::memset(&s, 0.0, None);
        let mut m = mask.clone();
        m[9] = 40;
        nisa::nc_stream_shuffle(&d, &s, &m);
    });
    assert!(e.to_string().contains("shuffle_mask[9] = 40"), "{e}");
    let e = fails_with(ErrorKind::InvalidArgument, || {
        let (s, d) = (tile(32), tile(32));
        nisa::memset(&s, 0.0, None);
        nisa::nc_stream_shuffle(&d, &s, &mask[..31]);
    });
    assert!(e.to_string().contains("32 entries"), "{e}");
    // A source partition the src view does not have.
    let e = fails_with(ErrorKind::OutOfBounds, || {
        let (s, d) = (tile(16), tile(32));
        nisa::memset(&s, 0.0, None);
        nisa::nc_stream_shuffle(&d, &s, &mask);
    });
    assert!(e.to_string().contains("reads partition 31"), "{e}");
    fails_with(ErrorKind::DType, || {
        let (s, d) = (tile(32), nl::ndarray(&[32, 4], DType::BF16, MemKind::Sbuf));
        nisa::memset(&s, 0.0, None);
        nisa::nc_stream_shuffle(&d, &s, &mask);
    });
}

// ---- nc_n_gather / local_gather ----------------------------------------------------------

#[test]
fn nc_n_gather_gathers_within_each_partition() {
    let (p, f, n) = (8, 24, 10);
    let mut rng = Rng(5);
    let data = rng.sample(p * f);
    let idx: Vec<u32> = rng
        .ints(p * n, 0, f as i64 - 1)
        .into_iter()
        .map(|v| v as u32)
        .collect();
    let (dh, ih) = (
        hbm(&[p, 4, 6], data.clone()),
        Hbm::from_vec(&[p, n], idx.clone()).unwrap(),
    );
    let got = run_on(Target::Trn2, Hbm::<f32>::zeros([p, n]), |o| {
        let (d, i) = (nl::load(&dh), nl::load(&ih));
        let out = nl::ndarray(&[p, n], DType::F32, MemKind::Sbuf);
        nisa::nc_n_gather(&out, &d, &i);
        nl::store(o, &out);
    });
    let want: Vec<f32> = (0..p * n)
        .map(|k| data[(k / n) * f + idx[k] as usize])
        .collect();
    assert_eq!(got, want);
    let e = fails_with(ErrorKind::DType, || {
        let d = nl::ndarray(&[4, 8], DType::F32, MemKind::Sbuf);
        let i = nl::ndarray(&[4, 2], DType::U32, MemKind::Sbuf);
        let out = nl::ndarray(&[4, 2], DType::BF16, MemKind::Sbuf);
        nisa::memset(&d, 0.0, None);
        nisa::memset(&i, 0.0, None);
        nisa::nc_n_gather(&out, &d, &i);
    });
    assert!(e.to_string().contains("does not cast"), "{e}");
    let e = fails_with(ErrorKind::OutOfBounds, || {
        let d = nl::ndarray(&[4, 8], DType::F32, MemKind::Sbuf);
        let i = nl::ndarray(&[4, 2], DType::U32, MemKind::Sbuf);
        let out = nl::ndarray(&[4, 2], DType::F32, MemKind::Sbuf);
        nisa::memset(&d, 0.0, None);
        nisa::memset(&i, 8.0, None);
        nisa::nc_n_gather(&out, &d, &i);
    });
    assert!(e.to_string().contains("index 8"), "{e}");
}

/// NKI's own `local_gather` test (`test_nki_isa_local_gather.py`) and its NumPy golden: a
/// `[128, 512, 4]` source, one `[16, 4]` index block per core replicated on the 8 GpSimd
/// cores (scaled by `num_elem_per_idx` to element offsets), 4 elements per index, 64 valid
/// indices; every partition gathers from its own row with its core's partition-first index
/// list (`np.take(src[16c:16c+16], indices_1d, axis=1)`), and all of the `[128, 4, 16, 4]`
/// `dst` is written.
#[test]
fn local_gather_follows_nki_test_golden() {
    let (p, rows, n, valid) = (128, 512, 4, 64);
    let mut rng = Rng(13);
    let src = rng.sample(p * rows * n);
    let per_core: Vec<u16> = rng
        .ints(16 * 4, 0, rows as i64 - 1)
        .into_iter()
        .map(|v| v as u16)
        .collect();
    // np.tile(index_per_core, (8, 1)) * num_elem_per_idx
    let index: Vec<u16> = (0..p * 4)
        .map(|k| per_core[k % (16 * 4)] * n as u16)
        .collect();
    let (sh, ih) = (
        hbm(&[p, rows, n], src.clone()),
        Hbm::from_vec(&[p, 4], index.clone()).unwrap(),
    );
    let got = run_on(Target::Trn2, Hbm::<f32>::zeros([p, 4, 16, 4]), |o| {
        let (s, i) = (nl::load(&sh), nl::load(&ih));
        let d = nl::ndarray(&[p, 4, 16, 4], DType::F32, MemKind::Sbuf);
        nisa::local_gather(&d, &s, &i, n, valid);
        nl::store(o, &d);
    });
    // The golden: indices_1d = index[16c:16c+16].flatten(order='F')[:valid] (unscaled),
    // out[q, k, e] = src[q, indices_1d[k], e].
    let mut want = vec![f32::NAN; p * valid * n];
    for c in 0..8 {
        let list: Vec<usize> = (0..valid)
            .map(|k| per_core[(k % 16) * 4 + k / 16] as usize)
            .collect();
        for q in c * 16..(c + 1) * 16 {
            for (k, &i) in list.iter().enumerate() {
                for e in 0..n {
                    want[(q * valid + k) * n + e] = src[(q * rows + i) * n + e];
                }
            }
        }
    }
    assert_eq!(got, want);
}

#[test]
fn local_gather_gathers_within_16_partition_groups() {
    // 32 partitions = 2 GpSimd cores; a dst row longer than the gathered elements keeps the
    // rest of its values.
    let (p, fs, fi, fd) = (32, 8, 3, 30);
    let (elems, valid) = (2, 12);
    let mut rng = Rng(13);
    let src = rng.sample(p * fs);
    let idx: Vec<u16> = rng
        .ints(p * fi, 0, (fs - elems) as i64)
        .into_iter()
        .map(|v| v as u16)
        .collect();
    let init: Vec<f32> = (0..p * fd).map(|v| -(v as f32)).collect();
    let (sh, ih, dh) = (
        hbm(&[p, fs], src.clone()),
        Hbm::from_vec(&[p, fi], idx.clone()).unwrap(),
        hbm(&[p, fd], init.clone()),
    );
    let got = run_on(Target::Trn2, Hbm::<f32>::zeros([p, fd]), |o| {
        let (s, i, d) = (nl::load(&sh), nl::load(&ih), nl::load(&dh));
        nisa::local_gather(&d, &s, &i, elems, valid);
        nl::store(o, &d);
    });
    let mut want = init.clone();
    for c in 0..2 {
        for q in c * 16..(c + 1) * 16 {
            for k in 0..valid {
                let i = idx[(c * 16 + k % 16) * fi + k / 16] as usize;
                for e in 0..elems {
                    want[q * fd + k * elems + e] = src[q * fs + i + e];
                }
            }
        }
    }
    assert_eq!(got, want);
    let e = fails_with(ErrorKind::InvalidArgument, || {
        let s = nl::ndarray(&[16, 8], DType::F32, MemKind::Sbuf);
        let i = nl::ndarray(&[16, 1], DType::U16, MemKind::Sbuf);
        nisa::memset(&s, 0.0, None);
        nisa::memset(&i, 0.0, None);
        nisa::local_gather(&s, &s, &i, 3, None);
    });
    assert!(e.to_string().contains("num_elem_per_idx 3"), "{e}");
    let e = fails_with(ErrorKind::OutOfBounds, || {
        let s = nl::ndarray(&[16, 8], DType::F32, MemKind::Sbuf);
        let i = nl::ndarray(&[16, 1], DType::U16, MemKind::Sbuf);
        let d = nl::ndarray(&[16, 8], DType::F32, MemKind::Sbuf);
        for t in [&s, &d] {
            nisa::memset(t, 0.0, None);
        }
        nisa::memset(&i, 127.0, None);
        nisa::local_gather(&d, &s, &i, 2, 1);
    });
    assert!(e.to_string().contains("index 127"), "{e}");
    fails_with(ErrorKind::DType, || {
        let s = nl::ndarray(&[16, 8], DType::F32, MemKind::Sbuf);
        let i = nl::ndarray(&[16, 1], DType::U32, MemKind::Sbuf);
        nisa::local_gather(&s, &s, &i, 1, None);
    });
    fails_with(ErrorKind::PartitionOffset, || {
        let s = nl::ndarray(&[24, 8], DType::F32, MemKind::Sbuf);
        let i = nl::ndarray(&[24, 1], DType::U16, MemKind::Sbuf);
        nisa::local_gather(&s, &s, &i, 1, None);
    });
}

// ---- sequence_bounds ---------------------------------------------------------------------

/// The reference page's NumPy equivalent, transcribed.
fn bounds_ref(seq: &[i64]) -> Vec<i64> {
    let n = seq.len();
    let (mut lo, mut hi) = (vec![0i64; n], vec![0i64; n]);
    lo[0] = if seq[0] != 0 { 0 } else { n as i64 };
    for i in 1..n {
        lo[i] = if seq[i] == 0 {
            n as i64
        } else if seq[i] == seq[i - 1] {
            lo[i - 1]
        } else {
            i as i64
        };
    }
    hi[n - 1] = if seq[n - 1] != 0 { n as i64 } else { -1 };
    for i in (0..n - 1).rev() {
        hi[i] = if seq[i] == 0 {
            -1
        } else if seq[i] == seq[i + 1] {
            hi[i + 1]
        } else {
            i as i64 + 1
        };
    }
    lo.into_iter().chain(hi).collect()
}

#[test]
fn sequence_bounds_matches_the_documented_numpy_equivalent() {
    let mut rng = Rng(3);
    // Padding first and last, runs of one, a segment id repeated after another segment.
    let mut ids: Vec<i64> = vec![0, 1, 1, 2, 2, 2, 0, 0, 3, 1, 1, 4, 5, 5, 0];
    ids.extend(rng.ints(113, 0, 3));
    ids.push(7);
    let n = ids.len();
    let want = bounds_ref(&ids);
    let ih = Hbm::from_vec(&[1, n], ids.iter().map(|&v| v as i32).collect()).unwrap();
    let got = run_on(Target::Trn2, Hbm::<i32>::zeros([1, 2, n]), |o| {
        let s = nl::load(&ih);
        let d = nl::ndarray(&[1, 2, n], DType::I32, MemKind::Sbuf);
        nisa::sequence_bounds(&d, &s);
        nl::store(o, &d);
    });
    assert_eq!(got.iter().map(|&v| v as i64).collect::<Vec<_>>(), want);
    // float32 operands give the same values.
    let fh = hbm(&[1, n], ids.iter().map(|&v| v as f32).collect());
    let got = run_on(Target::Trn2, Hbm::<f32>::zeros([1, 2, n]), |o| {
        let s = nl::load(&fh);
        let d = nl::ndarray(&[1, 2, n], DType::F32, MemKind::Sbuf);
        nisa::sequence_bounds(&d, &s);
        nl::store(o, &d);
    });
    assert_eq!(got.iter().map(|&v| v as i64).collect::<Vec<_>>(), want);
    let e = fails_with(ErrorKind::PartitionMismatch, || {
        let s = nl::ndarray(&[2, 8], DType::I32, MemKind::Sbuf);
        let d = nl::ndarray(&[2, 16], DType::I32, MemKind::Sbuf);
        nisa::sequence_bounds(&d, &s);
    });
    assert!(e.to_string().contains("exactly 1 partition"), "{e}");
    fails_with(ErrorKind::ShapeMismatch, || {
        let s = nl::ndarray(&[1, 8], DType::I32, MemKind::Sbuf);
        let d = nl::ndarray(&[1, 8], DType::I32, MemKind::Sbuf);
        nisa::sequence_bounds(&d, &s);
    });
    fails_with(ErrorKind::DType, || {
        let s = nl::ndarray(&[1, 8], DType::BF16, MemKind::Sbuf);
        let d = nl::ndarray(&[1, 16], DType::I32, MemKind::Sbuf);
        nisa::sequence_bounds(&d, &s);
    });
    let e = fails_with(ErrorKind::InvalidArgument, || {
        let s = nl::ndarray(&[1, 8], DType::I32, MemKind::Sbuf);
        let d = nl::ndarray(&[1, 16], DType::I32, MemKind::Sbuf);
        nisa::memset(&s, -2.0, None);
        nisa::sequence_bounds(&d, &s);
    });
    assert!(e.to_string().contains("non-negative"), "{e}");
}

// ---- random numbers ----------------------------------------------------------------------

/// XORWOW (Marsaglia, "Xorshift RNGs", 2003, section 3.1) on state `[x, y, z, w, v, d]`.
fn xorwow(s: &mut [u32]) -> u32 {
    let t = s[0] ^ (s[0] >> 2);
    s.copy_within(1..5, 0);
    s[4] = (s[4] ^ (s[4] << 4)) ^ (t ^ (t << 1));
    s[5] = s[5].wrapping_add(362_437);
    s[4].wrapping_add(s[5])
}

/// `p` lanes of `words` state words each, from a fixed generator.
fn states(p: usize, words: usize, seed: u64) -> Vec<u32> {
    let mut rng = Rng(seed);
    (0..p * words).map(|_| rng.next_u64() as u32 | 1).collect()
}

/// Draws `f` numbers per lane from `state` (generator j % gens for element j); returns the
/// numbers and leaves `state` advanced.
fn draw_ref(state: &mut [u32], p: usize, f: usize, gens: usize) -> Vec<u32> {
    let words = 6 * gens;
    let mut out = Vec::new();
    for lane in state.chunks_mut(words).take(p) {
        for j in 0..f {
            let g = j % gens;
            out.push(xorwow(&mut lane[6 * g..6 * g + 6]));
        }
    }
    out
}

#[test]
fn rng_on_gpsimd_follows_xorwow_from_the_state_set() {
    let (p, f) = (16, 10);
    let init = states(p, 6, 11);
    let sh = Hbm::from_vec(&[p, 6], init.clone()).unwrap();
    let mut out = Hbm::<u32>::zeros([p, f + 6]);
    {
        let o = out.as_output();
        Launch::new(1)
            .target(Target::Trn2)
            .run(|| {
                let s = nl::load(&sh);
                let g = Opts::new().engine(Engine::GpSimd);
                nisa::rand_set_state(&s, g);
                let r = nl::ndarray(&[p, f + 6], DType::U32, MemKind::Sbuf);
                nisa::rng(r.slice((.., 0..f)), g);
                nisa::rand_get_state(r.slice((.., f..f + 6)), g);
                nl::store(&o, &r);
            })
            .unwrap();
    }
    let got = out.to_vec().unwrap();
    let mut state = init.clone();
    let want = draw_ref(&mut state, p, f, 1);
    for q in 0..p {
        let row = &got[q * (f + 6)..(q + 1) * (f + 6)];
        assert_eq!(row[..f], want[q * f..(q + 1) * f], "numbers of lane {q}");
        assert_eq!(row[f..], state[q * 6..(q + 1) * 6], "state of lane {q}");
    }
}

#[test]
fn rng_on_vector_uses_four_generators_and_truncates_to_the_dtype() {
    let (p, f) = (8, 9);
    let init = states(p, 24, 23);
    let sh = Hbm::from_vec(&[p, 24], init.clone()).unwrap();
    // Lane q's first 2f draws go to a uint8 tile (the first f are checked), the next f to an
    // int16 tile.
    let mut u8s = Hbm::<u8>::zeros([p, f]);
    let mut i16s = Hbm::<i16>::zeros([p, f]);
    {
        let (a, b) = (u8s.as_output(), i16s.as_output());
        Launch::new(1)
            .target(Target::Trn3)
            .run(|| {
                let s = nl::load(&sh);
                nisa::rand_set_state(&s, None); // VectorE by default on NeuronCore-v4
                let x = nl::ndarray(&[p, 2 * f], DType::U8, MemKind::Sbuf);
                let y = nl::ndarray(&[p, f], DType::I16, MemKind::Sbuf);
                nisa::rng(&x, None);
                nisa::rng(&y, None);
                nl::store(&a, x.slice((.., 0..f)));
                nl::store(&b, &y);
            })
            .unwrap();
    }
    let (gu, gi) = (u8s.to_vec().unwrap(), i16s.to_vec().unwrap());
    let mut state = init.clone();
    let first = draw_ref(&mut state, p, 2 * f, 4);
    let next = draw_ref(&mut state, p, f, 4);
    for q in 0..p {
        for j in 0..f {
            assert_eq!(
                gu[q * f + j],
                first[q * 2 * f + j] as u8,
                "u8 lane {q} elem {j}"
            );
            // Each instruction starts again at generator 0 of its lane.
            assert_eq!(
                gi[q * f + j],
                next[q * f + j] as u16 as i16,
                "i16 lane {q} elem {j}"
            );
        }
    }
}

#[test]
fn rand2_is_uniform_between_min_and_max() {
    let (p, f) = (4, 64);
    let init = states(p, 24, 41);
    let sh = Hbm::from_vec(&[p, 24], init.clone()).unwrap();
    let mh = hbm(&[p, 1], vec![-1.0, 0.0, 10.0, -300.0]);
    let got = run_on(Target::Trn3, Hbm::<f32>::zeros([p, f]), |o| {
        let s = nl::load(&sh);
        nisa::rand_set_state(&s, None);
        let lo = nl::load(&mh);
        let d = nl::ndarray(&[p, f], DType::F32, MemKind::Sbuf);
        nisa::rand2(&d, &lo, 20.0f32);
        nl::store(o, &d);
    });
    let mut state = init.clone();
    let bits = draw_ref(&mut state, p, f, 4);
    let mins = [-1.0f32, 0.0, 10.0, -300.0];
    for q in 0..p {
        for j in 0..f {
            let u = (bits[q * f + j] >> 8) as f32 / 16_777_216.0;
            let want = mins[q] + (20.0 - mins[q]) * u;
            let g = got[q * f + j];
            assert_eq!(g, want, "lane {q} elem {j}");
            assert!(g >= mins[q] && g <= 20.0);
        }
    }
}

#[test]
fn set_rng_seed_replays_the_same_numbers() {
    let draws = |seed: u32| {
        let sh = Hbm::from_vec(&[1, 1], vec![seed]).unwrap();
        run_on(Target::Trn2, Hbm::<u32>::zeros([32, 16]), |o| {
            let s = nl::load(&sh);
            nisa::set_rng_seed(&s);
            let d = nl::ndarray(&[32, 16], DType::U32, MemKind::Sbuf);
            nisa::rng(&d, None);
            nl::store(o, &d);
        })
    };
    let (a, b, c) = (draws(7), draws(7), draws(8));
    assert_eq!(a, b);
    assert_ne!(a, c);
    // Lanes differ from each other.
    assert_ne!(a[..16], a[16..32]);
}

#[test]
fn random_number_rules() {
    // rand2 is NeuronCore-v4 only; rng takes integer dtypes; GpSimd rng needs NeuronCore-v3.
    let e = fails_on(Target::Trn2, ErrorKind::InvalidArgument, || {
        let d = nl::ndarray(&[4, 4], DType::F32, MemKind::Sbuf);
        nisa::rand2(&d, 0.0f32, 1.0f32);
    });
    assert!(e.to_string().contains("NeuronCore-v4"), "{e}");
    let e = fails_on(Target::Trn3, ErrorKind::InvalidArgument, || {
        let d = nl::ndarray(&[4, 4], DType::F32, MemKind::Sbuf);
        nisa::rand2(&d, 1.0f32, 1.0f32);
    });
    assert!(e.to_string().contains("less than max"), "{e}");
    fails_on(Target::Trn2, ErrorKind::DType, || {
        let d = nl::ndarray(&[4, 4], DType::F32, MemKind::Sbuf);
        nisa::rng(&d, None);
    });
    let e = fails_on(Target::Trn1, ErrorKind::InvalidArgument, || {
        let d = nl::ndarray(&[4, 4], DType::U32, MemKind::Sbuf);
        nisa::rng(&d, Opts::new().engine(Engine::GpSimd));
    });
    assert!(e.to_string().contains("supported engines"), "{e}");
    fails_on(Target::Trn2, ErrorKind::WrongMemory, || {
        let d = nl::ndarray(&[4, 4], DType::U32, MemKind::Psum);
        nisa::rng(&d, Opts::new().engine(Engine::GpSimd));
    });
    // State tiles: NeuronCore-v3+, GpSimd only on v3, 6 words on GpSimd / 24 on Vector.
    fails_on(Target::Trn1, ErrorKind::InvalidArgument, || {
        let d = nl::ndarray(&[4, 6], DType::U32, MemKind::Sbuf);
        nisa::rand_get_state(&d, None);
    });
    fails_on(Target::Trn2, ErrorKind::InvalidArgument, || {
        let d = nl::ndarray(&[4, 24], DType::U32, MemKind::Sbuf);
        nisa::rand_get_state(&d, Opts::new().engine(Engine::Vector));
    });
    let e = fails_on(Target::Trn3, ErrorKind::ShapeMismatch, || {
        let d = nl::ndarray(&[4, 6], DType::U32, MemKind::Sbuf);
        nisa::rand_get_state(&d, None);
    });
    assert!(e.to_string().contains("24 state words"), "{e}");
    fails_on(Target::Trn2, ErrorKind::ShapeMismatch, || {
        let s = nl::ndarray(&[1, 2], DType::U32, MemKind::Sbuf);
        nisa::set_rng_seed(&s);
    });
}

#[test]
fn rand2_costs_a_quarter_cycle_per_element() {
    let busy = |f: usize| {
        let rep = Launch::new(1)
            .target(Target::Trn3)
            .mode(Mode::Estimate)
            .run(move || {
                let d = nl::ndarray(&[128, f], DType::F32, MemKind::Sbuf);
                nisa::rand2(&d, 0.0f32, 1.0f32);
            })
            .unwrap();
        rep.profile
            .unwrap()
            .engine("VectorE")
            .map_or(0.0, |e| e.active_ns)
    };
    let per_4096 = busy(8192) - busy(4096);
    let want = 4096.0 / 4.0 / Target::Trn3.spec().vector_ghz;
    assert!((per_4096 - want).abs() < 1e-6, "{per_4096} vs {want} ns");
}

// ---- topk --------------------------------------------------------------------------------

/// The documented top-k of one snake: the K largest (NaN above every number, equal values
/// by position) in ascending order, as (value, position) pairs; the library golden's
/// `argsort(-x, stable)[:k][::-1]`.
fn topk_ref(snake: &[f32], k: usize) -> Vec<(f32, usize)> {
    let key = |v: f32| if v.is_nan() { f32::INFINITY } else { v };
    let mut order: Vec<usize> = (0..snake.len()).collect();
    // A stable sort on the negated key keeps equal values in position order.
    order.sort_by(|&a, &b| {
        let (x, y) = (key(snake[a]), key(snake[b]));
        match (snake[a].is_nan(), snake[b].is_nan()) {
            (true, false) => std::cmp::Ordering::Less,
            (false, true) => std::cmp::Ordering::Greater,
            _ => y.partial_cmp(&x).unwrap(),
        }
    });
    order.truncate(k);
    order.reverse();
    order.into_iter().map(|e| (snake[e], e)).collect()
}

#[test]
fn topk_selects_per_16_partition_snake() {
    let (p, n, cols, k) = (32, 42, 4, 20);
    let mut rng = Rng(97);
    // bf16 integers with many ties, one NaN and values in the unused snake tail.
    let mut src = rng.int_f32s(p * cols, -6, 6);
    src[(16 + 3) * cols + 1] = f32::NAN; // group 1, snake position 16 + 3 = 19
    let sh = Hbm::<half::bf16>::from_vec(
        &[p, cols],
        src.iter().map(|&v| half::bf16::from_f32(v)).collect(),
    )
    .unwrap();
    let mut vals = Hbm::<half::bf16>::zeros([p, k]);
    let mut idxs = Hbm::<u32>::zeros([p, k]);
    {
        let (vo, io) = (vals.as_output(), idxs.as_output());
        Launch::new(1)
            .target(Target::Trn2)
            .run(|| {
                let s = nl::load(&sh);
                let v = nl::ndarray(&[p, k], DType::BF16, MemKind::Sbuf);
                let i = nl::ndarray(&[p, k], DType::U32, MemKind::Sbuf);
                nisa::memset(&v, -100.0, None);
                nisa::memset(&i, 999.0, None);
                nisa::topk(&v, &i, &s, n);
                nl::store(&vo, &v);
                nl::store(&io, &i);
            })
            .unwrap();
    }
    let (gv, gi) = (vals.to_vec().unwrap(), idxs.to_vec().unwrap());
    for g in 0..p / 16 {
        let snake: Vec<f32> = (0..n)
            .map(|e| src[(16 * g + e % 16) * cols + e / 16])
            .collect();
        let want = topk_ref(&snake, k);
        let mut written = vec![false; 16 * k];
        for (j, &(v, e)) in want.iter().enumerate() {
            let (r, c) = (16 * g + j % 16, j / 16);
            let got_v = gv[r * k + c].to_f32();
            assert!(
                got_v == v || (v.is_nan() && got_v.is_nan()),
                "group {g} result {j}: {got_v} vs {v}"
            );
            assert_eq!(gi[r * k + c] as usize, e, "group {g} result {j}");
            written[(j % 16) * k + c] = true;
        }
        // Everything else keeps its memset value.
        for r in 0..16 {
            for c in 0..k {
                if !written[r * k + c] {
                    assert_eq!(gv[(16 * g + r) * k + c].to_f32(), -100.0);
                    assert_eq!(gi[(16 * g + r) * k + c], 999);
                }
            }
        }
    }
}

#[test]
fn topk_rules_and_cost() {
    let t = |p: usize, f: usize, d: DType| nl::ndarray(&[p, f], d, MemKind::Sbuf);
    fails_with(ErrorKind::DType, || {
        let (s, v, i) = (
            t(16, 4, DType::F32),
            t(16, 8, DType::BF16),
            t(16, 8, DType::U32),
        );
        nisa::topk(&v, &i, &s, 40);
    });
    let e = fails_with(ErrorKind::InvalidArgument, || {
        let (s, v, i) = (
            t(16, 4, DType::BF16),
            t(16, 4, DType::BF16),
            t(16, 4, DType::U32),
        );
        nisa::topk(&v, &i, &s, 7);
    });
    assert!(e.to_string().contains("8 <= n"), "{e}");
    let e = fails_with(ErrorKind::ShapeMismatch, || {
        let (s, v, i) = (
            t(16, 4, DType::BF16),
            t(16, 8, DType::BF16),
            t(16, 8, DType::U32),
        );
        nisa::topk(&v, &i, &s, 80);
    });
    assert!(e.to_string().contains("ceil(n / 16) = 5"), "{e}");
    fails_with(ErrorKind::ShapeMismatch, || {
        let (s, v, i) = (
            t(16, 4, DType::BF16),
            t(16, 9, DType::BF16),
            t(16, 9, DType::U32),
        );
        nisa::topk(&v, &i, &s, 8);
    });
    fails_with(ErrorKind::PartitionOffset, || {
        let (s, v, i) = (
            t(24, 4, DType::BF16),
            t(24, 8, DType::BF16),
            t(24, 8, DType::U32),
        );
        nisa::topk(&v, &i, &s, 40);
    });
    // "4*n + K GpSIMD Engine cycles": 4 cycles per extra snake element, 1 per extra result.
    let busy = |n: usize, k: usize| {
        let rep = Launch::new(1)
            .target(Target::Trn2)
            .mode(Mode::Estimate)
            .run(move || {
                let s = nl::ndarray(&[128, 256], DType::BF16, MemKind::Sbuf);
                nisa::memset(&s, 0.0, None);
                let v = nl::ndarray(&[128, k], DType::BF16, MemKind::Sbuf);
                let i = nl::ndarray(&[128, k], DType::U32, MemKind::Sbuf);
                nisa::topk(&v, &i, &s, n);
            })
            .unwrap();
        rep.profile
            .unwrap()
            .engine("GpSimdE")
            .map_or(0.0, |e| e.active_ns)
    };
    let ghz = Target::Trn2.spec().gpsimd_ghz;
    assert!((busy(2048, 64) - busy(1024, 64) - 4.0 * 1024.0 / ghz).abs() < 1e-6);
    assert!((busy(1024, 128) - busy(1024, 64) - 64.0 / ghz).abs() < 1e-6);
}

#[test]
fn tensor_tensor_scan_result_takes_the_wider_input_dtype() {
    // The allocating form is Beta 1's, whose `nki.isa.tensor_tensor_scan` page defaults the
    // output dtype to the higher-precision input dtype, in either order (the 0.7 form writes
    // `dst`'s dtype).
    Launch::new(1)
        .run(|| {
            let a = nl::ndarray(&[4, 8], DType::BF16, MemKind::Sbuf);
            let b = nl::ndarray(&[4, 8], DType::F32, MemKind::Sbuf);
            nisa::memset(&a, 1.0, None);
            nisa::memset(&b, 0.5, None);
            let args = nisa::ScanOpts::default();
            let r = nisa::classic::tensor_tensor_scan(
                &a,
                &b,
                0.0f32,
                nisa::AluOp::Add,
                nisa::AluOp::Add,
                args,
            );
            assert_eq!(r.dtype(), DType::F32);
            let r = nisa::classic::tensor_tensor_scan(
                &b,
                &a,
                0.0f32,
                nisa::AluOp::Add,
                nisa::AluOp::Add,
                args,
            );
            assert_eq!(r.dtype(), DType::F32);
        })
        .unwrap();
}
