//! Float64 decode attention (`attention_tkg`'s math), written from the
//! documented semantics to check the kernel against.
//!
//! Batch `b`, query head `h` and active token `t` attend to the `curr_sprior`
//! positions of the cache: position `j < curr_sprior - s_active` holds
//! `k_prior[b, 0, j]` / `v_prior[b, 0, j]`, the last `s_active` hold the active
//! keys and values. Key `j` is visible when `mask[j, b, h, t] != 0`. The logit is
//! the plain dot product `q·k` (the caller scales `q`); a sink adds
//! `exp(sink[h])` to the softmax denominator. Inputs use the kernel's layouts
//! (see [`Shape`]); the output is `[bs, q_head, d, s_active]`.
//!
//! With the library's fused RoPE, [`rope`] rotates `q` and `k_active` first (and
//! `q` is scaled by `1/sqrt(d)`); with its `use_pos_id`, [`position_mask`] makes
//! the mask from the positions.

/// The sizes of one decode step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Batch.
    pub bs: usize,
    /// Query heads sharing the KV head.
    pub q_head: usize,
    /// Active tokens per sequence.
    pub s_active: usize,
    /// Cache positions in use (the active tokens are the last `s_active`).
    pub curr_sprior: usize,
    /// Cache capacity (the sequence length of `k_prior` / `v_prior`).
    pub full_sprior: usize,
    /// Head dimension.
    pub d: usize,
    /// Cache batches (`B+ >= bs`).
    pub cache_bs: usize,
}

/// The inputs of one decode step in the kernel's layouts: `q` `(d, bs·q_head·s_active)`,
/// `k_active` `(d, bs·s_active)`, `v_active` `(bs, 1, s_active, d)`, `k_prior`
/// `(B+, 1, d, full)` (`(B+, 1, full, d)` when `tp_k_prior`), `v_prior`
/// `(B+, 1, full, d)`, `mask` `(curr_sprior, bs, q_head, s_active)`, `sink` `(q_head, 1)`.
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    /// Queries.
    pub q: &'a [f64],
    /// Active keys.
    pub k_active: &'a [f64],
    /// Active values.
    pub v_active: &'a [f64],
    /// Cached keys.
    pub k_prior: &'a [f64],
    /// Cached values.
    pub v_prior: &'a [f64],
    /// Visibility (nonzero: visible).
    pub mask: &'a [f64],
    /// Sink logits per head.
    pub sink: Option<&'a [f64]>,
    /// `k_prior` is `(B+, 1, full, d)`.
    pub tp_k_prior: bool,
}

/// Decode attention output `[bs, q_head, d, s_active]`. A query that sees no key
/// and has no sink outputs zeros.
pub fn decode(x: &Inputs<'_>, s: Shape) -> Vec<f64> {
    let Shape { bs, q_head, s_active: sa, curr_sprior: sk, full_sprior: full, d, .. } = s;
    let split = sk - sa;
    let key = |b: usize, j: usize, e: usize| -> f64 {
        if j < split {
            if x.tp_k_prior { x.k_prior[(b * full + j) * d + e] } else { x.k_prior[(b * d + e) * full + j] }
        } else {
            x.k_active[e * bs * sa + b * sa + (j - split)]
        }
    };
    let value = |b: usize, j: usize, e: usize| -> f64 {
        if j < split { x.v_prior[(b * full + j) * d + e] } else { x.v_active[(b * sa + (j - split)) * d + e] }
    };
    let mut out = vec![0.0; bs * q_head * d * sa];
    let mut logits = vec![0.0; sk];
    for b in 0..bs {
        for h in 0..q_head {
            for t in 0..sa {
                let col = (b * q_head + h) * sa + t;
                let mut max = x.sink.map_or(f64::NEG_INFINITY, |sink| sink[h]);
                for (j, l) in logits.iter_mut().enumerate() {
                    let visible = x.mask[((j * bs + b) * q_head + h) * sa + t] != 0.0;
                    *l = if visible { (0..d).map(|e| x.q[e * bs * q_head * sa + col] * key(b, j, e)).sum() } else { f64::NEG_INFINITY };
                    max = max.max(*l);
                }
                if max == f64::NEG_INFINITY {
                    continue;
                }
                let mut denom = x.sink.map_or(0.0, |sink| (sink[h] - max).exp());
                let mut acc = vec![0.0; d];
                for (j, &l) in logits.iter().enumerate() {
                    let p = (l - max).exp();
                    denom += p;
                    if p != 0.0 {
                        for (e, a) in acc.iter_mut().enumerate() {
                            *a += p * value(b, j, e);
                        }
                    }
                }
                for (e, a) in acc.iter().enumerate() {
                    out[((b * q_head + h) * d + e) * sa + t] = a / denom;
                }
            }
        }
    }
    out
}

/// Rotary position embedding of columns `x` `(d, cols)` (column `c` belongs to
/// active token `token_of(c)`, an index into `pos`): the pair `(e, e + d/2)` is
/// rotated by the angle `inv_freqs[e] · pos[token]`, as `x·cos + rotate_half(x)·sin`
/// with `rotate_half(x) = (-x[d/2..], x[..d/2])`.
pub fn rope(x: &[f64], d: usize, inv_freqs: &[f64], pos: &[f64], token_of: impl Fn(usize) -> usize) -> Vec<f64> {
    let cols = x.len() / d;
    let half = d / 2;
    let mut out = vec![0.0; x.len()];
    for c in 0..cols {
        let p = pos[token_of(c)];
        for e in 0..half {
            let (sin, cos) = (inv_freqs[e] * p).sin_cos();
            let (lo, hi) = (x[e * cols + c], x[(e + half) * cols + c]);
            out[e * cols + c] = lo * cos - hi * sin;
            out[(e + half) * cols + c] = hi * cos + lo * sin;
        }
    }
    out
}

/// The `(curr_sprior, bs, q_head, s_active)` mask the library's `use_pos_id`
/// describes: cached key `j < curr_sprior - s_active` is visible to token `t` of
/// batch `b` when `j < end[b, 0]` — or, with a sliding window `start`, when
/// `start[b, t] <= j < end[b, t]` (a window wrapping around the cache,
/// `start > end`: `j >= start or j < end`); the active keys keep `active`,
/// `(s_active, bs, q_head, s_active)`, when it is given (else the rule covers them too).
pub fn position_mask(s: Shape, end: &[f64], start: Option<&[f64]>, active: Option<&[f64]>) -> Vec<f64> {
    let Shape { bs, q_head, s_active: sa, curr_sprior: sk, .. } = s;
    let split = if active.is_some() { sk - sa } else { sk };
    let mut mask = vec![0.0; sk * bs * q_head * sa];
    for j in 0..sk {
        for b in 0..bs {
            for h in 0..q_head {
                for t in 0..sa {
                    let i = ((j * bs + b) * q_head + h) * sa + t;
                    let k = j as f64;
                    mask[i] = if let Some(a) = active.filter(|_| j >= split) {
                        a[(((j - split) * bs + b) * q_head + h) * sa + t]
                    } else if let Some(st) = start {
                        let (lo, hi) = (st[b * sa + t], end[b * sa + t]);
                        let seen = if lo <= hi { lo <= k && k < hi } else { k >= lo || k < hi };
                        f64::from(u8::from(seen))
                    } else {
                        f64::from(u8::from(k < end[b * sa]))
                    };
                }
            }
        }
    }
    mask
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_visible_key_returns_its_value_and_a_sink_dilutes_it() {
        // bs 1, one head, one active token, 128 positions: only the active key (the last) is visible.
        let s = Shape { bs: 1, q_head: 1, s_active: 1, curr_sprior: 128, full_sprior: 128, d: 2, cache_bs: 1 };
        let mut mask = vec![0.0; 128];
        mask[127] = 1.0;
        let v_active = [3.0, -1.0];
        let x = Inputs {
            q: &[1.0, 1.0],
            k_active: &[0.0, 0.0],
            v_active: &v_active,
            k_prior: &vec![5.0; 256],
            v_prior: &vec![9.0; 256],
            mask: &mask,
            sink: None,
            tp_k_prior: false,
        };
        assert_eq!(decode(&x, s), vec![3.0, -1.0]);
        // A sink logit of 0 next to the visible logit 0 halves the output.
        let half = decode(&Inputs { sink: Some(&[0.0]), ..x }, s);
        assert_eq!(half, vec![1.5, -0.5]);
    }

    #[test]
    fn rope_turns_each_pair_by_its_angle_and_masks_follow_positions() {
        // d 2, one column at position 2 with inverse frequency pi/4: a quarter turn.
        let r = rope(&[1.0, 0.0], 2, &[std::f64::consts::FRAC_PI_4], &[2.0], |_| 0);
        assert!((r[0] - 0.0).abs() < 1e-15 && (r[1] - 1.0).abs() < 1e-15, "{r:?}");
        // 128 positions, one active token: the prefix [0, 3), or the window [126, 3) wrapping around.
        let s = Shape { bs: 1, q_head: 1, s_active: 1, curr_sprior: 128, full_sprior: 128, d: 2, cache_bs: 1 };
        let m = position_mask(s, &[3.0], None, Some(&[1.0]));
        let seen: Vec<usize> = (0..128).filter(|&j| m[j] != 0.0).collect();
        assert_eq!(seen, [0, 1, 2, 127]);
        let m = position_mask(s, &[3.0], Some(&[126.0]), Some(&[0.0]));
        let seen: Vec<usize> = (0..128).filter(|&j| m[j] != 0.0).collect();
        assert_eq!(seen, [0, 1, 2, 126]);
    }
}
