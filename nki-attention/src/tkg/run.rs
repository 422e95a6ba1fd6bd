//! Running `attention_tkg` from Rust with a [`TkgConfig`]: inputs tied to the
//! configuration, run-time checks with errors naming the parameter, and the output.

use super::attention_tkg::{AttnTKGConfig, attention_tkg};
use super::config::{TkgConfig, TkgDims, TkgRule};
use crate::dtypes::ParamDtypes;
use nki::{Ctx, Launch, NkiError, Result, Tensor};

/// The dtypes each tensor parameter of `attention_tkg` accepts, as the kernel
/// declares them: float data and a uint8 mask.
pub const DTYPES: ParamDtypes = ParamDtypes { kernel: &attention_tkg::INFO, aliases: &[] };

/// The tensors of one decode step, in the kernel's layouts (see
/// [`attention_tkg`](super::attention_tkg::attention_tkg)).
#[derive(Clone, Copy, Debug)]
pub struct TkgInputs<'a> {
    /// Queries `(d, bs·q_head·s_active)`.
    pub q: &'a Tensor,
    /// Active keys `(d, bs·s_active)`.
    pub k_active: &'a Tensor,
    /// Active values `(bs, 1, s_active, d)`.
    pub v_active: &'a Tensor,
    /// Cached keys `(B+, 1, d, full_sprior)`, or `(B+, 1, full_sprior, d)` with `tp_k_prior`.
    pub k_prior: &'a Tensor,
    /// Cached values `(B+, 1, full_sprior, d)`.
    pub v_prior: &'a Tensor,
    /// Visibility `(curr_sprior, bs, q_head, s_active)`, uint8.
    pub mask: &'a Tensor,
    /// Sink logits `(q_head, 1)` (with [`TkgConfig::sink`]).
    pub sink: Option<&'a Tensor>,
}

impl<'a> TkgInputs<'a> {
    /// Every tensor given, with its parameter name.
    pub fn tensors(&self) -> Vec<(&'static str, &'a Tensor)> {
        let mut all = vec![
            ("q", self.q),
            ("k_active", self.k_active),
            ("v_active", self.v_active),
            ("k_prior", self.k_prior),
            ("v_prior", self.v_prior),
            ("mask", self.mask),
        ];
        all.extend(self.sink.map(|t| ("sink", t)));
        all
    }
}

impl TkgConfig {
    /// The error for a broken rule: the parameter, its value and the rule.
    pub fn rule_error(&self, rule: TkgRule) -> NkiError {
        let d = self.dims;
        let (param, value) = match rule {
            TkgRule::BatchPositive => ("bs", d.bs.to_string()),
            TkgRule::QHeadPositive => ("q_head", d.q_head.to_string()),
            TkgRule::SActivePositive | TkgRule::LastTileActive => ("s_active", d.s_active.to_string()),
            TkgRule::CurrSpriorRange => ("curr_sprior", format!("{} with full_sprior = {}", d.curr_sprior, d.full_sprior)),
            TkgRule::SpriorTiles => ("curr_sprior", d.curr_sprior.to_string()),
            TkgRule::DHeadRange => ("d_head", d.d_head.to_string()),
            TkgRule::ColumnsFit => ("q_head", format!("{} with s_active = {}", d.q_head, d.s_active)),
        };
        NkiError::argument(param, value, rule.message())
    }

    /// The shape each tensor must have under this configuration; `k_prior` and
    /// `v_prior` may have more cache batches than `bs` (the first `bs` are used).
    fn expected_shapes(&self) -> [(&'static str, [i64; 4], usize); 7] {
        let TkgDims { bs, q_head: h, s_active: sa, curr_sprior: sk, full_sprior: full, d_head: d } = self.dims;
        let k_prior = if self.tp_k_prior { [bs, 1, full, d] } else { [bs, 1, d, full] };
        [
            ("q", [d, bs * h * sa, 0, 0], 2),
            ("k_active", [d, bs * sa, 0, 0], 2),
            ("v_active", [bs, 1, sa, d], 4),
            ("k_prior", k_prior, 4),
            ("v_prior", [bs, 1, full, d], 4),
            ("mask", [sk, bs, h, sa], 4),
            ("sink", [h, 1, 0, 0], 2),
        ]
    }

    /// Checks the configuration's rules and that `inputs` match it (dtypes, the
    /// sink present exactly when configured, shapes).
    pub fn check(&self, inputs: &TkgInputs<'_>) -> Result<()> {
        self.validate()?;
        if inputs.sink.is_some() != self.sink {
            let (value, rule) = if self.sink {
                ("None", "the configuration has a sink, so sink must be given")
            } else {
                ("a tensor", "sink is given but the configuration has no sink")
            };
            return Err(NkiError::argument("sink", value, rule));
        }
        for (param, t) in inputs.tensors() {
            DTYPES.check(param, t)?;
        }
        for (name, t) in inputs.tensors() {
            let (_, want, rank) = self.expected_shapes().into_iter().find(|(n, _, _)| *n == name).expect("every parameter has a shape");
            let got: Vec<i64> = t.shape().iter().map(|&x| x as i64).collect();
            let cache = matches!(name, "k_prior" | "v_prior");
            let fits = got.len() == rank
                && got.iter().zip(&want[..rank]).enumerate().all(|(i, (g, w))| if cache && i == 0 { g >= w } else { g == w });
            if !fits {
                let rule = if cache {
                    "the configuration makes it {want} (at least bs cache batches)"
                } else {
                    "the configuration makes it {want}"
                };
                return Err(NkiError::argument(name, format!("shape {got:?}"), &rule.replace("{want}", &format!("{:?}", &want[..rank]))));
            }
        }
        Ok(())
    }

    /// The library's `AttnTKGConfig` of this configuration: its shapes and
    /// `tp_k_prior`, `q` and `k_active` in the `qk_in_sb` layouts, every other
    /// field at its default.
    pub fn attn_config(&self) -> AttnTKGConfig {
        let d = self.dims;
        AttnTKGConfig {
            bs: d.bs,
            q_head: d.q_head,
            s_active: d.s_active,
            curr_sprior: d.curr_sprior,
            full_sprior: d.full_sprior,
            d_head: d.d_head,
            tp_k_prior: self.tp_k_prior,
            qk_in_sb: true,
            ..AttnTKGConfig::default()
        }
    }

    /// The kernel call for `inputs` under `cfg` (this configuration's [`attn_config`](Self::attn_config)).
    fn call<'a>(inputs: &TkgInputs<'a>, cfg: &'a AttnTKGConfig) -> attention_tkg::Call<'a> {
        attention_tkg::Call::new(inputs.q, inputs.k_active, inputs.v_active, inputs.k_prior, inputs.v_prior, inputs.mask, cfg)
            .sink(inputs.sink)
    }

    /// Runs the kernel in the program `ctx` (inside a launch); returns `out`
    /// `(bs, q_head, d, s_active)`.
    pub fn run(&self, ctx: &Ctx, inputs: &TkgInputs<'_>) -> Result<Tensor> {
        self.check(inputs)?;
        Self::call(inputs, &self.attn_config()).run(ctx)
    }

    /// Checks, then runs the kernel in the emulator on every program of `launch`.
    pub fn launch(&self, launch: &Launch, inputs: &TkgInputs<'_>) -> Result<Tensor> {
        self.check(inputs)?;
        Self::call(inputs, &self.attn_config()).launch(launch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tkg::{FA_TILE_SIZE, MM1_KEYS, P_MAX, PV_GROUP_KEYS, TkgDims};
    use nki::Dtype;

    const DIMS: TkgDims = TkgDims { bs: 2, q_head: 2, s_active: 1, curr_sprior: 128, full_sprior: 256, d_head: 8 };

    fn t(shape: &[usize], dtype: Dtype) -> Tensor {
        Tensor::from_f32(shape, &vec![1.0; shape.iter().product()], dtype).unwrap()
    }

    /// `(q, k_active, v_active, k_prior, v_prior, mask)` matching [`DIMS`].
    fn tensors() -> [Tensor; 6] {
        [
            t(&[8, 4], Dtype::F32),
            t(&[8, 2], Dtype::F32),
            t(&[2, 1, 1, 8], Dtype::F32),
            t(&[3, 1, 8, 256], Dtype::F32),
            t(&[3, 1, 256, 8], Dtype::F32),
            t(&[128, 2, 2, 1], Dtype::U8),
        ]
    }

    fn inputs(x: &[Tensor; 6]) -> TkgInputs<'_> {
        TkgInputs { q: &x[0], k_active: &x[1], v_active: &x[2], k_prior: &x[3], v_prior: &x[4], mask: &x[5], sink: None }
    }

    #[test]
    fn errors_name_the_parameter_its_value_and_the_rule() {
        let launch = Launch::new();
        let x = tensors();
        let cfg = TkgConfig::new(DIMS);
        // All ones: every visible value row is 1, so the output is 1.
        let out = cfg.launch(&launch, &inputs(&x)).unwrap();
        assert!(out.to_f32_vec().iter().all(|&v| (v - 1.0).abs() < 1e-6));

        let float_mask = t(&[128, 2, 2, 1], Dtype::F32);
        let e = cfg.launch(&launch, &TkgInputs { mask: &float_mask, ..inputs(&x) }).unwrap_err();
        assert_eq!(e.to_string(), "invalid mask = float32: attention_tkg takes mask as uint8");
        let short_cache = t(&[1, 1, 256, 8], Dtype::F32);
        let e = cfg.launch(&launch, &TkgInputs { v_prior: &short_cache, ..inputs(&x) }).unwrap_err();
        assert!(e.to_string().starts_with("invalid v_prior = shape [1, 1, 256, 8]: the configuration makes it [2, 1, 256, 8]"), "{e}");
        let e = cfg.tp_k_prior(true).launch(&launch, &inputs(&x)).unwrap_err();
        assert!(e.to_string().starts_with("invalid k_prior = shape [3, 1, 8, 256]"), "{e}");
        let e = cfg.sink(true).launch(&launch, &inputs(&x)).unwrap_err();
        assert!(e.to_string().starts_with("invalid sink = None"), "{e}");
        let e = TkgConfig::new(TkgDims { curr_sprior: 100, ..DIMS }).launch(&launch, &inputs(&x)).unwrap_err();
        assert_eq!(e.to_string(), "invalid curr_sprior = 100: attention_tkg: curr_sprior must be a multiple of 128 (p_max)");
    }

    #[test]
    fn the_tile_sizes_are_module_constants_of_the_emitted_kernel() {
        let pkg = nki::emit::Package::new(&[&super::attention_tkg::INFO]).unwrap();
        let source = &pkg.files()["attention_tkg.py"];
        for (name, value) in [("P_MAX", P_MAX), ("MM1_KEYS", MM1_KEYS), ("PV_GROUP_KEYS", PV_GROUP_KEYS), ("FA_TILE_SIZE", FA_TILE_SIZE)] {
            assert!(source.contains(&format!("\n{name} = {value}\n")), "{name} is declared once:\n{source}");
            assert!(source.matches(name).count() > 1, "{name} is used by name");
        }
    }

    #[test]
    fn the_configuration_becomes_the_library_dataclass() {
        let cfg = TkgConfig::new(DIMS).tp_k_prior(true).attn_config();
        assert_eq!((cfg.bs, cfg.q_head, cfg.s_active, cfg.curr_sprior, cfg.full_sprior, cfg.d_head), (2, 2, 1, 128, 256, 8));
        assert!(cfg.tp_k_prior && cfg.qk_in_sb);
        // The rest keep the library's defaults.
        let d = AttnTKGConfig::default();
        assert_eq!((d.bs, d.block_len, d.tp_k_prior, d.qk_in_sb), (0, 0, false, false));
        assert!(cfg.strided_mm1 && cfg.use_gpsimd_sb2sb && !cfg.fuse_rope && !cfg.use_pos_id && !cfg.out_in_sb && !cfg.k_out_in_sb);
        assert_eq!(cfg.block_len, 0);
    }

    #[test]
    fn a_field_it_does_not_implement_is_refused_by_name() {
        let x = tensors();
        let (i, cfg) = (inputs(&x), TkgConfig::new(DIMS).attn_config());
        let call = |c: &AttnTKGConfig| TkgConfig::call(&i, c).launch(&Launch::new()).unwrap_err().to_string();
        assert!(call(&AttnTKGConfig { fuse_rope: true, ..cfg.clone() }).contains("cfg.fuse_rope=True is not implemented"));
        assert!(call(&AttnTKGConfig { block_len: 32, ..cfg.clone() }).contains("cfg.block_len=32"));
        assert!(call(&AttnTKGConfig { qk_in_sb: false, ..cfg.clone() }).contains("cfg.qk_in_sb=False"));
        let e = TkgConfig::call(&i, &cfg).k_out(&x[1]).launch(&Launch::new()).unwrap_err().to_string();
        assert!(e.contains("k_out is written by fused RoPE"), "{e}");
    }
}
