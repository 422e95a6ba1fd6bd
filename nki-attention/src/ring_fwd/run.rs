//! Running `ring_attention_spmd_fwd` over a ring of emulated ranks with a
//! [`RingFwdConfig`]: per-rank inputs, the query-scaling contract made explicit,
//! run-time checks naming the parameter, and typed outputs.

use super::config::{FWD_PARAMS, RingFwdConfig, RingFwdRule};
use super::ring_attention_fwd::ring_attention_spmd_fwd;
use crate::dtypes::ParamDtypes;
use crate::rings::{check_dims, check_feature_inputs, check_ring_tensors, kv_heads_of, ring_call_features, shape_i64};
use nki::collectives::CommEvent;
use nki::{Launch, NkiError, Result, Tensor};

/// The dtypes each tensor parameter of `ring_attention_spmd_fwd` accepts, as
/// the kernel declares them: float data and fp32 sink logits.
pub const DTYPES: ParamDtypes = ParamDtypes { kernel: &ring_attention_spmd_fwd::INFO, aliases: &[] };

/// The queries of every rank, and whether the softmax scale is already in them.
///
/// With the causal mask the kernel cannot scale scores itself (`attention_cte`
/// takes scale 1.0 in context-parallel mode), so the caller must pre-scale Q.
/// Saying which kind of Q this is lets [`RingFwdConfig::launch`] do it right in
/// every mode: raw queries are scaled here, pre-scaled ones are checked against
/// the configured scale.
#[derive(Clone, Copy, Debug)]
pub enum Queries<'a> {
    /// Unscaled queries, one tensor per rank.
    Raw(&'a [Tensor]),
    /// Queries already multiplied by `scale`, one tensor per rank.
    Prescaled {
        /// The queries.
        q: &'a [Tensor],
        /// The factor they were multiplied by.
        scale: f64,
    },
}

/// The per-rank tensors of one ring launch, in the kernel's layouts (rank `i` of
/// each slice runs on emulated rank `i`).
#[derive(Clone, Copy, Debug)]
pub struct RingFwdInputs<'a> {
    /// Queries.
    pub q: Queries<'a>,
    /// Keys.
    pub k: &'a [Tensor],
    /// Values.
    pub v: &'a [Tensor],
    /// Sink logits, float32 `[h]`, the same on every rank (None: no sinks).
    pub sinks: Option<&'a Tensor>,
    /// Segment ids `(q, kv)`, int32 `[b, seqlen]` per rank: key `j` is visible to
    /// query `i` only if their ids match (None: one segment).
    pub segment_ids: Option<(&'a [Tensor], &'a [Tensor])>,
    /// Bias per rank, float32 `[b, h, seqlen, num_workers·seqlen]`: the rows of
    /// the rank's queries against every key at its global position, added to the
    /// logits after the soft cap (None: no bias).
    pub bias: Option<&'a [Tensor]>,
}

/// What a ring launch returns.
#[derive(Clone, Debug)]
pub struct RingFwdOutputs {
    /// Each rank's output, `[b, h, seqlen, d]`.
    pub out: Vec<Tensor>,
    /// With `training`: each rank's log-sum-exp, `[b, h, 128, seqlen / 128]`.
    pub lse: Option<Vec<Tensor>>,
    /// The collectives the ring performed, in completion order.
    pub comm: Vec<CommEvent>,
}

impl RingFwdConfig {
    /// The error for a broken rule: the parameter, its value and the rule.
    pub fn rule_error(&self, rule: RingFwdRule) -> NkiError {
        let ring = &self.ring;
        let (param, value): (&str, String) = match rule {
            RingFwdRule::Ring(r) => return ring.rule_error(r, &FWD_PARAMS, rule.message()),
            RingFwdRule::NeedsTrn2 => ("target", ring.target.to_string()),
            RingFwdRule::TooManyCausalWorkers => ("num_workers", ring.num_workers.to_string()),
            RingFwdRule::HeadDim => ("d", ring.dims.map_or(0, |d| d.head_dim).to_string()),
        };
        NkiError::argument(param, value, rule.message())
    }

    /// The softmax scale for head dim `d`: the configured one, else `1/sqrt(d)`.
    pub fn scale_for(&self, d: usize) -> f64 {
        self.ring.softmax_scale.unwrap_or(1.0 / (d as f64).sqrt())
    }

    /// Checks the rules, the launch and the inputs: one tensor of each kind per
    /// rank, shapes that agree with each other (K and V with `kv_heads` heads),
    /// the sinks, the dims and the pre-scaling.
    pub fn check(&self, launch: &Launch, inputs: &RingFwdInputs<'_>) -> Result<()> {
        self.validate()?;
        let (qs, prescaled) = match inputs.q {
            Queries::Raw(q) => (q, None),
            Queries::Prescaled { q, scale } => (q, Some(scale)),
        };
        check_ring_tensors(launch, &self.ring, &DTYPES, &[("q", qs), ("k", inputs.k), ("v", inputs.v)])?;
        let q0 = shape_i64(&qs[0]);
        if q0.len() != 4 {
            return Err(NkiError::argument("q", format!("shape {q0:?}"), "must be 4-d"));
        }
        let [b, h, d, s] = if self.tp_q { [q0[0], q0[1], q0[3], q0[2]] } else { [q0[0], q0[1], q0[2], q0[3]] };
        let got = super::RingDims { batch: b, heads: h, seqlen: s, head_dim: d };
        check_dims(&self.ring, got, &q0)?;
        let kv_h = kv_heads_of(&self.ring, &inputs.k[0], h);
        let derived = self.dims(got).kv_heads(kv_h);
        derived.validate()?;
        let q_want = if self.tp_q { [b, h, s, d] } else { [b, h, d, s] };
        let k_want = if self.tp_k { [b, kv_h, s, d] } else { [b, kv_h, d, s] };
        for (r, ((q, k), v)) in qs.iter().zip(inputs.k).zip(inputs.v).enumerate() {
            for (name, t, want, why) in [
                ("q", q, q_want, "every rank holds the same number of tokens"),
                ("k", k, k_want, "K has q's batch, seqlen and head dim and kv_heads heads"),
                ("v", v, [b, kv_h, s, d], "V is [b, kv_heads, seqlen, d]"),
            ] {
                let got = shape_i64(t);
                if got != want {
                    return Err(NkiError::argument(&format!("{name}[{r}]"), format!("shape {got:?}"), &format!("must be {want:?}: {why}")));
                }
            }
        }
        check_feature_inputs(inputs.sinks, inputs.segment_ids, inputs.bias, launch.num_ranks(), [b, h, s], self.ring.num_workers)?;
        if let Some(given) = prescaled {
            let want = self.scale_for(d as usize);
            if (given - want).abs() > 1e-9 * want.abs() {
                return Err(NkiError::argument(
                    "q",
                    format!("pre-scaled by {given}"),
                    &format!("the softmax scale is {want}; pre-scale by it or pass raw queries"),
                ));
            }
        }
        Ok(())
    }

    /// Checks, then runs the ring on every rank (and LNC program) of `launch`.
    ///
    /// Raw queries are multiplied by the scale (in fp32, rounded to their dtype)
    /// when the mask is causal; pre-scaled ones run with `softmax_scale = 1.0`.
    pub fn launch(&self, launch: &Launch, inputs: &RingFwdInputs<'_>) -> Result<RingFwdOutputs> {
        self.check(launch, inputs)?;
        let (qs, prescaled) = match inputs.q {
            Queries::Raw(q) => (q, false),
            Queries::Prescaled { q, .. } => (q, true),
        };
        let d = if self.tp_q { qs[0].shape()[3] } else { qs[0].shape()[2] };
        let scale = self.scale_for(d);
        let scaled: Vec<Tensor>;
        let (q_run, kernel_scale) = match (prescaled, self.ring.causal) {
            (true, _) => (qs, 1.0),
            (false, false) => (qs, scale),
            (false, true) => {
                scaled = qs.iter().map(|q| scale_values(q, scale)).collect::<Result<_>>()?;
                (scaled.as_slice(), 1.0)
            }
        };
        let report = launch.run_all(|ctx| {
            let r = ctx.rank();
            let call = ring_attention_spmd_fwd::Call::new(&q_run[r], &inputs.k[r], &inputs.v[r]);
            ring_call_features!(call, self.ring, inputs, r)
                .softmax_scale(kernel_scale)
                .striped_input(self.ring.striped())
                .zigzag_input(self.ring.zigzag())
                .training(self.training)
                .lse_dtype(self.lse_dtype)
                .tp_q(self.tp_q)
                .tp_k(self.tp_k)
                .run(ctx)
        })?;
        let mut out = Vec::with_capacity(report.results.len());
        let mut lse = Vec::new();
        for mut programs in report.results {
            let mut it = programs.swap_remove(0).into_vec().into_iter();
            out.push(it.next().ok_or_else(|| NkiError::new(nki::ErrorKind::Shape, "ring_attention_spmd_fwd returned no output"))?);
            lse.extend(it.next());
        }
        Ok(RingFwdOutputs { out, lse: self.training.then_some(lse), comm: report.comm })
    }
}

/// `q · scale` computed in fp32 and rounded to `q`'s dtype (how the library's
/// tests pre-scale queries).
fn scale_values(q: &Tensor, scale: f64) -> Result<Tensor> {
    let s = scale as f32;
    let mut vals = q.to_f32_vec();
    vals.iter_mut().for_each(|x| *x *= s);
    Tensor::from_f32(q.shape(), &vals, q.dtype())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nki::{Dtype, ErrorKind};

    #[test]
    fn integer_data_and_a_non_finite_scale_are_refused_naming_the_parameter() {
        let t = |dtype| Tensor::from_f32(&[1, 1, 16, 128], &vec![0.5; 16 * 128], dtype).unwrap();
        let (qf, qi, k, v) =
            (t(Dtype::F32), t(Dtype::I32), t(Dtype::F32), Tensor::from_f32(&[1, 1, 128, 16], &vec![0.5; 2048], Dtype::F32).unwrap());
        let launch = Launch::new().ranks(1);
        let int_q = RingFwdInputs {
            q: Queries::Raw(std::slice::from_ref(&qi)),
            k: std::slice::from_ref(&k),
            v: std::slice::from_ref(&v),
            sinks: None,
            segment_ids: None,
            bias: None,
        };
        let e = RingFwdConfig::new(1).launch(&launch, &int_q).unwrap_err();
        assert_eq!(e.to_string(), "invalid q[0] = int32: ring_attention_spmd_fwd takes q as float32, bfloat16 or float16");
        let ok = RingFwdInputs { q: Queries::Raw(std::slice::from_ref(&qf)), ..int_q };
        let e = RingFwdConfig::new(1).softmax_scale(f64::NAN).launch(&launch, &ok).unwrap_err();
        assert_eq!(e.to_string(), "invalid softmax_scale = NaN: ring attention: softmax_scale must be a finite float32 value");
        // The emitted kernel checks it too, with the same message, in both modes.
        for causal in [false, true] {
            let e = ring_attention_spmd_fwd::Call::new(&qf, &k, &v)
                .softmax_scale(f64::NAN)
                .use_causal_mask(causal)
                .launch(&launch)
                .unwrap_err();
            assert!(e.kind == ErrorKind::Assertion && e.message.contains(crate::ring_rules::SCALE_NOT_FINITE), "{e}");
        }
    }
}
