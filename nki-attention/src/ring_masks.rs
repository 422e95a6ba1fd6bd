//! Which keys a ring step may show a query: the masks past causality (sliding
//! window `(L, R)`, chunks) and the zigzag layout, as DSL helpers both ring
//! kernels share.
//!
//! Every mask keeps, for a query at global position `q`, the keys `k` of one
//! interval: `max(q - L, chunk start) <= k <= min(q (causal), q + R, chunk end)`.
//! Every layout maps a rank's local tokens to global positions monotonically
//! (contiguous `r·S + i`; striped `i·W + r`; zigzag chunks `r` then `2W-1-r` of
//! `S/2` tokens), so the interval is also one interval of local key indices:
//! [`key_bounds`] computes it per query row on the vector engine, in fp32 (exact
//! for positions below 2^22), and `attention_cte`'s `range_select` keeps
//! `lower <= j < upper`. [`step_needed`] decides at trace time whether any rank
//! sees any key of the block that arrives at a ring step, so the kernels skip the
//! steps nobody needs, and [`last_needed_step`] how far the ring must turn.

use nki::prelude::*;

pub use masks::*;

/// The key bounds and step skipping of the ring's masks.
#[nki_module]
pub mod masks {
    use crate::ring_features::RingAttnFeatures;
    use nki::prelude::*;

    /// Whether the queries of ring position `me` see any key of position `p`, for
    /// global runs `[a1, b1]` of queries and `[a2, b2]` of keys: the key offsets
    /// `k - q` span `[a2 - b1, b2 - a1]`, which must meet `[-left, right]`, and the
    /// runs must share a chunk.
    #[nki_helper]
    fn runs_meet(a1: i64, b1: i64, a2: i64, b2: i64, left: i64, right: i64, chunk: i64) -> bool {
        let offsets = a2 - b1 <= right && b2 - a1 >= -left;
        let chunks = chunk == 0 || (a2 / chunk <= b1 / chunk && a1 / chunk <= b2 / chunk);
        offsets && chunks
    }

    /// Whether some rank sees some key at ring step `t` (the block of position
    /// `(me - t) mod W` visiting position `me`), under the masks of `ring` (the
    /// causal mask, its window, its chunks) for `s` tokens per rank. Striped
    /// blocks interleave: the key offsets nearest 0 are `p - me` and that minus
    /// or plus `W` (chunks are not used to skip there).
    #[nki_helper]
    pub fn step_needed(t: i64, ring: RingAttnFeatures, s: i64) -> bool {
        let (striped, zigzag, w, causal) = (ring.striped, ring.zigzag, ring.num_workers, ring.causal);
        let (left, right, chunk) = (ring.window_left, ring.window_right, ring.chunk);
        let far = w * s;
        let lft = if left < 0 { far } else { left };
        let rgt0 = if right < 0 { far } else { right };
        let rgt = if causal { 0 } else { rgt0 };
        let half = s / 2;
        let mut needed = false;
        for me in 0..w {
            let p = (me - t + w) % w;
            if striped {
                let d0 = p - me;
                let neg = if d0 <= 0 { d0 } else { d0 - w };
                let pos = if d0 <= 0 { d0 + w } else { d0 };
                if neg >= -lft || pos <= rgt {
                    needed = true;
                }
            } else if zigzag {
                // Each rank holds chunks r and 2W-1-r of S/2 tokens.
                for qi in 0..2 {
                    let qa = if qi == 0 { me * half } else { (2 * w - 1 - me) * half };
                    for ki in 0..2 {
                        let ka = if ki == 0 { p * half } else { (2 * w - 1 - p) * half };
                        if runs_meet(qa, qa + half - 1, ka, ka + half - 1, lft, rgt, chunk) {
                            needed = true;
                        }
                    }
                }
            } else if runs_meet(me * s, me * s + s - 1, p * s, p * s + s - 1, lft, rgt, chunk) {
                needed = true;
            }
        }
        needed
    }

    /// The last ring step any rank needs (0: only the local block), so the ring turns
    /// that many times instead of `W - 1`.
    #[nki_helper]
    pub fn last_needed_step(ring: RingAttnFeatures, s: i64) -> i64 {
        let mut last = 0;
        for t in 1..ring.num_workers {
            if step_needed(t, ring, s) {
                last = t;
            }
        }
        last
    }

    /// `[128, S / 128]` fp32 global positions of the local tokens of ring position
    /// `pos` (a `(128, 1)` column) in the layout of `ring`: row `128 g + p` at `[p, g]`.
    #[nki_helper]
    pub fn row_positions(pos: Sbuf, ring: RingAttnFeatures, s: i64) -> Sbuf {
        let (striped, zigzag, w) = (ring.striped, ring.zigzag, ring.num_workers);
        let n_grp = s / 128;
        let rows = nl::ndarray([128, n_grp], nl::float32, buffer = nl::sbuf);
        nisa::iota(rows, [[128, n_grp]], channel_multiplier = 1);
        let g = nl::ndarray([128, n_grp], nl::float32, buffer = nl::sbuf);
        if striped {
            nisa::tensor_scalar(g, rows, nl::multiply, w as f64, op1 = nl::add, operand1 = pos);
        } else if zigzag {
            // i + a0, plus b0 - a0 - S/2 for the second chunk (i >= S/2).
            let half = (s / 2) as f64;
            let (a0, b0): (Sbuf, Sbuf) = zigzag_starts(pos, w, s);
            let jump = nl::ndarray([128, 1], nl::float32, buffer = nl::sbuf);
            nisa::tensor_tensor(jump, b0, a0, nl::subtract);
            nisa::tensor_scalar(jump, jump, nl::subtract, half);
            let second = nl::ndarray([128, n_grp], nl::float32, buffer = nl::sbuf);
            nisa::tensor_scalar(second, rows, nl::greater_equal, half, op1 = nl::multiply, operand1 = jump);
            nisa::tensor_scalar(g, rows, nl::add, a0);
            nisa::tensor_tensor(g, g, second, nl::add);
        } else {
            let start = nl::ndarray([128, 1], nl::float32, buffer = nl::sbuf);
            nisa::tensor_scalar(start, pos, nl::multiply, s as f64);
            nisa::tensor_scalar(g, rows, nl::add, start);
        }
        g
    }

    /// The global positions where the two zigzag chunks of ring position `pos` (a
    /// `(128, 1)` column) start: `a0 = pos·S/2` and `b0 = (2W - 1 - pos)·S/2`.
    #[nki_helper]
    fn zigzag_starts(pos: Sbuf, w: i64, s: i64) -> (Sbuf, Sbuf) {
        let half = (s / 2) as f64;
        let a0 = nl::ndarray([128, 1], nl::float32, buffer = nl::sbuf);
        nisa::tensor_scalar(a0, pos, nl::multiply, half);
        let b0 = nl::ndarray([128, 1], nl::float32, buffer = nl::sbuf);
        nisa::tensor_scalar(b0, pos, nl::multiply, -half, op1 = nl::add, operand1 = ((2 * w - 1) * (s / 2)) as f64);
        (a0, b0)
    }

    /// `C·floor(x / C)` of non-negative integer-valued fp32 positions below 2^22:
    /// `x / C` is moved half a step down (never past an integer) and rounded by
    /// adding and subtracting `1.5·2^23` (each result stored in fp32).
    #[nki_helper]
    fn chunk_start(x: Sbuf, chunk: i64) -> Sbuf {
        let c = chunk as f64;
        let t = nl::ndarray(x.shape(), nl::float32, buffer = nl::sbuf);
        nisa::tensor_scalar(t, x, nl::multiply, 1.0 / c, op1 = nl::add, operand1 = 0.5 / c - 0.5);
        nisa::tensor_scalar(t, t, nl::add, 12_582_912.0);
        nisa::tensor_scalar(t, t, nl::subtract, 12_582_912.0, op1 = nl::multiply, operand1 = c);
        t
    }

    /// `a + m·(b - a)`: `b` where the 0/1 tile `m` is 1, else `a` (into `a`).
    #[nki_helper]
    fn blend(a: Sbuf, b: Sbuf, m: Sbuf) {
        let d = nl::ndarray(a.shape(), nl::float32, buffer = nl::sbuf);
        nisa::tensor_tensor(d, b, a, nl::subtract);
        nisa::tensor_tensor(d, d, m, nl::multiply);
        nisa::tensor_tensor(a, a, d, nl::add);
    }

    /// The local key indices `[lower, upper)` of ring position `kpos` (a `(128, 1)`
    /// column) visible to queries at global positions `qg` (`[128, n]`), under the
    /// masks of `ring` (the causal mask, its window, its chunks) for `s` tokens per rank.
    #[nki_helper]
    pub fn key_bounds(qg: Sbuf, kpos: Sbuf, ring: RingAttnFeatures, s: i64) -> (Sbuf, Sbuf) {
        let (striped, zigzag, w, causal) = (ring.striped, ring.zigzag, ring.num_workers, ring.causal);
        let (left, right, chunk) = (ring.window_left, ring.window_right, ring.chunk);
        let shape = qg.shape();
        // The global interval [lo, hi] of visible keys.
        let lo = nl::ndarray(shape, nl::float32, buffer = nl::sbuf);
        let hi = nl::ndarray(shape, nl::float32, buffer = nl::sbuf);
        if left >= 0 {
            nisa::tensor_scalar(lo, qg, nl::subtract, left as f64, op1 = nl::maximum, operand1 = 0.0);
        } else {
            nisa::memset(lo, 0.0);
        }
        if causal {
            nisa::tensor_copy(hi, qg);
        } else if right >= 0 {
            nisa::tensor_scalar(hi, qg, nl::add, right as f64);
        } else {
            nisa::memset(hi, (w * s - 1) as f64);
        }
        if chunk > 0 {
            let start: Sbuf = chunk_start(qg, chunk);
            nisa::tensor_tensor(lo, lo, start, nl::maximum);
            nisa::tensor_scalar(start, start, nl::add, (chunk - 1) as f64);
            nisa::tensor_tensor(hi, hi, start, nl::minimum);
        }
        // The same interval in local key indices, the upper end exclusive.
        let lower = nl::ndarray(shape, nl::float32, buffer = nl::sbuf);
        let upper = nl::ndarray(shape, nl::float32, buffer = nl::sbuf);
        if striped {
            // j·W + kpos in [lo, hi]  <=>  (lo - kpos) / W <= j < (hi + 1 - kpos) / W.
            nisa::tensor_scalar(lower, lo, nl::subtract, kpos, op1 = nl::multiply, operand1 = 1.0 / w as f64);
            nisa::tensor_scalar(upper, hi, nl::subtract, kpos, op1 = nl::add, operand1 = 1.0);
            nisa::tensor_scalar(upper, upper, nl::multiply, 1.0 / w as f64);
        } else if zigzag {
            let half = (s / 2) as f64;
            let (a0, b0): (Sbuf, Sbuf) = zigzag_starts(kpos, w, s);
            let m = nl::ndarray(shape, nl::float32, buffer = nl::sbuf);
            let alt = nl::ndarray(shape, nl::float32, buffer = nl::sbuf);
            // lower: lo - a0 while lo is in the first chunk, else S/2 + max(lo - b0, 0).
            nisa::tensor_scalar(lower, lo, nl::subtract, a0);
            nisa::tensor_scalar(alt, lo, nl::subtract, b0, op1 = nl::maximum, operand1 = 0.0);
            nisa::tensor_scalar(alt, alt, nl::add, half);
            nisa::tensor_scalar(m, lower, nl::greater_equal, half);
            blend(lower, alt, m);
            // upper: S/2 + hi + 1 - b0 once hi reaches the second chunk, else min(hi + 1 - a0, S/2).
            nisa::tensor_scalar(upper, hi, nl::subtract, a0, op1 = nl::add, operand1 = 1.0);
            nisa::tensor_scalar(upper, upper, nl::minimum, half);
            nisa::tensor_scalar(alt, hi, nl::subtract, b0, op1 = nl::add, operand1 = half + 1.0);
            nisa::tensor_scalar(m, hi, nl::subtract, b0, op1 = nl::greater_equal, operand1 = 0.0);
            blend(upper, alt, m);
        } else {
            let start = nl::ndarray([128, 1], nl::float32, buffer = nl::sbuf);
            nisa::tensor_scalar(start, kpos, nl::multiply, s as f64);
            nisa::tensor_scalar(lower, lo, nl::subtract, start);
            nisa::tensor_scalar(upper, hi, nl::subtract, start, op1 = nl::add, operand1 = 1.0);
        }
        (lower, upper)
    }
}
