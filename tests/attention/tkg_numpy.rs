//! The emitted `attention_tkg.py` (NKI 2.x Python): it passes the signature check
//! against the official NKI tables, keeps the library's leading parameters, and
//! run under the NumPy executor of `tests/python/nki_harness` (fp32, LNC 1 and 2)
//! agrees with the emulator within `1e-5·max|emulator| + 1e-6` — and both agree
//! with the float64 decode reference — also with fused RoPE, masks from
//! positions, sliding windows, the in-SBUF layouts and one pass over the cache.

use crate::common;

use crate::common::attention::{run_numpy_kwargs, run_numpy_refused};
use crate::common::tkg::{Data, config, data, reference, shape, tensors};
use crate::common::tkg_features::{Blocks, Case, Features, as_block_cache, case};
use crate::common::{Arg, assert_close, errors};
use nki::attention::reference_tkg::Shape;
use nki::attention::tkg::attention_tkg::{BLOCK_KV, QK_LAYOUT, attention_tkg};
use nki::{Dtype, Launch, Precision};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const RTOL: f64 = 1e-5;
const ATOL: f64 = 1e-6;

fn package() -> &'static Path {
    static PKG: OnceLock<PathBuf> = OnceLock::new();
    PKG.get_or_init(|| common::package_of("tkg_pkg", &[&attention_tkg::INFO]))
}

#[test]
fn emitted_package_passes_the_check_and_keeps_the_library_parameters() {
    let (ok, out, err) = common::harness(&["check", &package().display().to_string()]);
    assert!(ok, "signature check failed:\n{out}{err}");
    let src = std::fs::read_to_string(package().join("attention_tkg.py")).expect("the package holds attention_tkg.py");
    // The library's parameters in its order: `out` is returned and the library's
    // `sbm` allocator and `DBG_TENSORS` have no counterpart.
    // `out` and `k_out` are returned, as the library returns them.
    let signature = "\n@nki.jit\ndef attention_tkg(q, k_active, v_active, k_prior, v_prior, mask, cfg, inv_freqs=None, rope_pos_ids=None, start_pos_ids=None, sink=None, active_blocks_table=None):";
    assert!(src.contains(signature), "attention_tkg.py keeps the signature:\n{src}");
    // `AttnTKGConfig` has the library's fields, in its order, with its defaults.
    let fields = [
        "bs: int = 0",
        "q_head: int = 0",
        "s_active: int = 0",
        "curr_sprior: int = 0",
        "full_sprior: int = 0",
        "d_head: int = 0",
        "block_len: int = 0",
        "tp_k_prior: bool = False",
        "strided_mm1: bool = True",
        "use_pos_id: bool = False",
        "fuse_rope: bool = False",
        "use_gpsimd_sb2sb: bool = True",
        "qk_in_sb: bool = False",
        "k_out_in_sb: bool = False",
        "out_in_sb: bool = False",
        "enable_fa_s_prior_tiling: bool = True",
    ];
    let class = src.split("class AttnTKGConfig(nl.NKIObject):").nth(1).expect("the dataclass is emitted");
    let declared: Vec<&str> = class
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("def ") && !l.starts_with('@'))
        .filter(|l| !l.starts_with('"') && l.contains(": "))
        .collect();
    assert_eq!(declared, fields);
    let init = std::fs::read_to_string(package().join("__init__.py")).expect("the package holds __init__.py");
    assert!(init.contains("from .attention_tkg import AttnTKGConfig\n"), "callers import the configuration:\n{init}");
}

/// The `AttnTKGConfig` of shape `s` (with `qk_in_sb`, the layout of `q` and
/// `k_active`), plus `extra` fields.
fn cfg_arg(s: Shape, tp_k_prior: bool, extra: &[(&'static str, Arg)]) -> Arg {
    let i = |v: usize| Arg::Int(v as i64);
    let mut fields = vec![
        ("bs", i(s.bs)),
        ("q_head", i(s.q_head)),
        ("s_active", i(s.s_active)),
        ("curr_sprior", i(s.curr_sprior)),
        ("full_sprior", i(s.full_sprior)),
        ("d_head", i(s.d)),
        ("tp_k_prior", Arg::Bool(tp_k_prior)),
        ("qk_in_sb", Arg::Bool(true)),
    ];
    fields.retain(|(k, _)| !extra.iter().any(|(e, _)| e == k));
    fields.extend(extra.iter().cloned());
    Arg::Object("AttnTKGConfig", fields)
}

/// The six leading tensors of `x` as NumPy-executor arguments.
fn tensor_args(x: &Data, tp_k_prior: bool) -> Vec<Arg> {
    let s = x.shape;
    let n = s.bs * s.q_head * s.s_active;
    let k_prior_shape = if tp_k_prior { vec![s.cache_bs, 1, s.full_sprior, s.d] } else { vec![s.cache_bs, 1, s.d, s.full_sprior] };
    vec![
        Arg::Tensor(vec![s.d, n], x.q.clone(), Dtype::F32),
        Arg::Tensor(vec![s.d, s.bs * s.s_active], x.k_active.clone(), Dtype::F32),
        Arg::Tensor(vec![s.bs, 1, s.s_active, s.d], x.v_active.clone(), Dtype::F32),
        Arg::Tensor(k_prior_shape, x.k_prior.clone(), Dtype::F32),
        Arg::Tensor(vec![s.cache_bs, 1, s.full_sprior, s.d], x.v_prior.clone(), Dtype::F32),
        Arg::Tensor(vec![s.curr_sprior, s.bs, s.q_head, s.s_active], x.mask.clone(), Dtype::U8),
    ]
}

fn np_case(name: &str, s: Shape, tp_k_prior: bool, sink: bool, lnc: usize) {
    let x: Data = data(name, s, sink, true, Dtype::F32);
    let t = tensors(&x, tp_k_prior, Dtype::F32);
    let emulated = config(s, tp_k_prior, sink)
        .launch(&Launch::new().lnc(lnc).precision(Precision::Fp32), &t.inputs())
        .expect("the emulator runs")
        .0
        .to_f32_vec();
    let mut args = tensor_args(&x, tp_k_prior);
    args.push(cfg_arg(s, tp_k_prior, &[]));
    let mut kwargs = Vec::new();
    if let Some(sk) = &x.sink {
        kwargs.push(("sink", Arg::Tensor(vec![s.q_head, 1], sk.clone(), Dtype::F32)));
    }
    let numpy = run_numpy_kwargs(package(), "attention_tkg", &args, &kwargs, lnc, "fp32");
    assert_eq!(numpy.len(), 2, "out and k_out");
    let emulated_f64: Vec<f64> = emulated.iter().map(|&v| f64::from(v)).collect();
    let (err, scale) = errors(&numpy[0], &emulated_f64);
    assert!(err <= ATOL + RTOL * scale, "{name}: NumPy vs emulator max abs error {err:.3e} (max|emulator| {scale:.3e})");
    assert_close(&format!("{name} NumPy vs float64"), &numpy[0], &reference(&x, tp_k_prior), ATOL, RTOL);
}

#[test]
fn numpy_executor_agrees_with_the_emulator() {
    np_case("np small", shape(1, 1, 1, 128, 256, 16), false, false, 1);
    np_case("np gqa sink tp", shape(2, 4, 2, 640, 768, 32), true, true, 2);
    np_case("np spare batch", Shape { cache_bs: 3, ..shape(2, 8, 1, 256, 256, 64) }, false, true, 1);
    // 44 heads of 3 tokens: two groups of heads on the partitions (42 and 2).
    np_case("np head groups", shape(2, 44, 3, 256, 256, 32), true, true, 2);
}

/// A case of the library's features under the NumPy executor (fp32) against the
/// emulator, both outputs, and the NumPy `out` against float64.
fn np_features(name: &str, c: Case, lnc: usize) {
    let (s, f) = (c.shape, c.features);
    let t = c.tensors();
    let (out, k_out) = c.config().launch(&Launch::new().lnc(lnc).precision(Precision::Fp32), &Case::inputs(&t)).expect("the emulator runs");
    let cfg = c.config().attn_config();
    let flags = [
        ("tp_k_prior", cfg.tp_k_prior),
        ("use_pos_id", cfg.use_pos_id),
        ("fuse_rope", cfg.fuse_rope),
        ("qk_in_sb", cfg.qk_in_sb),
        ("out_in_sb", cfg.out_in_sb),
        ("k_out_in_sb", cfg.k_out_in_sb),
        ("enable_fa_s_prior_tiling", cfg.enable_fa_s_prior_tiling),
        // No effect on the result: the library's own test flips it.
        ("strided_mm1", false),
    ];
    let mut extra: Vec<(&'static str, Arg)> = flags.iter().map(|&(k, v)| (k, Arg::Bool(v))).collect();
    extra.push(("block_len", Arg::Int(cfg.block_len)));
    let arg = |(_, shape, v, dt): &(&str, Vec<usize>, Vec<f64>, Dtype)| Arg::Tensor(shape.clone(), v.clone(), *dt);
    let mut args: Vec<Arg> = c.inputs[..6].iter().map(arg).collect();
    args.push(cfg_arg(s, f.tp_k_prior, &extra));
    let kwargs: Vec<(&str, Arg)> = c.inputs[6..].iter().map(|x| (x.0, arg(x))).collect();
    let numpy = run_numpy_kwargs(package(), "attention_tkg", &args, &kwargs, lnc, "fp32");
    assert_eq!(numpy.len(), 2, "out and k_out");
    for (what, np, em) in [("out", &numpy[0], &out), ("k_out", &numpy[1], &k_out)] {
        let em: Vec<f64> = em.to_f32_vec().iter().map(|&v| f64::from(v)).collect();
        let (err, scale) = errors(np, &em);
        assert!(err <= ATOL + RTOL * scale, "{name} {what}: NumPy vs emulator max abs error {err:.3e} (max|emulator| {scale:.3e})");
    }
    let rtol = RTOL + 8.0 * 2f64.powi(-24) * c.max_angle;
    assert_close(&format!("{name} NumPy vs float64"), &numpy[0], &c.out, ATOL, rtol);
}

#[test]
fn numpy_executor_agrees_with_the_emulator_on_the_library_features() {
    let f32 = Dtype::F32;
    let f = Features { rope: true, pos_id: true, qk_hbm: true, tp_k_prior: true, sink: true, ..Features::default() };
    np_features("np rope pid", case("np rope pid", shape(2, 2, 3, 640, 1024, 64), f, f32), 2);
    let f = Features { pos_id: true, window: Some(200), out_in_sb: true, k_out_in_sb: true, ..Features::default() };
    np_features("np window sb", case("np window sb", shape(2, 4, 2, 384, 384, 32), f, f32), 1);
    let f = Features { rope: true, no_fa_tiling: true, k_out_in_sb: true, ..Features::default() };
    np_features("np rope one pass", case("np rope one pass", shape(1, 2, 2, 256, 256, 64), f, f32), 1);
    // A block cache on LNC2 with s_prior sharded: 256 keys a core, reduced block length gcd(16, 2) = 2.
    let f = Features { tp_k_prior: true, sink: true, ..Features::default() };
    let c = as_block_cache(case("np block", shape(2, 2, 2, 512, 512, 32), f, f32), Blocks { block_len: 16, folds: (256, 2) });
    np_features("np block", c, 2);
}

#[test]
fn a_block_kv_cache_without_its_table_is_refused_by_name() {
    let s = shape(1, 1, 1, 128, 128, 16);
    let x: Data = data("np refused", s, false, false, Dtype::F32);
    let refused = |extra: &[(&'static str, Arg)], kwargs: &[(&str, Arg)]| {
        let mut args = tensor_args(&x, false);
        args.push(cfg_arg(s, false, extra));
        run_numpy_refused(package(), "attention_tkg", &args, kwargs)
    };
    let e = refused(&[("block_len", Arg::Int(16))], &[]);
    assert!(e.contains(&format!("AssertionError: {BLOCK_KV}")), "{e}");
    let table = Arg::Tensor(vec![1, 1], vec![0.0], Dtype::I32);
    let e = refused(&[], &[("active_blocks_table", table)]);
    assert!(e.contains(&format!("AssertionError: {BLOCK_KV}")), "{e}");
    // A rule of the typed configuration, with its message.
    let e = refused(&[("qk_in_sb", Arg::Bool(false))], &[]);
    assert!(e.contains(&format!("AssertionError: {QK_LAYOUT}")), "{e}");
}
