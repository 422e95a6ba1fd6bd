//! The engines' pseudo-random generators: Marsaglia's XORWOW, one or more per
//! compute lane (partition), as `nisa.rng` / `rand2` / `dropout` and the seed and
//! state instructions use them.
//!
//! A generator is five 32-bit shift-register words `x, y, z, w, v` and a Weyl
//! counter `d`. A step computes `t = x ^ (x >> 2)`, shifts the words down
//! (`x = y, y = z, z = w, w = v`), sets `v = (v ^ (v << 4)) ^ (t ^ (t << 1))`,
//! adds 362437 to `d` and yields `v + d` (mod 2^32). A GpSimd lane holds one
//! generator (6 words), a Vector lane four (24 words); element `j` of an
//! instruction's row draws from generator `j % 4` of its lane. A lane's state is
//! its generators' words in that order, as `rand_get_state` / `rand_set_state`
//! move them.
//!
//! Seeding with `s` (`set_rng_seed`, `nl.random_seed`, and seed 0 when a program
//! starts): word `k` of generator `g` of lane `p` is the low 32 bits of
//! SplitMix64 of `s * 2^32 + p * 256 + g * 8 + k`; a generator whose five shift
//! words are all zero (which XORWOW cannot leave) gets `x = 1`. The NumPy executor
//! documents the same scheme in `tests/python/nki_harness/SEMANTICS.md`.

use super::enums::Engine;

/// Words of one generator: `x, y, z, w, v, d`.
pub(crate) const WORDS: usize = 6;
/// The Weyl sequence's increment.
const WEYL: u32 = 362_437;

/// The generators a lane of `engine` holds (Vector 4, GpSimd 1).
pub(crate) fn streams(engine: Engine) -> usize {
    if engine == Engine::Vector { 4 } else { 1 }
}

/// SplitMix64's output for `x` (Steele, Lea and Flood 2014).
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The state of every lane of one engine: `lanes x streams x WORDS` words.
#[derive(Clone, Debug)]
pub(crate) struct Lanes {
    /// Generators per lane.
    streams: usize,
    words: Vec<u32>,
}

impl Lanes {
    /// `lanes` lanes of `engine` seeded with `seed`.
    pub(crate) fn seeded(engine: Engine, lanes: usize, seed: u32) -> Lanes {
        let streams = streams(engine);
        let mut words = Vec::with_capacity(lanes * streams * WORDS);
        let base = u64::from(seed) << 32;
        for p in 0..lanes as u64 {
            for g in 0..streams as u64 {
                let start = words.len();
                words.extend((0..WORDS as u64).map(|k| splitmix64(base + p * 256 + g * 8 + k) as u32));
                if words[start..start + 5].iter().all(|&w| w == 0) {
                    words[start] = 1;
                }
            }
        }
        Lanes { streams, words }
    }

    /// Words of one lane's state.
    pub(crate) fn width(&self) -> usize {
        self.streams * WORDS
    }

    /// Number of lanes.
    pub(crate) fn count(&self) -> usize {
        self.words.len() / self.width()
    }

    /// Lane `p`'s state words.
    pub(crate) fn lane(&self, p: usize) -> &[u32] {
        &self.words[p * self.width()..(p + 1) * self.width()]
    }

    /// Replaces lane `p`'s state words.
    pub(crate) fn set_lane(&mut self, p: usize, state: &[u32]) {
        let w = self.width();
        self.words[p * w..(p + 1) * w].copy_from_slice(state);
    }

    /// `count` draws of lane `p`, advancing its generators; draw `j` comes from
    /// generator `j % streams`.
    pub(crate) fn draw(&mut self, p: usize, count: usize) -> Vec<u32> {
        let (w, streams) = (self.width(), self.streams);
        let lane = &mut self.words[p * w..(p + 1) * w];
        (0..count).map(|j| step(&mut lane[(j % streams) * WORDS..][..WORDS])).collect()
    }
}

/// One XORWOW step of the generator `g` (`x, y, z, w, v, d`).
fn step(g: &mut [u32]) -> u32 {
    let t = g[0] ^ (g[0] >> 2);
    let v = (g[4] ^ (g[4] << 4)) ^ (t ^ (t << 1));
    let d = g[5].wrapping_add(WEYL);
    g.copy_from_slice(&[g[1], g[2], g[3], g[4], v, d]);
    v.wrapping_add(d)
}

/// A draw as a uniform float in [0, 1): its top 24 bits times 2^-24 (exact in f32).
pub(crate) fn uniform(bits: u32) -> f32 {
    (bits >> 8) as f32 * (1.0 / 16_777_216.0)
}
