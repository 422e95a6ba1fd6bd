//! The layer's kernel calls and the host reshapes between them.

use super::reference::{Dims, EPS, ROPE_THETA, Weights, rope_angle};
use super::{DIMS, PROMPT, STEPS, tensor};
use nki::attention::cte::{CteConfig, CteInputs};
use nki::attention::tkg::{TkgConfig, TkgDims, TkgInputs};
use nki::profile::Target;
use nki::{Dtype, Launch, NkiError, Precision, Tensor};
use nkilib::embeddings::rope_hf::rope_hf;
use nkilib::mlp::mlp::{NormType, mlp};
use nkilib::output_projection::output_projection_cte::output_projection_cte::output_projection_cte;
use nkilib::output_projection::output_projection_tkg::output_projection_tkg;
use nkilib::qkv::qkv_cte::qkv_cte;
use nkilib::qkv::qkv_tkg::qkv_tkg;
use std::time::Instant;

/// Cache positions `attention_tkg` attends over (a multiple of 128; the last
/// one is the active token's).
const CACHE: usize = 384;
/// LNC of every kernel but `rope_hf`, whose sequence must split into 128-row
/// tiles per program.
const LNC: usize = 2;

/// One kernel call: the emulator's seconds and, when profiled, the trn2
/// estimate of `nki profile`.
pub struct Stage {
    pub phase: &'static str,
    pub kernel: &'static str,
    pub secs: f64,
    pub trn2_secs: Option<f64>,
}

/// Kernel calls in one precision mode, each recorded as a [`Stage`].
pub struct Calls {
    precision: Precision,
    profiled: bool,
    pub stages: Vec<Stage>,
}

impl Calls {
    /// Calls in `precision`, with the trn2 cost model when `profiled`.
    pub fn new(precision: Precision, profiled: bool) -> Calls {
        Calls { precision, profiled, stages: Vec::new() }
    }

    /// Runs one kernel call on a profiled launch of `lnc` programs and records it.
    pub fn call<T>(
        &mut self,
        phase: &'static str,
        kernel: &'static str,
        lnc: usize,
        f: impl FnOnce(&Launch) -> Result<T, NkiError>,
    ) -> Result<T, NkiError> {
        let launch = Launch::new().lnc(lnc).precision(self.precision);
        let launch = if self.profiled { launch.profile(Target::Trn2) } else { launch };
        let start = Instant::now();
        let out = f(&launch)?;
        let secs = start.elapsed().as_secs_f64();
        let trn2_secs = if self.profiled { Some(launch.profiled()?.report.estimated_seconds) } else { None };
        self.stages.push(Stage { phase, kernel, secs, trn2_secs });
        Ok(out)
    }
}

/// The layer's weights on the device and its KV cache, `(kv_heads, 1, d, CACHE)`
/// keys after RoPE and `(kv_heads, 1, CACHE, d)` values.
pub struct Device {
    dtype: Dtype,
    attn_norm: Tensor,
    w_qkv: Tensor,
    w_o: Tensor,
    mlp_norm: Tensor,
    w_gate: Tensor,
    w_up: Tensor,
    w_down: Tensor,
    inv_freqs: Tensor,
    k_cache: Vec<f64>,
    v_cache: Vec<f64>,
    pub calls: Calls,
}

impl Device {
    /// The weights in `dtype`; every kernel call runs in `precision`, with the
    /// trn2 cost model when `profiled`.
    pub fn new(w: &Weights, dtype: Dtype, precision: Precision, profiled: bool) -> Result<Device, NkiError> {
        let Dims { hidden: h, q_heads, kv_heads, head_dim: d, intermediate: i } = DIMS;
        let inv_freqs: Vec<f64> = (0..d / 2).map(|k| ROPE_THETA.powf(-2.0 * k as f64 / d as f64)).collect();
        Ok(Device {
            dtype,
            attn_norm: tensor(&[1, h], &w.attn_norm, dtype)?,
            w_qkv: tensor(&[h, DIMS.qkv_cols()], &w.w_qkv, dtype)?,
            w_o: tensor(&[q_heads * d, h], &w.w_o, dtype)?,
            mlp_norm: tensor(&[1, h], &w.mlp_norm, dtype)?,
            w_gate: tensor(&[h, i], &w.w_gate, dtype)?,
            w_up: tensor(&[h, i], &w.w_up, dtype)?,
            w_down: tensor(&[i, h], &w.w_down, dtype)?,
            inv_freqs: tensor(&[d / 2, 1], &inv_freqs, Dtype::F32)?,
            k_cache: vec![0.0; kv_heads * d * CACHE],
            v_cache: vec![0.0; kv_heads * CACHE * d],
            calls: Calls::new(precision, profiled),
        })
    }

    fn tensor(&self, shape: &[usize], values: &[f64]) -> Result<Tensor, NkiError> {
        tensor(shape, values, self.dtype)
    }

    /// The QKV projection with its fused RMSNorm, `[tokens, (q_heads + 2·kv_heads)·d]`:
    /// `qkv_cte` for the prompt, `qkv_tkg` for a decode step (the library's
    /// `qkv` entry chooses the same way).
    fn qkv(&mut self, phase: &'static str, x: &[f64]) -> Result<Vec<f64>, NkiError> {
        let hidden = self.tensor(&[1, x.len() / DIMS.hidden, DIMS.hidden], x)?;
        let (w, g) = (self.w_qkv.clone(), self.attn_norm.clone());
        if phase == "prefill" {
            let out = self.calls.call(phase, "qkv_cte", LNC, |l| {
                qkv_cte::Call::new(&hidden, &w).fused_norm_type(NormType::RMS_NORM).gamma_norm_weights(&g).norm_eps(EPS).launch(l)
            })?;
            return Ok(values(&out.0[0]));
        }
        let out = self.calls.call(phase, "qkv_tkg", LNC, |l| qkv_tkg::Call::new(&hidden, &w).norm_w(&g).eps(EPS).launch(l))?;
        Ok(values(&out.0[0]))
    }

    /// `mlp` with the residual add and RMSNorm fused: `x + o + mlp(norm(x + o))`
    /// (the last add on the host), one call for every token (the prompt's
    /// take the context-encoding path, a decode step's the decode path).
    fn mlp(&mut self, phase: &'static str, o: &[f64], x: &[f64]) -> Result<Vec<f64>, NkiError> {
        let h = DIMS.hidden;
        let shape = [1, o.len() / h, h];
        let (hidden, residual) = (self.tensor(&shape, o)?, self.tensor(&shape, x)?);
        let (g, wg, wu, wd) = (self.mlp_norm.clone(), self.w_gate.clone(), self.w_up.clone(), self.w_down.clone());
        let outs = self.calls.call(phase, "mlp", LNC, |l| {
            mlp::Call::new(&hidden, &wg, &wu, &wd)
                .normalization_weights_tensor(&g)
                .normalization_type(NormType::RMS_NORM)
                .fused_add_tensor(&residual)
                .store_fused_add_result(true)
                .eps(EPS)
                .launch(l)
        })?;
        Ok(values(&outs.0[0]).iter().zip(values(&outs.0[1])).map(|(m, r)| m + r).collect())
    }

    /// The prompt through the layer; writes the KV cache.
    pub fn prefill(&mut self, x: &[f64]) -> Result<Vec<f64>, NkiError> {
        let Dims { q_heads: nq, kv_heads: nkv, head_dim: d, .. } = DIMS;
        let (s, cols) = (PROMPT, DIMS.qkv_cols());
        let qkv = self.qkv("prefill", x)?;
        // Heads in HuggingFace's [1, heads, S, d]: head n is columns n·d.. of each token.
        let heads = |first: usize, n: usize| -> Vec<f64> {
            (0..n * s * d).map(|i| qkv[(i / d % s) * cols + (first + i / (s * d)) * d + i % d]).collect()
        };
        let (q, k, v) = (heads(0, nq), heads(nq, nkv), heads(nq + nkv, nkv));
        // rope_hf's angles [S, d]: pair i's at columns i and i + d/2.
        let (cos, sin): (Vec<f64>, Vec<f64>) = (0..s * d).map(|i| rope_angle(i / d, i % d % (d / 2), d)).unzip();
        let (cos, sin) = (self.tensor(&[s, d], &cos)?, self.tensor(&[s, d], &sin)?);
        let (qt, kt) = (self.tensor(&[1, nq, s, d], &q)?, self.tensor(&[1, nkv, s, d], &k)?);
        let (q_out, k_out) = (self.tensor(&[1, nq, s, d], &q)?, self.tensor(&[1, nkv, s, d], &k)?);
        let (q, k) =
            self.calls.call("prefill", "rope_hf", 1, |l| rope_hf::Call::new(&qt, &kt, &q_out, &k_out).cos(&cos).sin(&sin).launch(l))?;
        let (q, k) = (values(&q), values(&k));
        for g in 0..nkv {
            for p in 0..s {
                for e in 0..d {
                    self.k_cache[(g * d + e) * CACHE + p] = k[(g * s + p) * d + e];
                    self.v_cache[(g * CACHE + p) * d + e] = v[(g * s + p) * d + e];
                }
            }
        }
        // attention_cte: queries (heads, S, d), keys (kv heads, d, S), values (kv heads, S, d).
        let k_t: Vec<f64> = (0..nkv * d * s).map(|i| k[(i / (d * s) * s + i % s) * d + i / s % d]).collect();
        let (qa, ka, va) = (self.tensor(&[nq, s, d], &q)?, self.tensor(&[nkv, d, s], &k_t)?, self.tensor(&[nkv, s, d], &v)?);
        let cfg = CteConfig::new().scale(1.0 / (d as f64).sqrt());
        let attn = self.calls.call("prefill", "attention_cte", LNC, |l| Ok(cfg.launch(l, &CteInputs::new(&qa, &ka, &va))?.out))?;
        // output_projection_cte takes [B, N, d, S].
        let attn = values(&attn);
        let a_t: Vec<f64> = (0..nq * d * s).map(|i| attn[(i / (d * s) * s + i % s) * d + i / s % d]).collect();
        let at = self.tensor(&[1, nq, d, s], &a_t)?;
        let w_o = self.w_o.clone();
        let o = self.calls.call("prefill", "output_projection_cte", LNC, |l| output_projection_cte::Call::new(&at, &w_o).launch(l))?;
        self.mlp("prefill", &values(&o), x)
    }

    /// One token at `pos` through the layer, over the cache; appends its key and value.
    pub fn decode(&mut self, x: &[f64], pos: usize) -> Result<Vec<f64>, NkiError> {
        let Dims { q_heads: nq, kv_heads: nkv, head_dim: d, .. } = DIMS;
        let group = nq / nkv;
        let qkv = self.qkv("decode", x)?;
        // attention_tkg: each KV head a batch of `group` query heads; queries
        // (d, heads) unscaled (with fused RoPE the kernel scales them after
        // rotating), active keys (d, kv heads), values (kv heads, 1, 1, d).
        let q: Vec<f64> = (0..d * nq).map(|i| qkv[(i % nq) * d + i / nq]).collect();
        let k: Vec<f64> = (0..d * nkv).map(|i| qkv[(nq + i % nkv) * d + i / nkv]).collect();
        let v: Vec<f64> = qkv[(nq + nkv) * d..].to_vec();
        // Cached positions below `pos` and the active token (the last row) are visible.
        let mask: Vec<f64> = (0..CACHE * nq).map(|i| f64::from(u8::from(i / nq < pos || i / nq == CACHE - 1))).collect();
        let positions = vec![pos as f64; nkv];
        let t = [
            self.tensor(&[d, nq], &q)?,
            self.tensor(&[d, nkv], &k)?,
            self.tensor(&[nkv, 1, 1, d], &v)?,
            self.tensor(&[nkv, 1, d, CACHE], &self.k_cache)?,
            self.tensor(&[nkv, 1, CACHE, d], &self.v_cache)?,
            tensor(&[CACHE, nkv, group, 1], &mask, Dtype::U8)?,
            tensor(&[nkv, 1], &positions, Dtype::F32)?,
        ];
        let dims = TkgDims {
            bs: nkv as i64,
            q_head: group as i64,
            s_active: 1,
            curr_sprior: CACHE as i64,
            full_sprior: CACHE as i64,
            d_head: d as i64,
        };
        let cfg = TkgConfig::new(dims).fuse_rope(true);
        let inv_freqs = self.inv_freqs.clone();
        let inputs = TkgInputs {
            inv_freqs: Some(&inv_freqs),
            rope_pos_ids: Some(&t[6]),
            ..TkgInputs::new(&t[0], &t[1], &t[2], &t[3], &t[4], &t[5])
        };
        let (attn, k_out) = self.calls.call("decode", "attention_tkg", LNC, |l| cfg.launch(l, &inputs))?;
        let k_out = values(&k_out);
        for g in 0..nkv {
            for e in 0..d {
                self.k_cache[(g * d + e) * CACHE + pos] = k_out[g * d + e];
                self.v_cache[(g * CACHE + pos) * d + e] = v[g * d + e];
            }
        }
        // output_projection_tkg takes [d, B, N, S]; attention_tkg gave (kv heads, group, d, 1).
        let attn = values(&attn);
        let a_t: Vec<f64> = (0..d * nq).map(|i| attn[(i % nq) * d + i / nq]).collect();
        let at = self.tensor(&[d, 1, nq, 1], &a_t)?;
        let w_o = self.w_o.clone();
        let o = self.calls.call("decode", "output_projection_tkg", LNC, |l| output_projection_tkg::Call::new(&at, &w_o).launch(l))?;
        self.mlp("decode", &values(&o), x)
    }
}

pub fn values(t: &Tensor) -> Vec<f64> {
    t.to_f32_vec().into_iter().map(f64::from).collect()
}

// The prompt and every decode token fit in the cache beside the active slot.
const _: () = assert!(PROMPT + STEPS < CACHE);
