//! A Llama-style decoder layer in float64, written from the model's definition:
//!
//! ```text
//! h   = x + o_proj(attention(rope(q), rope(k), v))   with q, k, v = rmsnorm(x) · W_qkv
//! out = h + down(silu(rmsnorm(h) · W_gate) ⊙ (rmsnorm(h) · W_up))
//! ```
//!
//! Attention is causal grouped-query attention over a KV cache: token `t`
//! attends to every cached position and itself. RoPE is the rotate-half form
//! (`x·cos + rotate_half(x)·sin`, frequency `θ^(-2i/d)` for pair `i`).
//! Activations are row-major `[tokens, features]`.

/// The layer's shapes.
#[derive(Clone, Copy, Debug)]
pub struct Dims {
    pub hidden: usize,
    pub q_heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub intermediate: usize,
}

impl Dims {
    /// Columns of the fused QKV projection: the query heads, then the key heads,
    /// then the value heads.
    pub fn qkv_cols(&self) -> usize {
        (self.q_heads + 2 * self.kv_heads) * self.head_dim
    }
}

/// RMSNorm epsilon and RoPE base of the layer.
pub const EPS: f64 = 1e-6;
pub const ROPE_THETA: f64 = 10_000.0;

/// The layer's weights, row-major: `w_qkv [hidden, qkv_cols]`, `w_o [q_heads·d, hidden]`,
/// `w_gate`, `w_up [hidden, intermediate]`, `w_down [intermediate, hidden]`.
pub struct Weights {
    pub attn_norm: Vec<f64>,
    pub w_qkv: Vec<f64>,
    pub w_o: Vec<f64>,
    pub mlp_norm: Vec<f64>,
    pub w_gate: Vec<f64>,
    pub w_up: Vec<f64>,
    pub w_down: Vec<f64>,
}

/// The keys (after RoPE) and values of every position seen so far, per KV head:
/// `k[h][pos]`, `v[h][pos]`, each `head_dim` long.
#[derive(Clone, Default)]
pub struct KvCache {
    pub k: Vec<Vec<Vec<f64>>>,
    pub v: Vec<Vec<Vec<f64>>>,
}

impl KvCache {
    /// Positions cached.
    pub fn len(&self) -> usize {
        self.k.first().map_or(0, Vec::len)
    }
}

/// `x · gamma / sqrt(mean(x²) + eps)` per row.
pub fn rmsnorm(x: &[f64], gamma: &[f64]) -> Vec<f64> {
    x.chunks(gamma.len())
        .flat_map(|row| {
            let inv = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / row.len() as f64 + EPS).sqrt();
            row.iter().zip(gamma).map(move |(v, g)| v * inv * g)
        })
        .collect()
}

/// `[m, k] · [k, n]`, in float64 (matrixmultiply's dgemm: the emulator's
/// matmuls are its own fp32 code, so this shares nothing with them).
pub fn matmul(a: &[f64], b: &[f64], k: usize, n: usize) -> Vec<f64> {
    let m = a.len() / k;
    let mut out = vec![0.0; m * n];
    let (k_s, n_s) = (isize::try_from(k).unwrap_or(isize::MAX), isize::try_from(n).unwrap_or(isize::MAX));
    // SAFETY: `a` holds m·k, `b` k·n and `out` m·n row-major values, as the strides say.
    unsafe { matrixmultiply::dgemm(m, k, n, 1.0, a.as_ptr(), k_s, 1, b.as_ptr(), n_s, 1, 0.0, out.as_mut_ptr(), n_s, 1) };
    out
}

/// `(cos, sin)` of pair `i` at position `pos`.
pub fn rope_angle(pos: usize, i: usize, head_dim: usize) -> (f64, f64) {
    let angle = pos as f64 * ROPE_THETA.powf(-2.0 * i as f64 / head_dim as f64);
    (angle.cos(), angle.sin())
}

/// One head vector rotated to `pos`: element `i` of the first half pairs with
/// element `i` of the second half.
pub fn rope(x: &[f64], pos: usize) -> Vec<f64> {
    let half = x.len() / 2;
    let mut out = vec![0.0; x.len()];
    for i in 0..half {
        let (c, s) = rope_angle(pos, i, x.len());
        out[i] = x[i] * c - x[i + half] * s;
        out[i + half] = x[i + half] * c + x[i] * s;
    }
    out
}

/// `x · sigmoid(x)`.
pub fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

/// Runs `x` (`[tokens, hidden]`, at positions `cache.len()..`) through the layer,
/// appending the tokens' keys and values to `cache`; returns the layer's output.
pub fn layer(x: &[f64], w: &Weights, dims: &Dims, cache: &mut KvCache) -> Vec<f64> {
    let Dims { hidden, q_heads, kv_heads, head_dim: d, intermediate } = *dims;
    let tokens = x.len() / hidden;
    let start = cache.len();
    cache.k.resize(kv_heads, Vec::new());
    cache.v.resize(kv_heads, Vec::new());
    let qkv = matmul(&rmsnorm(x, &w.attn_norm), &w.w_qkv, hidden, dims.qkv_cols());
    let head = |t: usize, h: usize| &qkv[t * dims.qkv_cols() + h * d..][..d];
    let mut attn = vec![0.0; tokens * q_heads * d];
    for t in 0..tokens {
        for h in 0..kv_heads {
            cache.k[h].push(rope(head(t, q_heads + h), start + t));
            cache.v[h].push(head(t, q_heads + kv_heads + h).to_vec());
        }
        for h in 0..q_heads {
            let (keys, values) = (&cache.k[h / (q_heads / kv_heads)], &cache.v[h / (q_heads / kv_heads)]);
            let q = rope(head(t, h), start + t);
            let visible = start + t + 1;
            let logits: Vec<f64> =
                keys[..visible].iter().map(|k| q.iter().zip(k).map(|(a, b)| a * b).sum::<f64>() / (d as f64).sqrt()).collect();
            let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = logits.iter().map(|l| (l - max).exp()).collect();
            let total: f64 = weights.iter().sum();
            let out = &mut attn[(t * q_heads + h) * d..][..d];
            for (p, v) in weights.iter().zip(values) {
                out.iter_mut().zip(v).for_each(|(o, v)| *o += p / total * v);
            }
        }
    }
    let h: Vec<f64> = x.iter().zip(matmul(&attn, &w.w_o, q_heads * d, hidden)).map(|(a, b)| a + b).collect();
    let hn = rmsnorm(&h, &w.mlp_norm);
    let gate = matmul(&hn, &w.w_gate, hidden, intermediate);
    let up = matmul(&hn, &w.w_up, hidden, intermediate);
    let act: Vec<f64> = gate.iter().zip(&up).map(|(g, u)| silu(*g) * u).collect();
    h.iter().zip(matmul(&act, &w.w_down, intermediate, hidden)).map(|(a, b)| a + b).collect()
}
