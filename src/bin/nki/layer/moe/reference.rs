//! A Mixtral-style sparse mixture-of-experts block in float64, written from the
//! model's definition:
//!
//! ```text
//! p   = softmax(x · W_router)                     over the experts, per token
//! sel = the top_k experts of p, their p divided by their sum
//! out = Σ_{e ∈ sel} p_e · (silu(x · W_gate,e) ⊙ (x · W_up,e)) · W_down,e
//! ```
//!
//! Activations are row-major `[tokens, hidden]`; each expert's weights are
//! separate row-major matrices.

use crate::layer::reference::{matmul, silu};

/// The block's shapes.
#[derive(Clone, Copy, Debug)]
pub struct MoeDims {
    pub hidden: usize,
    pub intermediate: usize,
    pub experts: usize,
    pub top_k: usize,
}

/// The router `[hidden, experts]` and, per expert, `gate` and `up`
/// `[hidden, intermediate]` and `down` `[intermediate, hidden]`.
pub struct MoeWeights {
    pub router: Vec<f64>,
    pub gate: Vec<Vec<f64>>,
    pub up: Vec<Vec<f64>>,
    pub down: Vec<Vec<f64>>,
}

/// The block's result: each token's weight on every expert (zero off its
/// top-k) `[tokens, experts]`, and the output `[tokens, hidden]`.
pub struct Routed {
    pub affinities: Vec<f64>,
    pub out: Vec<f64>,
}

/// Runs the tokens `x` through the block.
pub fn moe(x: &[f64], w: &MoeWeights, dims: &MoeDims) -> Routed {
    let MoeDims { hidden, intermediate, experts, top_k } = *dims;
    let logits = matmul(x, &w.router, hidden, experts);
    let mut affinities = vec![0.0; logits.len()];
    let mut out = vec![0.0; x.len()];
    for (t, row) in logits.chunks(experts).enumerate() {
        let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let p: Vec<f64> = row.iter().map(|l| (l - max).exp()).collect();
        // Highest probability first; the softmax's sum cancels in the renormalisation.
        let mut order: Vec<usize> = (0..experts).collect();
        order.sort_by(|&a, &b| p[b].total_cmp(&p[a]));
        let chosen = &order[..top_k];
        let total: f64 = chosen.iter().map(|&e| p[e]).sum();
        let xt = &x[t * hidden..][..hidden];
        for &e in chosen {
            let weight = p[e] / total;
            affinities[t * experts + e] = weight;
            let (gate, up) = (matmul(xt, &w.gate[e], hidden, intermediate), matmul(xt, &w.up[e], hidden, intermediate));
            let act: Vec<f64> = gate.iter().zip(&up).map(|(g, u)| silu(*g) * u).collect();
            let y = matmul(&act, &w.down[e], intermediate, hidden);
            out[t * hidden..][..hidden].iter_mut().zip(y).for_each(|(o, y)| *o += weight * y);
        }
    }
    Routed { affinities, out }
}
