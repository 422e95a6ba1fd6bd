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
    /// Queries `(d, bs·q_head·s_active)`, or `(bs, q_head, s_active, d)` without [`TkgConfig::qk_in_sb`].
    pub q: &'a Tensor,
    /// Active keys `(d, bs·s_active)`, or `(bs, 1, s_active, d)` without [`TkgConfig::qk_in_sb`].
    pub k_active: &'a Tensor,
    /// Active values `(bs, 1, s_active, d)`.
    pub v_active: &'a Tensor,
    /// Cached keys `(B+, 1, d, full_sprior)`, or `(B+, 1, full_sprior, d)` with `tp_k_prior`.
    pub k_prior: &'a Tensor,
    /// Cached values `(B+, 1, full_sprior, d)`.
    pub v_prior: &'a Tensor,
    /// Visibility `(curr_sprior, bs, q_head, s_active)` uint8 (the first dimension
    /// `s_active` with [`TkgConfig::use_pos_id`]).
    pub mask: &'a Tensor,
    /// Sink logits `(q_head, 1)` (with [`TkgConfig::sink`]).
    pub sink: Option<&'a Tensor>,
    /// RoPE inverse frequencies `(d/2, 1)` (with [`TkgConfig::fuse_rope`]).
    pub inv_freqs: Option<&'a Tensor>,
    /// Positions of the active tokens `(bs, s_active)` (with fused RoPE or `use_pos_id`).
    pub rope_pos_ids: Option<&'a Tensor>,
    /// Sliding-window starts `(bs, s_active)` (with [`TkgConfig::window`]).
    pub start_pos_ids: Option<&'a Tensor>,
    /// Each batch's cache blocks `(bs, curr_sprior / block_len)` (with [`TkgConfig::block_len`]).
    pub active_blocks_table: Option<&'a Tensor>,
}

impl<'a> TkgInputs<'a> {
    /// The six tensors every configuration takes; the optional ones absent.
    pub fn new(
        q: &'a Tensor,
        k_active: &'a Tensor,
        v_active: &'a Tensor,
        k_prior: &'a Tensor,
        v_prior: &'a Tensor,
        mask: &'a Tensor,
    ) -> Self {
        let none = None;
        TkgInputs {
            q,
            k_active,
            v_active,
            k_prior,
            v_prior,
            mask,
            sink: none,
            inv_freqs: none,
            rope_pos_ids: none,
            start_pos_ids: none,
            active_blocks_table: none,
        }
    }

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
        let optional = [
            ("sink", self.sink),
            ("inv_freqs", self.inv_freqs),
            ("rope_pos_ids", self.rope_pos_ids),
            ("start_pos_ids", self.start_pos_ids),
            ("active_blocks_table", self.active_blocks_table),
        ];
        all.extend(optional.into_iter().filter_map(|(name, t)| t.map(|t| (name, t))));
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
            TkgRule::SActivePositive | TkgRule::LastTileActive | TkgRule::ColumnsFit => ("s_active", d.s_active.to_string()),
            TkgRule::CurrSpriorRange => ("curr_sprior", format!("{} with full_sprior = {}", d.curr_sprior, d.full_sprior)),
            TkgRule::SpriorTiles => ("curr_sprior", d.curr_sprior.to_string()),
            TkgRule::DHeadRange => ("d_head", d.d_head.to_string()),
            TkgRule::QkLayout => ("qk_in_sb", "false without fuse_rope".to_string()),
            TkgRule::RopeHeadEven => ("d_head", d.d_head.to_string()),
            TkgRule::RopeSprior => ("curr_sprior", d.curr_sprior.to_string()),
            TkgRule::WindowNeedsPosId => ("start_pos_ids", "given without use_pos_id".to_string()),
            TkgRule::BlockKv => ("block_len", self.block_len.to_string()),
        };
        NkiError::argument(param, value, rule.message())
    }

    /// The shape each tensor must have under this configuration; `k_prior` and
    /// `v_prior` may have more cache batches than `bs` (the first `bs` are used).
    /// A block cache's first dimension (its block count) is free: -1.
    fn expected_shapes(&self) -> [(&'static str, [i64; 4], usize); 11] {
        let TkgDims { bs, q_head: h, s_active: sa, curr_sprior: sk, full_sprior: full, d_head: d } = self.dims;
        let bl = self.block_len;
        let (k_prior, v_prior, cache_rank) = match (bl > 0, self.tp_k_prior) {
            (true, _) => ([-1, bl, d, 0], [-1, bl, d, 0], 3),
            (false, true) => ([bs, 1, full, d], [bs, 1, full, d], 4),
            (false, false) => ([bs, 1, d, full], [bs, 1, full, d], 4),
        };
        let (q, k_active) =
            if self.qk_in_sb { (([d, bs * h * sa, 0, 0], 2), ([d, bs * sa, 0, 0], 2)) } else { (([bs, h, sa, d], 4), ([bs, 1, sa, d], 4)) };
        let mask_keys = if self.use_pos_id { sa } else { sk };
        [
            ("q", q.0, q.1),
            ("k_active", k_active.0, k_active.1),
            ("v_active", [bs, 1, sa, d], 4),
            ("k_prior", k_prior, cache_rank),
            ("v_prior", v_prior, cache_rank),
            ("mask", [mask_keys, bs, h, sa], 4),
            ("sink", [h, 1, 0, 0], 2),
            ("inv_freqs", [d / 2, 1, 0, 0], 2),
            ("rope_pos_ids", [bs, sa, 0, 0], 2),
            ("start_pos_ids", [bs, sa, 0, 0], 2),
            ("active_blocks_table", [bs, if bl > 0 { sk / bl } else { 0 }, 0, 0], 2),
        ]
    }

    /// Each optional tensor with whether this configuration takes it.
    fn optional_inputs<'a>(&self, inputs: &TkgInputs<'a>) -> [(&'static str, Option<&'a Tensor>, bool, &'static str); 5] {
        [
            ("sink", inputs.sink, self.sink, "the configuration's sink"),
            ("inv_freqs", inputs.inv_freqs, self.fuse_rope, "fuse_rope"),
            ("rope_pos_ids", inputs.rope_pos_ids, self.fuse_rope || self.use_pos_id, "fuse_rope or use_pos_id"),
            ("start_pos_ids", inputs.start_pos_ids, self.window, "the configuration's sliding window"),
            ("active_blocks_table", inputs.active_blocks_table, self.block_len > 0, "block cache (block_len > 0)"),
        ]
    }

    /// Checks the configuration's rules and that `inputs` match it (dtypes, the
    /// sink present exactly when configured, shapes).
    pub fn check(&self, inputs: &TkgInputs<'_>) -> Result<()> {
        self.validate()?;
        for (name, given, wanted, why) in self.optional_inputs(inputs) {
            if given.is_some() != wanted {
                let (value, rule) = if wanted {
                    ("None", format!("{name} must be given with {why}"))
                } else {
                    ("a tensor", format!("{name} is given but the configuration has no {why}"))
                };
                return Err(NkiError::argument(name, value, &rule));
            }
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

    /// The library's `AttnTKGConfig` of this configuration: its shapes and flags,
    /// `use_gpsimd_sb2sb` at its default.
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
            strided_mm1: self.strided_mm1,
            use_pos_id: self.use_pos_id,
            fuse_rope: self.fuse_rope,
            qk_in_sb: self.qk_in_sb,
            k_out_in_sb: self.k_out_in_sb,
            out_in_sb: self.out_in_sb,
            enable_fa_s_prior_tiling: self.fa_tiling,
            block_len: self.block_len,
            ..AttnTKGConfig::default()
        }
    }

    /// The kernel call for `inputs` under `cfg` (this configuration's [`attn_config`](Self::attn_config)).
    fn call<'a>(inputs: &TkgInputs<'a>, cfg: &'a AttnTKGConfig) -> attention_tkg::Call<'a> {
        attention_tkg::Call::new(inputs.q, inputs.k_active, inputs.v_active, inputs.k_prior, inputs.v_prior, inputs.mask, cfg)
            .sink(inputs.sink)
            .inv_freqs(inputs.inv_freqs)
            .rope_pos_ids(inputs.rope_pos_ids)
            .start_pos_ids(inputs.start_pos_ids)
            .active_blocks_table(inputs.active_blocks_table)
    }

    /// Runs the kernel in the program `ctx` (inside a launch); returns `(out,
    /// k_out)`: `out` `(bs, q_head, d, s_active)` (`(d, bs·q_head·s_active)` with
    /// `out_in_sb`) and the active keys attended to, after RoPE when fused,
    /// `(bs, 1, d, s_active)` (`(d, bs·s_active)` with `k_out_in_sb`).
    pub fn run(&self, ctx: &Ctx, inputs: &TkgInputs<'_>) -> Result<(Tensor, Tensor)> {
        self.check(inputs)?;
        Self::call(inputs, &self.attn_config()).run(ctx)
    }

    /// Checks, then runs the kernel in the emulator on every program of `launch`.
    pub fn launch(&self, launch: &Launch, inputs: &TkgInputs<'_>) -> Result<(Tensor, Tensor)> {
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
        TkgInputs::new(&x[0], &x[1], &x[2], &x[3], &x[4], &x[5])
    }

    #[test]
    fn errors_name_the_parameter_its_value_and_the_rule() {
        let launch = Launch::new();
        let x = tensors();
        let cfg = TkgConfig::new(DIMS);
        // All ones: every visible value row is 1, so the output is 1.
        let (out, k_out) = cfg.launch(&launch, &inputs(&x)).unwrap();
        assert_eq!(k_out.shape(), [2, 1, 8, 1], "the active keys as given, in the k_out layout");
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
        let e = cfg.fuse_rope(true).launch(&launch, &inputs(&x)).unwrap_err();
        assert_eq!(e.to_string(), "invalid inv_freqs = None: inv_freqs must be given with fuse_rope");
        let e = cfg.window(true).launch(&launch, &inputs(&x)).unwrap_err();
        assert_eq!(e.to_string(), format!("invalid start_pos_ids = given without use_pos_id: {}", TkgRule::WindowNeedsPosId.message()));
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
        assert!(cfg.strided_mm1 && cfg.use_gpsimd_sb2sb && !cfg.fuse_rope && !cfg.use_pos_id && !cfg.out_in_sb && !cfg.k_out_in_sb);
        assert!(cfg.enable_fa_s_prior_tiling);
        assert_eq!(cfg.block_len, 0);
        let flags = TkgConfig::new(DIMS).fuse_rope(true).use_pos_id(true).qk_in_sb(false).out_in_sb(true).k_out_in_sb(true);
        let cfg = flags.strided_mm1(false).fa_tiling(false).attn_config();
        assert!(cfg.fuse_rope && cfg.use_pos_id && !cfg.qk_in_sb && cfg.out_in_sb && cfg.k_out_in_sb);
        assert!(!cfg.strided_mm1 && !cfg.enable_fa_s_prior_tiling);
        // The library's defaults.
        let d = AttnTKGConfig::default();
        assert_eq!((d.bs, d.block_len, d.tp_k_prior, d.qk_in_sb), (0, 0, false, false));
        assert!(d.strided_mm1 && d.use_gpsimd_sb2sb && d.enable_fa_s_prior_tiling && !d.fuse_rope && !d.out_in_sb);
    }

    #[test]
    fn a_block_cache_needs_its_table() {
        let x = tensors();
        let (i, cfg) = (inputs(&x), TkgConfig::new(DIMS).attn_config());
        let call = |c: &AttnTKGConfig| TkgConfig::call(&i, c).launch(&Launch::new()).unwrap_err().to_string();
        assert!(call(&AttnTKGConfig { block_len: 32, ..cfg.clone() }).contains(crate::tkg::attention_tkg::BLOCK_KV));
        assert!(call(&AttnTKGConfig { qk_in_sb: false, ..cfg.clone() }).contains(TkgRule::QkLayout.message()));
        let table = t(&[1, 1], Dtype::U32);
        let e = TkgConfig::call(&i, &cfg).active_blocks_table(Some(&table)).launch(&Launch::new()).unwrap_err().to_string();
        assert!(e.contains(crate::tkg::attention_tkg::BLOCK_KV), "{e}");
    }
}
