//! Running `ring_attention_spmd_bwd` over a ring of emulated ranks with a
//! [`RingBwdConfig`]: per-rank inputs, run-time checks naming the parameter, and
//! typed outputs.

use super::config::{BWD_PARAMS, RingBwdConfig, RingBwdRule};
use super::ring_attention_bwd::ring_attention_spmd_bwd;
use crate::dtypes::ParamDtypes;
use crate::ring_config::RingDims;
use crate::rings::{check_dims, check_feature_inputs, check_ring_tensors, kv_heads_of, ring_call_features, shape_i64};
use nki::collectives::CommEvent;
use nki::{Dtype, Launch, NkiError, Result, Tensor};

/// The dtypes each tensor parameter of `ring_attention_spmd_bwd` accepts, as
/// the kernel declares them (under the typed API's names: `q` is the kernel's
/// `q_ref`, ...): float data (bf16, fp16, fp32; q, k, v, o and dy also share
/// one dtype) and fp32 sink logits.
pub const DTYPES: ParamDtypes = ParamDtypes {
    kernel: &ring_attention_spmd_bwd::INFO,
    aliases: &[("q", "q_ref"), ("k", "k_ref"), ("v", "v_ref"), ("o", "o_ref"), ("dy", "dy_ref"), ("lse", "lse_ref")],
};

/// The per-rank tensors of one backward launch, all `[B, N, D, S]` (head-dim
/// major; `k` and `v` `[B, N_kv, D, S]` with grouped-query attention) except
/// `lse`, `[B, N, 128, S / 128]`; rank `i` of each slice runs on emulated rank `i`.
#[derive(Clone, Copy, Debug)]
pub struct RingBwdInputs<'a> {
    /// Queries (unscaled).
    pub q: &'a [Tensor],
    /// Keys.
    pub k: &'a [Tensor],
    /// Values.
    pub v: &'a [Tensor],
    /// The forward's normalised output for the local queries.
    pub o: &'a [Tensor],
    /// The gradient of the loss with respect to that output.
    pub dy: &'a [Tensor],
    /// The forward's log-sum-exp of the scaled scores (including the sinks).
    pub lse: &'a [Tensor],
    /// The forward's sink logits, float32 `[N]` (None: no sinks).
    pub sinks: Option<&'a Tensor>,
    /// The forward's segment ids `(q, kv)`, int32 `[B, S]` per rank (None: one
    /// segment); the query ids travel with Q.
    pub segment_ids: Option<(&'a [Tensor], &'a [Tensor])>,
    /// The forward's bias per rank, float32 `[B, N, S, num_workers·S]` (the rows
    /// of the rank's queries; they travel with Q). None: no bias.
    pub bias: Option<&'a [Tensor]>,
}

/// What a backward launch returns: fp32 gradients per rank, `[B, N, D, S]`
/// (dK and dV `[B, N_kv, D, S]`).
#[derive(Clone, Debug)]
pub struct RingBwdOutputs {
    /// dL/dQ.
    pub dq: Vec<Tensor>,
    /// dL/dK.
    pub dk: Vec<Tensor>,
    /// dL/dV.
    pub dv: Vec<Tensor>,
    /// With sinks: dL/dsinks `[N]`, the sum of every rank's share (each rank's
    /// kernel returns the share of its own queries).
    pub dsinks: Option<Tensor>,
    /// The collectives the ring performed, in completion order.
    pub comm: Vec<CommEvent>,
}

impl RingBwdConfig {
    /// The error for a broken rule: the parameter, its value and the rule.
    pub fn rule_error(&self, rule: RingBwdRule) -> NkiError {
        let ring = &self.ring;
        let (param, value): (&str, String) = match rule {
            RingBwdRule::Ring(r) => return ring.rule_error(r, &BWD_PARAMS, rule.message()),
            RingBwdRule::LncSize => ("lnc_size", self.lnc.to_string()),
            RingBwdRule::CausalScale => ("softmax_scale", ring.scale_text()),
            RingBwdRule::HeadDimTiles => ("D", ring.dims.map_or(0, |d| d.head_dim).to_string()),
            RingBwdRule::SbufCapacity => ("S", self.sbuf_shortfall()),
        };
        NkiError::argument(param, value, rule.message())
    }

    /// The tokens per rank with their SBUF bytes, the target's capacity and the
    /// longest slice that fits (the value of a broken [`RingBwdRule::SbufCapacity`]).
    fn sbuf_shortfall(&self) -> String {
        let (Some(d), Some(dtype), Some(bytes), Some(max)) = (self.ring.dims, self.dtype, self.sbuf_bytes(), self.max_seqlen()) else {
            return String::new();
        };
        let acc = if self.mixed_precision { Dtype::F32 } else { dtype };
        format!(
            "{}: its tiles take {bytes} B per SBUF partition, more than the {} B of {}; with D = {}, {dtype} inputs and {acc} accumulators at most {max} tokens per rank fit",
            d.seqlen,
            self.sbuf_capacity(),
            self.ring.target,
            d.head_dim
        )
    }

    /// Checks the rules, the launch and the inputs: one tensor of each kind per
    /// rank, shapes and dtypes that agree, the dims and the LNC degree.
    pub fn check(&self, launch: &Launch, inputs: &RingBwdInputs<'_>) -> Result<()> {
        self.validate()?;
        if launch.lnc_degree() as i64 != self.lnc {
            return Err(NkiError::argument("lnc_size", self.lnc, &format!("must equal the launch's LNC degree {}", launch.lnc_degree())));
        }
        if launch.hardware() != self.ring.target {
            return Err(NkiError::argument(
                "target",
                self.ring.target,
                &format!("must equal the launch's generation {}", launch.hardware()),
            ));
        }
        let all = [("q", inputs.q), ("k", inputs.k), ("v", inputs.v), ("o", inputs.o), ("dy", inputs.dy), ("lse", inputs.lse)];
        check_ring_tensors(launch, &self.ring, &DTYPES, &all)?;
        let q0 = shape_i64(&inputs.q[0]);
        let [b, h, d, s] = <[i64; 4]>::try_from(q0.as_slice())
            .map_err(|_| NkiError::argument("q", format!("shape {q0:?}"), "must be 4-d [B, N, D, S]"))?;
        let got = RingDims { batch: b, heads: h, seqlen: s, head_dim: d };
        check_dims(&self.ring, got, &q0)?;
        let dtype = inputs.q[0].dtype();
        if let Some(want) = self.dtype.filter(|&want| want != dtype) {
            return Err(NkiError::argument("q", format!("dtype {dtype}"), &format!("the configuration's dtype is {want}")));
        }
        let kv_h = kv_heads_of(&self.ring, &inputs.k[0], h);
        let derived = self.dims(got).kv_heads(kv_h).dtype(dtype).segment_ids(inputs.segment_ids.is_some());
        derived.validate()?;
        for (name, list) in all {
            let want = match name {
                "lse" => vec![b, h, 128, s / 128],
                "k" | "v" => vec![b, kv_h, d, s],
                _ => q0.clone(),
            };
            for (r, t) in list.iter().enumerate() {
                let shape = shape_i64(t);
                if shape != want {
                    return Err(NkiError::argument(&format!("{name}[{r}]"), format!("shape {shape:?}"), &format!("must be {want:?}")));
                }
                if name != "lse" && t.dtype() != dtype {
                    return Err(NkiError::argument(
                        &format!("{name}[{r}]"),
                        t.dtype(),
                        &format!("q, k, v, o and dy share one dtype ({dtype})"),
                    ));
                }
            }
        }
        check_feature_inputs(inputs.sinks, inputs.segment_ids, inputs.bias, launch.num_ranks(), [b, h, s], self.ring.num_workers)?;
        Ok(())
    }

    /// Checks, then runs the ring on every rank (and LNC program) of `launch`.
    pub fn launch(&self, launch: &Launch, inputs: &RingBwdInputs<'_>) -> Result<RingBwdOutputs> {
        self.check(launch, inputs)?;
        let report = launch.run_all(|ctx| {
            let r = ctx.rank();
            let call =
                ring_attention_spmd_bwd::Call::new(&inputs.q[r], &inputs.k[r], &inputs.v[r], &inputs.o[r], &inputs.dy[r], &inputs.lse[r]);
            ring_call_features!(call, self.ring, inputs, r)
                .softmax_scale(self.ring.softmax_scale)
                .striped_attention(self.ring.striped())
                .zigzag_attention(self.ring.zigzag())
                .mixed_precision(self.mixed_precision)
                .lnc_size(self.lnc)
                .run(ctx)
        })?;
        let (mut dq, mut dk, mut dv) = (Vec::new(), Vec::new(), Vec::new());
        let mut dsinks: Option<Vec<f32>> = None;
        let missing = || NkiError::new(nki::ErrorKind::Shape, "ring_attention_spmd_bwd returned fewer outputs than expected");
        for mut programs in report.results {
            let mut it = programs.swap_remove(0).into_vec().into_iter();
            dq.push(it.next().ok_or_else(missing)?);
            dk.push(it.next().ok_or_else(missing)?);
            dv.push(it.next().ok_or_else(missing)?);
            if inputs.sinks.is_some() {
                let share = it.next().ok_or_else(missing)?.to_f32_vec();
                let total = dsinks.get_or_insert_with(|| vec![0.0; share.len()]);
                total.iter_mut().zip(share).for_each(|(t, x)| *t += x);
            }
        }
        let dsinks = dsinks.map(|v| Tensor::from_f32(&[v.len()], &v, Dtype::F32)).transpose()?;
        Ok(RingBwdOutputs { dq, dk, dv, dsinks, comm: report.comm })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scale::MIN_MASKED_SCALE;
    use nki::{Dtype, ErrorKind};

    #[test]
    fn integer_data_and_scales_that_unmask_are_refused_naming_the_parameter() {
        let t = |shape: &[usize], dtype| Tensor::from_f32(shape, &vec![0.5; shape.iter().product()], dtype).unwrap();
        let data = t(&[1, 1, 16, 128], Dtype::F32);
        let (lse_f, lse_i) = (t(&[1, 1, 128, 1], Dtype::F32), t(&[1, 1, 128, 1], Dtype::I32));
        let one = std::slice::from_ref;
        let inputs = RingBwdInputs {
            q: one(&data),
            k: one(&data),
            v: one(&data),
            o: one(&data),
            dy: one(&data),
            lse: one(&lse_i),
            sinks: None,
            segment_ids: None,
            bias: None,
        };
        let launch = Launch::new().ranks(1);
        let e = RingBwdConfig::new(1).launch(&launch, &inputs).unwrap_err();
        assert_eq!(e.to_string(), "invalid lse[0] = int32: ring_attention_spmd_bwd takes lse as float32, bfloat16 or float16");
        let inputs = RingBwdInputs { lse: one(&lse_f), ..inputs };
        let e = RingBwdConfig::new(1).causal(true).softmax_scale(-1.0).launch(&launch, &inputs).unwrap_err();
        assert!(e.to_string().starts_with("invalid softmax_scale = -1: ring_attention_spmd_bwd: with a mask"), "{e}");
        // Windows and chunks mask too.
        let e = RingBwdConfig::new(1).chunk_size(64).softmax_scale(-1.0).launch(&launch, &inputs).unwrap_err();
        assert!(e.to_string().starts_with("invalid softmax_scale = -1: ring_attention_spmd_bwd: with a mask"), "{e}");
        assert!(RingBwdRule::CausalScale.message().contains(&format!("at least {MIN_MASKED_SCALE:e}")));
        // The emitted kernel checks it too.
        let call =
            ring_attention_spmd_bwd::Call::new(&data, &data, &data, &data, &data, &lse_f).use_causal_mask(true).softmax_scale(Some(0.0));
        let e = call.launch(&launch).unwrap_err();
        assert!(e.kind == ErrorKind::Assertion && e.message.contains(RingBwdRule::CausalScale.message()), "{e}");
        assert!(ring_attention_spmd_bwd::NKI_SOURCE.contains(&format!("not masked or scale >= {MIN_MASKED_SCALE:e}, CAUSAL_SCALE")));
    }
}
