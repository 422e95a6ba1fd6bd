//! The mixture-of-experts part of `nki demo` and `nki bench`: one decode step
//! of a Mixtral-shaped sparse MoE block (8 experts, the top 2 per token,
//! SwiGLU experts) from the NKI library's kernels written in the DSL, checked
//! against the float64 block of [`reference`].
//!
//! ```text
//! TOKENS tokens: router_topk (logits, softmax, top-k, renormalised, scattered to [T, E])
//!                → moe_tkg (selective: each token through its top-k experts, POST_SCALE)
//! ```
//!
//! The router's affinities and expert indices go to `moe_tkg` as they come
//! out, so a wrong routing shows in the output too.

mod reference;

use super::stages::{Calls, Stage, values};
use super::{Checked, check, tensor};
use crate::demo::{normal, rounded};
use nki::{Dtype, NkiError, Precision, Tensor};
use nkilib::moe::moe_tkg::moe_tkg::{ActFnType, ExpertAffinityScaleMode, moe_tkg};
use nkilib::router_topk::router_topk::{RouterActFnType, router_topk};
pub use reference::MoeDims;
use reference::MoeWeights;

/// The block: hidden 2048, 8 experts with SwiGLU of 1024, the top 2 per token.
pub const DIMS: MoeDims = MoeDims { hidden: 2048, intermediate: 1024, experts: 8, top_k: 2 };
/// `--quick`'s block: as many experts and the same routing, a quarter as wide.
pub const QUICK_DIMS: MoeDims = MoeDims { hidden: 512, intermediate: 256, ..DIMS };
/// Decode tokens of the step (one per sequence of a batch).
pub const TOKENS: usize = 4;
/// LNC of both kernels: the router splits the tokens over the programs,
/// `moe_tkg` the tokens or the hidden tiles.
const LNC: usize = 2;
/// `router_topk`'s `x_hbm_layout` for `[T, H]` activations.
const X_T_H: i64 = 1;

/// The block's shape and run in words, for the tables that report it.
pub fn describe(dims: &MoeDims) -> String {
    let MoeDims { hidden, intermediate, experts, top_k } = *dims;
    format!("hidden {hidden}, {experts} experts with SwiGLU {intermediate}, top-{top_k}; one decode step of {TOKENS} tokens")
}

/// The step, checked, with its kernel calls' timings.
pub struct MoeRun {
    pub checks: Vec<Checked>,
    pub stages: Vec<Stage>,
    /// Emulator seconds of the step's kernels.
    pub secs: f64,
}

/// Random weights scaled by `1/sqrt(fan_in)`, rounded to `dtype`.
fn weights(dims: &MoeDims, dtype: Dtype) -> MoeWeights {
    let MoeDims { hidden: h, intermediate: i, experts: e, .. } = *dims;
    let scaled = |n: usize, fan_in: usize, seed: u64| {
        rounded(&normal(n, seed).iter().map(|v| v / (fan_in as f64).sqrt()).collect::<Vec<_>>(), dtype)
    };
    let per_expert = |fan_in: usize, n: usize, seed: u64| (0..e as u64).map(|x| scaled(n, fan_in, seed + 3 * x)).collect();
    MoeWeights {
        router: scaled(h * e, h, 51),
        gate: per_expert(h, h * i, 52),
        up: per_expert(h, h * i, 53),
        down: per_expert(i, i * h, 54),
    }
}

/// The expert weights as `moe_tkg` takes them: gate and up interleaved,
/// `[E, H, 2, I]`, and `down` `[E, I, H]`.
fn expert_tensors(w: &MoeWeights, dims: &MoeDims, dtype: Dtype) -> Result<(Tensor, Tensor), NkiError> {
    let MoeDims { hidden: h, intermediate: i, experts: e, .. } = *dims;
    let gate_up: Vec<f64> =
        (0..e * h * 2 * i).map(|n| [&w.gate, &w.up][n / i % 2][n / (h * 2 * i)][(n / (2 * i) % h) * i + n % i]).collect();
    Ok((tensor(&[e, h, 2, i], &gate_up, dtype)?, tensor(&[e, i, h], &w.down.concat(), dtype)?))
}

/// Runs one decode step of `TOKENS` tokens through the block of `dims` on the
/// emulator in `precision` (inputs and weights in `dtype`), with the trn2
/// cost model when `profiled`, and checks the router's affinities and the
/// block's output.
pub fn run(dims: &MoeDims, dtype: Dtype, precision: Precision, profiled: bool) -> Result<MoeRun, NkiError> {
    let MoeDims { hidden: h, experts: e, top_k: k, .. } = *dims;
    let w = weights(dims, dtype);
    let x = rounded(&normal(TOKENS * h, 55), dtype);
    let want = reference::moe(&x, &w, dims);
    let (gate_up, down) = expert_tensors(&w, dims, dtype)?;
    let (xt, router) = (tensor(&[TOKENS, h], &x, dtype)?, tensor(&[h, e], &w.router, dtype)?);
    let (logits, aff, idx) =
        (Tensor::zeros(&[TOKENS, e], dtype)?, Tensor::zeros(&[TOKENS, e], dtype)?, Tensor::zeros(&[TOKENS, k], Dtype::I32)?);
    let mut calls = Calls::new(precision, profiled);
    // Mixtral's routing: softmax over every expert, then the top k renormalised.
    let routed = calls.call("moe", "router_topk", LNC, |l| {
        router_topk::Call::new(&xt, &router, &logits, &aff, &idx, RouterActFnType::SOFTMAX, k as i64, X_T_H, 0)
            .router_pre_norm(true)
            .norm_topk_prob(true)
            .shard_on_tokens(true)
            .launch(l)
    })?;
    let (idx, aff) = (&routed.0[1], &routed.0[2]);
    let out = calls.call("moe", "moe_tkg", LNC, |l| {
        moe_tkg::Call::new(&xt, &gate_up, &down, aff, idx, false)
            .expert_affinities_scaling_mode(ExpertAffinityScaleMode::POST_SCALE)
            .activation_fn(ActFnType::SiLU)
            .launch(l)
    })?;
    let [router_secs, moe_secs] = [0, 1].map(|n| calls.stages[n].secs);
    let checks = vec![
        check(format!("router affinities, {TOKENS} tokens"), &values(aff), &want.affinities, precision, router_secs),
        check(format!("MoE output, {TOKENS} tokens"), &values(&out), &want.out, precision, moe_secs),
    ];
    Ok(MoeRun { checks, secs: router_secs + moe_secs, stages: calls.stages })
}
