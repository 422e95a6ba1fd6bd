//! Running `attention_bwd` from Rust with a [`BwdConfig`]: inputs tied to the
//! configuration, run-time checks with errors naming the parameter, and typed
//! outputs.

use super::attention_bwd::attention_bwd;
use super::config::{BwdConfig, BwdDims, BwdRule};
use crate::dtypes::ParamDtypes;
use nki::{Launch, NkiError, Result, Tensor};

/// The dtypes each tensor parameter of `attention_bwd` accepts, as the kernel
/// declares them (under the typed API's names: `q` is the kernel's `q_ref`, ...).
pub const DTYPES: ParamDtypes = ParamDtypes {
    kernel: &attention_bwd::INFO,
    aliases: &[
        ("q", "q_ref"),
        ("k", "k_ref"),
        ("v", "v_ref"),
        ("o", "o_ref"),
        ("dy", "dy_ref"),
        ("lse", "lse_ref"),
        ("sinks", "sinks_ref"),
    ],
};

/// The tensors of one call, in the kernel's layouts (see
/// [`attention_bwd`](super::attention_bwd::attention_bwd)).
#[derive(Clone, Copy, Debug)]
pub struct BwdInputs<'a> {
    /// Queries `[B, N, D, Sq]` (unscaled).
    pub q: &'a Tensor,
    /// Keys `[B, N_kv, D, Sk]`.
    pub k: &'a Tensor,
    /// Values `[B, N_kv, D, Sk]`.
    pub v: &'a Tensor,
    /// The forward's normalised output `[B, N, D, Sq]`.
    pub o: &'a Tensor,
    /// The gradient of the loss with respect to that output.
    pub dy: &'a Tensor,
    /// The forward's log-sum-exp of the scaled scores (sinks included), `[B, N, 128, Sq / 128]`.
    pub lse: &'a Tensor,
    /// Sink logits `[B, N]` or `[B, N, num_sinks]`.
    pub sinks: Option<&'a Tensor>,
    /// `(bound_min, bound_max)`, fp32 `[Sq]` each (with [`BwdConfig::packed`]).
    pub bounds: Option<(&'a Tensor, &'a Tensor)>,
}

/// The gradients, in the input dtype (dsinks in the sinks').
#[derive(Clone, Debug)]
pub struct BwdOutputs {
    /// dL/dQ `[B, N, D, Sq]`.
    pub dq: Tensor,
    /// dL/dK `[B, N_kv, D, Sk]`.
    pub dk: Tensor,
    /// dL/dV `[B, N_kv, D, Sk]`.
    pub dv: Tensor,
    /// dL/dsinks, shaped like the sinks.
    pub dsinks: Option<Tensor>,
}

fn dims_of(t: &Tensor) -> Vec<i64> {
    t.shape().iter().map(|&x| x as i64).collect()
}

impl BwdConfig {
    /// The error for a broken rule: the parameter, its value and the rule.
    pub fn rule_error(&self, rule: BwdRule) -> NkiError {
        let d = self.dims.unwrap_or(BwdDims { batch: 0, heads: 0, kv_heads: 0, seqlen_q: 0, seqlen_k: 0, head_dim: 0 });
        let (param, value) = match rule {
            BwdRule::KvHeads => ("nheads", format!("{} with nheads_kv = {}", d.heads, d.kv_heads)),
            BwdRule::SeqlenTiles => ("seqlen", format!("{} (q) and {} (k)", d.seqlen_q, d.seqlen_k)),
            BwdRule::HeadDimTiles => ("d_head", d.head_dim.to_string()),
            BwdRule::CausalSeqlens => ("use_causal_mask", format!("true with seqlen_q = {}, seqlen_k = {}", d.seqlen_q, d.seqlen_k)),
            BwdRule::WindowNeedsCausal => ("sliding_window", self.sliding_window.to_string()),
            BwdRule::ScaleNotFinite | BwdRule::MaskedScale => ("softmax_scale", format!("{:?}", self.softmax_scale.unwrap_or(0.0))),
        };
        NkiError::argument(param, value, rule.message())
    }

    /// Checks the rules and that `inputs` match them: dtypes, shapes, the bounds
    /// given exactly when packed; the dims are taken from `q` and `k`.
    pub fn check(&self, inputs: &BwdInputs<'_>) -> Result<()> {
        self.validate()?;
        if inputs.bounds.is_some() != self.packed {
            let value = if self.packed { "None" } else { "given" };
            return Err(NkiError::argument("bound_min, bound_max", value, "must be given exactly with the configuration's packed"));
        }
        let mut all = vec![("q", inputs.q), ("k", inputs.k), ("v", inputs.v), ("o", inputs.o), ("dy", inputs.dy), ("lse", inputs.lse)];
        all.extend(inputs.sinks.map(|t| ("sinks", t)));
        if let Some((lo, hi)) = inputs.bounds {
            all.extend([("bound_min", lo), ("bound_max", hi)]);
        }
        for (name, t) in &all {
            DTYPES.check(name, t)?;
        }
        let (q, k) = (dims_of(inputs.q), dims_of(inputs.k));
        let (Ok([b, h, d, sq]), Ok([kb, kh, kd, sk])) = (<[i64; 4]>::try_from(q.as_slice()), <[i64; 4]>::try_from(k.as_slice())) else {
            return Err(NkiError::argument("q, k", format!("shapes {q:?}, {k:?}"), "must be 4-d [B, N, D, S]"));
        };
        let got = BwdDims { batch: b, heads: h, kv_heads: kh, seqlen_q: sq, seqlen_k: sk, head_dim: d };
        if let Some(want) = self.dims.filter(|&want| want != got) {
            return Err(NkiError::argument("q, k", format!("shapes {q:?}, {k:?}"), &format!("the configuration's dims are {want:?}")));
        }
        BwdConfig { dims: Some(got), ..*self }.validate()?;
        let sinks_ok = |s: &[i64]| (s.len() == 2 || s.len() == 3) && s[0] == b && s[1] == h;
        for (name, t) in all {
            let shape = dims_of(t);
            let (ok, want) = match name {
                "k" | "v" => (shape == [kb, kh, kd, sk] && kb == b && kd == d, format!("[{b}, N_kv, {d}, Sk]")),
                "lse" => (shape == [b, h, 128, sq / 128], format!("{:?}", [b, h, 128, sq / 128])),
                "sinks" => (sinks_ok(&shape), format!("[{b}, {h}] or [{b}, {h}, num_sinks]")),
                "bound_min" | "bound_max" => (shape == [sq], format!("[{sq}]")),
                _ => (shape == q, format!("{q:?}")),
            };
            if !ok {
                return Err(NkiError::argument(name, format!("shape {shape:?}"), &format!("must be {want}")));
            }
            if ["k", "v", "o", "dy"].contains(&name) && t.dtype() != inputs.q.dtype() {
                return Err(NkiError::argument(name, t.dtype(), &format!("q, k, v, o and dy share one dtype ({})", inputs.q.dtype())));
            }
        }
        Ok(())
    }

    /// Checks, then runs the kernel in the emulator on every program of `launch`.
    pub fn launch(&self, launch: &Launch, inputs: &BwdInputs<'_>) -> Result<BwdOutputs> {
        self.check(inputs)?;
        let window = (self.sliding_window > 0).then_some(self.sliding_window);
        let out = attention_bwd::Call::new(inputs.q, inputs.k, inputs.v, inputs.o, inputs.dy, inputs.lse)
            .sinks_ref(inputs.sinks)
            .bound_min(inputs.bounds.map(|b| b.0))
            .bound_max(inputs.bounds.map(|b| b.1))
            .use_causal_mask(self.causal)
            .mixed_precision(self.mixed_precision)
            .softmax_scale(self.given_scale())
            .sliding_window(window)
            .launch(launch)?;
        let mut it = out.into_vec().into_iter();
        let missing = || NkiError::new(nki::ErrorKind::Shape, "attention_bwd returned fewer outputs than expected");
        let (dq, dk, dv) = (it.next().ok_or_else(missing)?, it.next().ok_or_else(missing)?, it.next().ok_or_else(missing)?);
        Ok(BwdOutputs { dq, dk, dv, dsinks: it.next() })
    }
}
