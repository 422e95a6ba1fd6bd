//! Running `attention_cte` from Rust with a [`CteConfig`]: inputs tied to the
//! configuration, run-time checks with errors naming the parameter, and typed outputs.

use super::attention_cte::attention_cte;
use super::config::{CteConfig, CteRule};
use crate::dtypes::ParamDtypes;
use nki::{Ctx, Launch, NkiError, Result, Tensor};

/// The dtypes each tensor parameter of `attention_cte` accepts, as the kernel
/// declares them: float data (bf16, fp16, fp32, the documented input dtypes),
/// an int32 `prior_used_len`, int32 or fp32 positions in `cp_offset` and the
/// packing bounds.
pub const DTYPES: ParamDtypes = ParamDtypes { kernel: &attention_cte::INFO, aliases: &[] };

/// The prefix cache: prior keys and values and how many of them are used.
#[derive(Clone, Copy, Debug)]
pub struct Prior<'a> {
    /// `k_prior`, in `k`'s layout.
    pub k: &'a Tensor,
    /// `v_prior`, `(bs_kv, seqlen_prior, d)`.
    pub v: &'a Tensor,
    /// `prior_used_len`, an int32 `(1,)` tensor.
    pub used_len: &'a Tensor,
}

/// The tensors of one `attention_cte` call, in the kernel's layouts.
#[derive(Clone, Copy, Debug)]
pub struct CteInputs<'a> {
    /// Queries.
    pub q: &'a Tensor,
    /// Keys.
    pub k: &'a Tensor,
    /// Values.
    pub v: &'a Tensor,
    /// Prefix cache (with [`CteConfig::prefix_caching`]).
    pub prior: Option<Prior<'a>>,
    /// `(bs, 1)` sink logits (with [`CteConfig::sink`]).
    pub sink: Option<&'a Tensor>,
    /// `(1, 1)` CP offset (with context parallelism).
    pub cp_offset: Option<&'a Tensor>,
    /// `(bound_min, bound_max)`, each `(bs, seqlen_q, 1)` (with [`CteConfig::packing`]).
    pub bounds: Option<(&'a Tensor, &'a Tensor)>,
}

impl<'a> CteInputs<'a> {
    /// Just queries, keys and values.
    pub fn new(q: &'a Tensor, k: &'a Tensor, v: &'a Tensor) -> Self {
        CteInputs { q, k, v, prior: None, sink: None, cp_offset: None, bounds: None }
    }

    /// Every tensor given, with its parameter name.
    pub fn tensors(&self) -> Vec<(&'static str, &'a Tensor)> {
        let mut all = vec![("q", self.q), ("k", self.k), ("v", self.v)];
        if let Some(p) = self.prior {
            all.extend([("k_prior", p.k), ("v_prior", p.v), ("prior_used_len", p.used_len)]);
        }
        all.extend(self.sink.map(|t| ("sink", t)));
        all.extend(self.cp_offset.map(|t| ("cp_offset", t)));
        if let Some((lo, hi)) = self.bounds {
            all.extend([("bound_min", lo), ("bound_max", hi)]);
        }
        all
    }
}

/// What `attention_cte` returns.
#[derive(Clone, Debug)]
pub struct CteOutputs {
    /// The attention output, dtype of `q`.
    pub out: Tensor,
    /// With `cache_softmax`: the negated row max, `(bs, 128, ceil(seqlen_q / 128))`.
    pub neg_max: Option<Tensor>,
    /// With `cache_softmax`: `1 / row sum` (the raw sum with `skip_output_normalization`).
    pub sum: Option<Tensor>,
}

fn presence(param: &str, given: bool, wanted: bool, flag: &str) -> Result<()> {
    if given != wanted {
        let rule =
            if wanted { format!("{flag} is set, so {param} must be given") } else { format!("{param} is given but {flag} is not set") };
        return Err(NkiError::argument(param, if given { "a tensor" } else { "None" }, &rule));
    }
    Ok(())
}

impl CteConfig {
    /// The error for a broken rule: the parameter, its value and the rule.
    pub fn rule_error(&self, rule: CteRule) -> NkiError {
        let d = self.dims;
        let (param, value): (&str, String) = match rule {
            CteRule::CacheSoftmaxSeqlen | CteRule::SeqlenQTooLong => ("seqlen_q", d.map_or(0, |d| d.seqlen_q).to_string()),
            CteRule::PackingWithPrefix => ("bound_min", "given with k_prior".into()),
            CteRule::PackingWithCp => ("global_cp_deg", format!("{:?}", self.global_cp_deg)),
            CteRule::BatchPositive | CteRule::BatchTooLarge => ("bs", d.map_or(0, |d| d.batch).to_string()),
            CteRule::BatchKvPositive => ("bs_kv", d.map_or(0, |d| d.batch_kv).to_string()),
            CteRule::BatchNotMultiple => ("bs", d.map_or(String::new(), |d| format!("{} with bs_kv = {}", d.batch, d.batch_kv))),
            CteRule::SeqlenKvTooLong => ("seqlen_kv", d.map_or(String::new(), |d| format!("{} + prior {}", d.seqlen_kv, d.seqlen_prior))),
            CteRule::WindowTooLarge | CteRule::WindowNegative => ("sliding_window", self.sliding_window.to_string()),
            CteRule::HeadDimPositive | CteRule::HeadDimTooLarge => ("d", d.map_or(0, |d| d.head_dim).to_string()),
            CteRule::MmOutDtype => ("mm_out_dtype", format!("{} on {}", self.mm_out_dtype, self.target)),
            CteRule::CpDegree => ("global_cp_deg", format!("{:?}", self.global_cp_deg)),
            CteRule::ScaleMustBeOne | CteRule::PackingScale | CteRule::ScaleNotFinite | CteRule::CausalScale => {
                ("scale", self.scale.to_string())
            }
            CteRule::CpNeedsCausal | CteRule::SwaNeedsCausal | CteRule::StripedNeedsCausal => ("causal_mask", "false".into()),
            CteRule::StripedNeedsCp => ("global_cp_deg", "None".into()),
            CteRule::StripedWithSwa => ("sliding_window", self.sliding_window.to_string()),
            CteRule::StripedWithPrefix => ("cp_striped_input", "true with prefix caching".into()),
            CteRule::SkipNormNeedsCache => ("cache_softmax", "false".into()),
        };
        NkiError::argument(param, value, rule.message())
    }

    /// Checks the configuration's rules and that `inputs` match it (presence of the
    /// optional tensors, static shapes).
    pub fn check(&self, inputs: &CteInputs<'_>) -> Result<()> {
        self.validate()?;
        presence("k_prior", inputs.prior.is_some(), self.prefix_caching, "prefix_caching")?;
        presence("sink", inputs.sink.is_some(), self.sink, "sink")?;
        presence("cp_offset", inputs.cp_offset.is_some(), self.global_cp_deg.is_some(), "global_cp_deg")?;
        presence("bound_min", inputs.bounds.is_some(), self.packing, "packing")?;
        for (param, t) in inputs.tensors() {
            DTYPES.check(param, t)?;
        }
        if let Some(d) = self.dims {
            let q = if self.tp_q { [d.batch, d.seqlen_q, d.head_dim] } else { [d.batch, d.head_dim, d.seqlen_q] };
            let k = if self.tp_k { [d.batch_kv, d.seqlen_kv, d.head_dim] } else { [d.batch_kv, d.head_dim, d.seqlen_kv] };
            let mut expected = vec![("q", inputs.q, q), ("k", inputs.k, k), ("v", inputs.v, [d.batch_kv, d.seqlen_kv, d.head_dim])];
            if let Some(p) = inputs.prior {
                let sp = d.seqlen_prior;
                let kp = if self.tp_k { [d.batch_kv, sp, d.head_dim] } else { [d.batch_kv, d.head_dim, sp] };
                expected.extend([("k_prior", p.k, kp), ("v_prior", p.v, [d.batch_kv, sp, d.head_dim])]);
            }
            for (name, t, want) in expected {
                let got: Vec<i64> = t.shape().iter().map(|&x| x as i64).collect();
                if got != want {
                    return Err(NkiError::argument(name, format!("shape {got:?}"), &format!("the configuration's dims make it {want:?}")));
                }
            }
        }
        Ok(())
    }

    /// The kernel call for `inputs` under this configuration.
    pub fn call<'a>(&self, inputs: &CteInputs<'a>) -> attention_cte::Call<'a> {
        let mut call = attention_cte::Call::new(inputs.q, inputs.k, inputs.v)
            .scale(self.scale)
            .causal_mask(self.causal_mask)
            .sliding_window((self.sliding_window != 0).then_some(self.sliding_window))
            .tp_q(self.tp_q)
            .tp_k(self.tp_k)
            .tp_out(self.tp_out)
            .cache_softmax(self.cache_softmax)
            .softmax_dtype(self.softmax_dtype)
            .mm_out_dtype(self.mm_out_dtype)
            .global_cp_deg(self.global_cp_deg)
            .cp_strided_q_slicing(self.cp_strided_q_slicing)
            .cp_striped_input(self.cp_striped_input)
            .skip_output_normalization(self.skip_output_normalization)
            .sink(inputs.sink)
            .cp_offset(inputs.cp_offset);
        if let Some(p) = inputs.prior {
            call = call.k_prior(p.k).v_prior(p.v).prior_used_len(p.used_len);
        }
        if let Some((lo, hi)) = inputs.bounds {
            call = call.bound_min(lo).bound_max(hi);
        }
        call
    }

    /// Runs the kernel in the program `ctx` (inside a launch).
    pub fn run(&self, ctx: &Ctx, inputs: &CteInputs<'_>) -> Result<CteOutputs> {
        self.check(inputs)?;
        Self::outputs(self.call(inputs).run(ctx)?)
    }

    /// Checks, then runs the kernel in the emulator on every program of `launch`.
    pub fn launch(&self, launch: &Launch, inputs: &CteInputs<'_>) -> Result<CteOutputs> {
        self.check(inputs)?;
        Self::outputs(self.call(inputs).launch(launch)?)
    }

    fn outputs(o: nki::Outputs) -> Result<CteOutputs> {
        let mut it = o.into_vec().into_iter();
        let out = it.next().ok_or_else(|| NkiError::new(nki::ErrorKind::Shape, "attention_cte returned no output"))?;
        Ok(CteOutputs { out, neg_max: it.next(), sum: it.next() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scale::MIN_MASKED_SCALE;
    use nki::{Dtype, ErrorKind};

    fn inputs(q_dtype: Dtype) -> [Tensor; 3] {
        let t = |shape: &[usize], dtype| Tensor::from_f32(shape, &vec![0.5; 128 * 16], dtype).unwrap();
        [t(&[1, 128, 16], q_dtype), t(&[1, 16, 128], Dtype::F32), t(&[1, 128, 16], Dtype::F32)]
    }

    #[test]
    fn the_typed_api_refuses_integer_data_and_bad_scales_naming_the_parameter() {
        let launch = Launch::new();
        let [q, k, v] = inputs(Dtype::I32);
        let e = CteConfig::new().launch(&launch, &CteInputs::new(&q, &k, &v)).unwrap_err();
        assert_eq!(e.to_string(), "invalid q = int32: attention_cte takes q as float32, bfloat16 or float16");
        let used = Tensor::from_f32(&[1], &[4.0], Dtype::F32).unwrap();
        let [q, k, v] = inputs(Dtype::Bf16);
        let with_prior = CteInputs { prior: Some(Prior { k: &k, v: &v, used_len: &used }), ..CteInputs::new(&q, &k, &v) };
        let e = CteConfig::new().prefix_caching(true).launch(&launch, &with_prior).unwrap_err();
        assert!(e.to_string().starts_with("invalid prior_used_len = float32: attention_cte takes prior_used_len as int32"), "{e}");
        for (cfg, want) in [
            (CteConfig::new().scale(f64::NAN), "invalid scale = NaN: attention_cte: scale must be a finite float32"),
            (CteConfig::new().scale(0.0), "invalid scale = 0: attention_cte: with causal_mask the scale must be at least 1e-30"),
        ] {
            assert!(cfg.launch(&launch, &CteInputs::new(&q, &k, &v)).unwrap_err().to_string().starts_with(want), "{cfg:?}");
        }
        assert!(CteRule::CausalScale.message().contains(&format!("at least {MIN_MASKED_SCALE:e}")));
    }

    #[test]
    fn the_emitted_kernel_asserts_the_scale_rules_itself() {
        let [q, k, v] = inputs(Dtype::F32);
        for (scale, causal) in [(-0.5, true), (0.0, true), (f64::INFINITY, false), (1e39, false)] {
            let e = attention_cte::Call::new(&q, &k, &v).scale(scale).causal_mask(causal).launch(&Launch::new()).unwrap_err();
            assert_eq!(e.kind, ErrorKind::Assertion, "{scale} {causal}: {e}");
            assert!(e.message.contains("scale must be a finite float32"), "{e}");
        }
        // The kernel checks its configuration in the `check_config` helper.
        let source = super::super::attention_cte::check_config::NKI_SOURCE;
        assert!(source.contains(&format!("(not ac.causal_mask or scale >= {MIN_MASKED_SCALE:e})")), "the assert uses the rule's threshold");
    }
}
