//! The state of the engines' hardware random number generators in one program instance (kept
//! in its [`InstanceState`](crate::context::InstanceState); the instructions are in
//! `isa/rng.rs`).
//!
//! The generator is XORWOW (NKI 0.7 `nisa.rand2`, `nisa.rand_set_state`: "XORWOW",
//! "6 elements (GpSimd) or 24 elements (Vector)" of uint32 state per compute lane): five
//! xorshift words and a Weyl counter, `[x, y, z, w, v, d]`, stepped as in Marsaglia's
//! "Xorshift RNGs" (2003), section 3.1:
//! `t = x ^ (x >> 2); x = y; y = z; z = w; w = v; v = (v ^ (v << 4)) ^ (t ^ (t << 1));
//! d += 362437; return v + d`. GpSimdE has one generator per lane, VectorE four (24 words
//! = 4 x 6). Where the documentation is silent \[A\]: the order of the six words, the use of
//! VectorE's four generators in turn (element `j` of a partition draws from generator
//! `j % 4`), the lane of a partition (its absolute partition index), the expansion of a single
//! `set_rng_seed` value into every lane's state and the state before any seeding
//! ([`expand_seed`] of [`DEFAULT_HW_SEED`]).

/// Lanes (partitions) of an engine.
pub(crate) const LANES: usize = 128;

/// uint32 words of one XORWOW generator.
pub(crate) const XORWOW_WORDS: usize = 6;

/// XORWOW generators per lane of VectorE (GpSimdE has one).
pub(crate) const VECTOR_GENERATORS: usize = 4;

/// The seed whose expansion is every lane's state before a kernel seeds the engine \[A\].
pub(crate) const DEFAULT_HW_SEED: u32 = 0x2545_F491;

/// The Weyl increment of XORWOW's counter word.
const WEYL: u32 = 362_437;

/// Steps one XORWOW generator `s` (`[x, y, z, w, v, d]`) and returns its 32-bit output.
pub(crate) fn xorwow_next(s: &mut [u32]) -> u32 {
    let t = s[0] ^ (s[0] >> 2);
    s[0] = s[1];
    s[1] = s[2];
    s[2] = s[3];
    s[3] = s[4];
    s[4] = (s[4] ^ (s[4] << 4)) ^ (t ^ (t << 1));
    s[5] = s[5].wrapping_add(WEYL);
    s[4].wrapping_add(s[5])
}

/// The SplitMix32-style finaliser used to expand a seed.
fn mix32(mut z: u32) -> u32 {
    z = (z ^ (z >> 16)).wrapping_mul(0x21F0_AAAD);
    z = (z ^ (z >> 15)).wrapping_mul(0x735A_2D97);
    z ^ (z >> 15)
}

/// The six state words of generator `gen` of `lane` seeded from `seed` \[A\]: the xorshift
/// words are mixes of the seed, lane and generator (never all zero), the counter starts at 0.
pub(crate) fn expand_seed(seed: u32, lane: usize, gen: usize) -> [u32; XORWOW_WORDS] {
    let mut out = [0u32; XORWOW_WORDS];
    let base = seed ^ mix32((lane * VECTOR_GENERATORS + gen) as u32 ^ 0x9E37_79B9);
    for (k, w) in out.iter_mut().take(5).enumerate() {
        *w = mix32(base.wrapping_add((k as u32 + 1).wrapping_mul(0x9E37_79B9))) | (k == 0) as u32;
    }
    out
}

/// The generators of one engine: `words` uint32 per lane (6 for GpSimdE, 24 for VectorE).
#[derive(Clone, Debug)]
pub(crate) struct EngineRng {
    /// Per lane, its generators' words back to back.
    pub(crate) lanes: Vec<Vec<u32>>,
}

impl EngineRng {
    /// Every lane of an engine with `generators` generators seeded from `seed`.
    pub(crate) fn seeded(seed: u32, generators: usize) -> EngineRng {
        EngineRng {
            lanes: (0..LANES)
                .map(|l| {
                    (0..generators)
                        .flat_map(|g| expand_seed(seed, l, g))
                        .collect()
                })
                .collect(),
        }
    }
}

/// The hardware generators of one program instance: GpSimdE's and VectorE's, created (from
/// [`DEFAULT_HW_SEED`]) when first used.
#[derive(Clone, Debug, Default)]
pub(crate) struct HwRng {
    gpsimd: Option<EngineRng>,
    vector: Option<EngineRng>,
}

impl HwRng {
    /// The generators of VectorE (`vector`) or GpSimdE.
    pub(crate) fn engine(&mut self, vector: bool) -> &mut EngineRng {
        let (slot, gens) = if vector {
            (&mut self.vector, VECTOR_GENERATORS)
        } else {
            (&mut self.gpsimd, 1)
        };
        slot.get_or_insert_with(|| EngineRng::seeded(DEFAULT_HW_SEED, gens))
    }
}

// Saved whole before an untaken branch is traced, put back after it.
crate::shadow::state_value_by_clone!(HwRng);
