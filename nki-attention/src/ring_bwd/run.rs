//! Running `ring_attention_spmd_bwd` over a ring of emulated ranks with a
//! [`RingBwdConfig`]: per-rank inputs, run-time checks naming the parameter, and
//! typed outputs.

use super::config::{RingBwdConfig, RingBwdRule};
use super::ring_attention_bwd::ring_attention_spmd_bwd;
use crate::ring_fwd::RingDims;
use crate::rings::{check_ring_launch, shape_i64};
use nki::collectives::CommEvent;
use nki::{Dtype, Launch, NkiError, Result, Tensor};

/// The per-rank tensors of one backward launch, all `[B, N, D, S]` (head-dim
/// major) except `lse`, `[B, N, 128, S / 128]`; rank `i` of each slice runs on
/// emulated rank `i`.
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
    /// The forward's log-sum-exp of the scaled scores.
    pub lse: &'a [Tensor],
}

/// What a backward launch returns: fp32 gradients per rank, `[B, N, D, S]`.
#[derive(Clone, Debug)]
pub struct RingBwdOutputs {
    /// dL/dQ.
    pub dq: Vec<Tensor>,
    /// dL/dK.
    pub dk: Vec<Tensor>,
    /// dL/dV.
    pub dv: Vec<Tensor>,
    /// The collectives the ring performed, in completion order.
    pub comm: Vec<CommEvent>,
}

impl RingBwdConfig {
    /// The error for a broken rule: the parameter, its value and the rule.
    pub fn rule_error(&self, rule: RingBwdRule) -> NkiError {
        let d = self.dims;
        let (param, value): (&str, String) = match rule {
            RingBwdRule::StripedNeedsCausal => ("striped_attention", "true without use_causal_mask".into()),
            RingBwdRule::WorkersPositive => ("num_workers", self.num_workers.to_string()),
            RingBwdRule::GroupSize | RingBwdRule::GroupRanks => ("replica_groups", format!("{:?}", self.replica_groups)),
            RingBwdRule::LncSize => ("lnc_size", self.lnc.to_string()),
            RingBwdRule::BatchHeads => ("B, N", d.map_or(String::new(), |d| format!("{}, {}", d.batch, d.heads))),
            RingBwdRule::SeqlenMultiple | RingBwdRule::SeqlenTiles => ("S", d.map_or(0, |d| d.seqlen).to_string()),
            RingBwdRule::HeadDimTiles => ("D", d.map_or(0, |d| d.head_dim).to_string()),
            RingBwdRule::SbufCapacity => ("S", self.sbuf_shortfall()),
        };
        NkiError::argument(param, value, rule.message())
    }

    /// The tokens per rank with their SBUF bytes, the target's capacity and the
    /// longest slice that fits (the value of a broken [`RingBwdRule::SbufCapacity`]).
    fn sbuf_shortfall(&self) -> String {
        let (Some(d), Some(dtype), Some(bytes), Some(max)) = (self.dims, self.dtype, self.sbuf_bytes(), self.max_seqlen()) else {
            return String::new();
        };
        let acc = if self.mixed_precision { Dtype::F32 } else { dtype };
        format!(
            "{}: its tiles take {bytes} B per SBUF partition, more than the {} B of {}; with D = {}, {dtype} inputs and {acc} accumulators at most {max} tokens per rank fit",
            d.seqlen,
            self.sbuf_capacity(),
            self.target,
            d.head_dim
        )
    }

    /// Checks the rules, the launch and the inputs: one tensor of each kind per
    /// rank, shapes and dtypes that agree, the dims and the LNC degree.
    pub fn check(&self, launch: &Launch, inputs: &RingBwdInputs<'_>) -> Result<()> {
        if let Some(rule) = self.violation() {
            return Err(self.rule_error(rule));
        }
        if launch.lnc_degree() as i64 != self.lnc {
            return Err(NkiError::argument("lnc_size", self.lnc, &format!("must equal the launch's LNC degree {}", launch.lnc_degree())));
        }
        if launch.hardware() != self.target {
            return Err(NkiError::argument("target", self.target, &format!("must equal the launch's generation {}", launch.hardware())));
        }
        let all = [("q", inputs.q), ("k", inputs.k), ("v", inputs.v), ("o", inputs.o), ("dy", inputs.dy), ("lse", inputs.lse)];
        check_ring_launch(launch, self.rings(), self.num_workers, &all)?;
        let q0 = shape_i64(&inputs.q[0]);
        let [b, h, d, s] = <[i64; 4]>::try_from(q0.as_slice())
            .map_err(|_| NkiError::argument("q", format!("shape {q0:?}"), "must be 4-d [B, N, D, S]"))?;
        let got = RingDims { batch: b, heads: h, seqlen: s, head_dim: d };
        if let Some(dims) = self.dims.filter(|&dims| dims != got) {
            return Err(NkiError::argument("q", format!("shape {q0:?}"), &format!("the configuration's dims are {dims:?}")));
        }
        let dtype = inputs.q[0].dtype();
        if let Some(want) = self.dtype.filter(|&want| want != dtype) {
            return Err(NkiError::argument("q", format!("dtype {dtype}"), &format!("the configuration's dtype is {want}")));
        }
        let derived = RingBwdConfig { dims: Some(got), dtype: Some(dtype), ..*self };
        if let Some(rule) = derived.violation() {
            return Err(derived.rule_error(rule));
        }
        for (name, list) in all {
            let want = if name == "lse" { vec![b, h, 128, s / 128] } else { q0.clone() };
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
        Ok(())
    }

    /// Checks, then runs the ring on every rank (and LNC program) of `launch`.
    pub fn launch(&self, launch: &Launch, inputs: &RingBwdInputs<'_>) -> Result<RingBwdOutputs> {
        self.check(launch, inputs)?;
        let groups: Vec<Vec<i64>> = self.replica_groups.iter().map(|g| g.to_vec()).collect();
        let report = launch.run_all(|ctx| {
            let r = ctx.rank();
            ring_attention_spmd_bwd::Call::new(&inputs.q[r], &inputs.k[r], &inputs.v[r], &inputs.o[r], &inputs.dy[r], &inputs.lse[r])
                .use_causal_mask(self.causal)
                .mixed_precision(self.mixed_precision)
                .softmax_scale(self.softmax_scale)
                .num_workers(self.num_workers)
                .lnc_size(self.lnc)
                .replica_groups((!groups.is_empty()).then(|| groups.clone()))
                .striped_attention(self.striped)
                .run(ctx)
        })?;
        let (mut dq, mut dk, mut dv) = (Vec::new(), Vec::new(), Vec::new());
        for mut programs in report.results {
            let (a, b, c) = programs.swap_remove(0);
            dq.push(a);
            dk.push(b);
            dv.push(c);
        }
        Ok(RingBwdOutputs { dq, dk, dv, comm: report.comm })
    }
}
