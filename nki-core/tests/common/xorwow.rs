//! An XORWOW written from Marsaglia's "Xorshift RNGs" (2003) and SplitMix64 from
//! Steele, Lea and Flood (2014), seeded as documented in
//! `tests/python/nki_harness/SEMANTICS.md`: the reference for the random-number
//! instructions.

/// Marsaglia's xorwow: `t = x ^ (x >> 2); x = y; y = z; z = w; w = v;
/// v = (v ^ (v << 4)) ^ (t ^ (t << 1)); return (d += 362437) + v`.
#[derive(Clone, Copy)]
pub struct Xorwow(pub [u32; 6]);

impl Xorwow {
    pub fn next(&mut self) -> u32 {
        let [x, y, z, w, v, d] = self.0;
        let t = x ^ (x >> 2);
        let v2 = (v ^ (v << 4)) ^ (t ^ (t << 1));
        let d2 = d.wrapping_add(362_437);
        self.0 = [y, z, w, v, v2, d2];
        d2.wrapping_add(v2)
    }
}

/// SplitMix64: add the golden gamma, then the two multiply-xorshift rounds.
pub fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The documented seeding: word k of generator g of lane p from `seed`.
pub fn seeded(seed: u32, p: usize, g: usize) -> Xorwow {
    let mut w = [0u32; 6];
    for (k, word) in w.iter_mut().enumerate() {
        *word = splitmix64((u64::from(seed) << 32) + (p * 256 + g * 8 + k) as u64) as u32;
    }
    if w[..5].iter().all(|&x| x == 0) {
        w[0] = 1;
    }
    Xorwow(w)
}

/// Row-major draws for a `np x nf` tile from per-lane generators (`streams` per lane,
/// element j from generator j % streams).
pub fn draws(gens: &mut [Vec<Xorwow>], nf: usize) -> Vec<u32> {
    let mut out = Vec::new();
    for lane in gens.iter_mut() {
        let s = lane.len();
        out.extend((0..nf).map(|j| lane[j % s].next()));
    }
    out
}

pub fn seeded_lanes(seed: u32, np: usize, streams: usize) -> Vec<Vec<Xorwow>> {
    (0..np).map(|p| (0..streams).map(|g| seeded(seed, p, g)).collect()).collect()
}

pub fn uniform01(bits: u32) -> f64 {
    f64::from(bits >> 8) / 16_777_216.0
}
