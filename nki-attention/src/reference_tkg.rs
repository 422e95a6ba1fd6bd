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
}
