//! The decoder-layer part of `nki demo` and `nki bench`: one Llama-shaped layer
//! (RMSNorm, fused QKV projection, RoPE, grouped-query attention, output
//! projection, residual, RMSNorm, SwiGLU MLP, residual) built from the NKI
//! library's kernels written in the DSL, checked against the float64 layer of
//! [`reference`].
//!
//! ```text
//! prefill, PROMPT tokens:  qkv_cte (fused RMSNorm) → rope_hf → attention_cte (causal, GQA)
//!                          → output_projection_cte → mlp (fused residual add + RMSNorm, SwiGLU)
//! decode, one token/step:  qkv_tkg → attention_tkg (fused RoPE, over the cache the prefill
//!                          wrote) → output_projection_tkg → mlp
//! ```
//!
//! Between kernels the host only reshapes (heads to the layout the next kernel
//! takes), writes the KV cache and adds the last residual. The prompt's QKV
//! projection and MLP are the library's context-encoding kernels (`qkv_cte`,
//! `mlp` on its `mlp_cte` path), a decode step's its token-generation ones.

pub mod moe;
mod reference;
mod stages;

use crate::demo::{normal, rounded};
use nki::{Dtype, NkiError, Precision, Tensor};
pub use reference::Dims;
use reference::{KvCache, Weights};
use stages::Device;
pub use stages::Stage;

/// The layer: hidden 2048, 16 query heads on 4 KV heads of 128, SwiGLU of 5632.
pub const DIMS: Dims = Dims { hidden: 2048, q_heads: 16, kv_heads: 4, head_dim: 128, intermediate: 5632 };
/// Prompt tokens (one sequence) and decode steps after it.
pub const PROMPT: usize = 256;
pub const STEPS: usize = 4;

/// The layer's shape and run in words, for the tables that report it.
pub fn describe() -> String {
    let Dims { hidden, q_heads, kv_heads, head_dim, intermediate } = DIMS;
    format!(
        "hidden {hidden}, {q_heads} query heads on {kv_heads} KV heads of {head_dim}, SwiGLU {intermediate}; a {PROMPT}-token prompt, then {STEPS} decode steps"
    )
}

/// One checked output: its largest error, the bound it must stay under, and the
/// emulator's seconds for the kernels that produced it.
pub struct Checked {
    pub what: String,
    pub err: f64,
    pub bound: f64,
    pub secs: f64,
}

/// A prefill and its decode steps, checked, with every kernel call's timings.
pub struct LayerRun {
    pub checks: Vec<Checked>,
    pub stages: Vec<Stage>,
    /// Emulator seconds of the prefill's and the decode steps' kernels.
    pub prefill_secs: f64,
    pub decode_secs: f64,
}

/// `max |got - want|` against `atol + rtol · max |want|` of the precision mode.
fn check(what: String, got: &[f64], want: &[f64], precision: Precision, secs: f64) -> Checked {
    let err = got.iter().zip(want).map(|(&g, &w)| if g.is_finite() { (g - w).abs() } else { f64::INFINITY }).fold(0.0, f64::max);
    let max = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
    let bound = if precision == Precision::Fp32 { 1e-5 + 1e-5 * max } else { 1e-3 + 2e-2 * max };
    Checked { what, err, bound, secs }
}

/// Random weights scaled by `1/sqrt(fan_in)`, so activations stay near 1, and
/// norm gains near 1; rounded to `dtype`.
fn weights(dtype: Dtype) -> Weights {
    let Dims { hidden: h, q_heads, head_dim: d, intermediate: i, .. } = DIMS;
    let scaled = |n: usize, fan_in: usize, seed: u64| {
        rounded(&normal(n, seed).iter().map(|v| v / (fan_in as f64).sqrt()).collect::<Vec<_>>(), dtype)
    };
    let gain = |seed: u64| rounded(&normal(h, seed).iter().map(|v| 1.0 + 0.1 * v).collect::<Vec<_>>(), dtype);
    Weights {
        attn_norm: gain(31),
        w_qkv: scaled(h * DIMS.qkv_cols(), h, 32),
        w_o: scaled(q_heads * d * h, q_heads * d, 33),
        mlp_norm: gain(34),
        w_gate: scaled(h * i, h, 35),
        w_up: scaled(h * i, h, 36),
        w_down: scaled(i * h, i, 37),
    }
}

/// Runs the prompt and `STEPS` decode tokens through the layer on the emulator
/// in `precision` (inputs and weights in `dtype`), with the trn2 cost model
/// when `profiled`, and checks every output.
pub fn run(dtype: Dtype, precision: Precision, profiled: bool) -> Result<LayerRun, NkiError> {
    let h = DIMS.hidden;
    let w = weights(dtype);
    let prompt = rounded(&normal(PROMPT * h, 41), dtype);
    let tokens: Vec<Vec<f64>> = (0..STEPS as u64).map(|t| rounded(&normal(h, 42 + t), dtype)).collect();
    let mut device = Device::new(&w, dtype, precision, profiled)?;
    let mut cache = KvCache::default();
    let mut checks = Vec::new();

    let want = reference::layer(&prompt, &w, &DIMS, &mut cache);
    let got = device.prefill(&prompt)?;
    let prefill_secs = device.calls.stages.iter().map(|s| s.secs).sum();
    checks.push(check(format!("prefill, {PROMPT} tokens"), &got, &want, precision, prefill_secs));

    let mut decode_secs = 0.0;
    for (t, x) in tokens.iter().enumerate() {
        let want = reference::layer(x, &w, &DIMS, &mut cache);
        let before = device.calls.stages.len();
        let got = device.decode(x, PROMPT + t)?;
        let secs: f64 = device.calls.stages[before..].iter().map(|s| s.secs).sum();
        decode_secs += secs;
        checks.push(check(format!("decode step {}, position {}", t + 1, PROMPT + t), &got, &want, precision, secs));
    }
    Ok(LayerRun { checks, stages: device.calls.stages, prefill_secs, decode_secs })
}

/// `values` as a tensor of `shape` in `dtype`.
fn tensor(shape: &[usize], values: &[f64], dtype: Dtype) -> Result<Tensor, NkiError> {
    Tensor::from_f32(shape, &values.iter().map(|&v| v as f32).collect::<Vec<_>>(), dtype)
}
