//! The library's `rotational_topk` against a float64 sort of each row, in both
//! precision modes, over the documented shapes (vocabularies to 151,936, `k` to
//! 2,048, more rows than one tile), sorted and unsorted, with ties, with LNC 1
//! and 2; its configuration rules and the refusal of a config that is not the
//! plan for its input; its emitted source under NumPy against the emulator.

use crate::common;

use crate::common::attention::{run_numpy_kwargs, run_numpy_refused};
use crate::common::{Arg, as_dtype, package_of, tensor, uniform};
use nki::{Dtype, Launch, Precision};
use nkilib::topk::rotational_topk::{
    RotationalPlan, RotationalTopkConfig, TopkRule, rotational_topk, rotational_topk_config, rotational_topk_plan,
};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Per row of `v` columns, the `k` largest values and their columns: a stable
/// float64 sort, descending (equal values: the lower column first).
fn reference(x: &[f64], v: usize, k: usize) -> (Vec<f64>, Vec<i64>) {
    let (mut vals, mut idx) = (Vec::new(), Vec::new());
    for row in x.chunks(v) {
        let mut order: Vec<usize> = (0..v).collect();
        order.sort_by(|&a, &b| row[b].partial_cmp(&row[a]).expect("no NaN").then(a.cmp(&b)));
        for &j in &order[..k] {
            vals.push(row[j]);
            idx.push(j as i64);
        }
    }
    (vals, idx)
}

/// Rows of distinct values: each row a shuffle of `v` consecutive integers
/// (exact in fp32), shifted per row so the rows differ.
fn distinct(rows: usize, v: usize, seed: u64) -> Vec<f64> {
    let mut out = Vec::with_capacity(rows * v);
    for r in 0..rows {
        let keys = uniform(v, seed + r as u64, 0.0, 1.0);
        let mut order: Vec<usize> = (0..v).collect();
        order.sort_by(|&a, &b| keys[a].total_cmp(&keys[b]));
        out.extend(order.iter().map(|&j| j as f64 - (v / 2) as f64 + r as f64));
    }
    out
}

/// Rows with many ties: uniform values rounded to bf16 (exact in both dtypes),
/// a few hundred distinct values per row.
fn tied(rows: usize, v: usize, seed: u64) -> Vec<f64> {
    as_dtype(&uniform(rows * v, seed, -4.0, 4.0).iter().map(|u| (u * 16.0).round() / 16.0).collect::<Vec<_>>(), Dtype::Bf16)
}

/// A call: `inp` of `shape` (last dim `V`), `k`, `sorted`.
struct Call<'a> {
    shape: &'a [usize],
    k: usize,
    sorted: bool,
}

impl Call<'_> {
    fn rows(&self) -> usize {
        self.shape[..self.shape.len() - 1].iter().product()
    }

    fn vocab(&self) -> usize {
        self.shape[self.shape.len() - 1]
    }

    /// The emulator's values and indices, under the config for the launch's programs.
    fn run(&self, x: &[f64], dtype: Dtype, launch: &Launch) -> nki::Result<(Vec<f64>, Vec<i64>)> {
        let cfg = self.config(launch.programs() as i64);
        let (v, i) = rotational_topk::Call::new(&tensor(self.shape, x, dtype), &cfg).launch(launch)?;
        let mut out_shape = self.shape.to_vec();
        *out_shape.last_mut().unwrap() = self.k;
        assert_eq!((v.shape(), v.dtype(), i.shape(), i.dtype()), (&out_shape[..], dtype, &out_shape[..], Dtype::U32));
        Ok((v.to_f32_vec().into_iter().map(f64::from).collect(), i.to_i64_vec()))
    }

    fn plan(&self, programs: i64) -> RotationalPlan {
        rotational_topk_plan(self.rows() as i64, self.vocab() as i64, self.k as i64, self.sorted, programs).unwrap()
    }

    /// The kernel's `config` for `programs` LNC programs.
    fn config(&self, programs: i64) -> RotationalTopkConfig {
        rotational_topk_config(self.rows() as i64, self.vocab() as i64, self.k as i64, self.sorted, programs).unwrap()
    }

    /// Checks a result against the float64 reference: sorted values exactly
    /// (unsorted: the same multiset), every index distinct in its row and
    /// pointing at its value; `exact_indices` also asserts the reference's
    /// indices (rows of distinct values, or one stage, which takes equal values
    /// lowest column first).
    fn check(&self, what: &str, x: &[f64], got: &(Vec<f64>, Vec<i64>), exact_indices: bool) {
        let (v, k) = (self.vocab(), self.k);
        let (want_v, want_i) = reference(x, v, k);
        let (got_v, got_i) = got;
        for r in 0..self.rows() {
            let (gv, gi) = (&got_v[r * k..(r + 1) * k], &got_i[r * k..(r + 1) * k]);
            let mut sorted_v = gv.to_vec();
            if !self.sorted {
                sorted_v.sort_by(|a, b| b.total_cmp(a));
            }
            assert_eq!(sorted_v, want_v[r * k..(r + 1) * k], "{what}: row {r} values");
            let mut seen = gi.to_vec();
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen.len(), k, "{what}: row {r} repeats an index");
            for (j, (&val, &col)) in gv.iter().zip(gi).enumerate() {
                assert!((0..v as i64).contains(&col), "{what}: row {r} output {j}: index {col} outside 0..{v}");
                assert_eq!(x[r * v + col as usize], val, "{what}: row {r} output {j}: index {col} does not hold {val}");
            }
            if exact_indices && self.sorted {
                assert_eq!(gi, &want_i[r * k..(r + 1) * k], "{what}: row {r} indices");
            }
        }
    }
}

fn fp32() -> Launch {
    Launch::new().precision(Precision::Fp32)
}

/// Smallest (one row, a vocabulary of 64 scanned in one stage), typical (32k
/// and GPT-2's 50,257, not a multiple of the stages), cases of the library's
/// own tests (`k` 99 padded to 13 stages of 8; 256 rows over two programs,
/// which scan), the library's largest vocabulary with `k` 256 and its largest
/// `k` (2,048), and its largest batch (1,024 rows over two programs, tiled by
/// the cost model).
const SHAPES: [(&[usize], usize, usize); 8] = [
    (&[1, 64], 5, 1),
    (&[4, 32000], 64, 1),
    (&[2, 3, 50257], 50, 2),
    (&[1, 3168], 99, 2),
    (&[256, 3168], 256, 2),
    (&[8, 151936], 256, 2),
    (&[1, 151936], 2048, 1),
    (&[1024, 2048], 16, 2),
];

/// Rows of distinct fp32 values against the reference, values and indices exactly.
fn distinct_rows_match_a_float64_sort(launch: Launch) {
    for (shape, k, lnc) in SHAPES {
        let call = Call { shape, k, sorted: true };
        let x = distinct(call.rows(), call.vocab(), 7 + k as u64);
        let got = call.run(&x, Dtype::F32, &launch.clone().lnc(lnc)).unwrap();
        call.check(&format!("{shape:?} k={k} {launch:?}"), &x, &got, true);
    }
}

#[test]
fn distinct_values_match_a_float64_sort_in_fp32_precision() {
    distinct_rows_match_a_float64_sort(fp32());
}

#[test]
fn distinct_values_match_a_float64_sort_in_default_precision() {
    distinct_rows_match_a_float64_sort(Launch::new());
}

#[test]
fn bf16_rows_with_ties_give_the_exact_values_at_valid_distinct_indices() {
    for (shape, k, lnc) in SHAPES {
        let call = Call { shape, k, sorted: true };
        let x = tied(call.rows(), call.vocab(), 11 + k as u64);
        let got = call.run(&x, Dtype::Bf16, &Launch::new().lnc(lnc)).unwrap();
        // One stage scans each row, equal values lowest column first.
        let scanned = call.plan(lnc as i64).n_stages == 1;
        call.check(&format!("bf16 {shape:?} k={k}"), &x, &got, scanned);
    }
}

#[test]
fn unsorted_output_holds_the_top_k_stage_by_stage() {
    // k = 64 = 8 stages of 8: nothing padded, so `sorted=False` is honoured.
    let call = Call { shape: &[4, 32000], k: 64, sorted: false };
    let plan = call.plan(1);
    assert_eq!((plan.n_stages, plan.local_top_k_per_stage, plan.sorted), (8, 8, false));
    let x = distinct(4, 32000, 3);
    let got = call.run(&x, Dtype::F32, &fp32()).unwrap();
    call.check("unsorted", &x, &got, false);
    // Each stage's group of 8 is descending; the groups are not in order.
    let (vals, _) = &got;
    assert!(vals.chunks(8).all(|g| g.windows(2).all(|w| w[0] > w[1])));
    assert!(vals.chunks(64).any(|row| row.windows(2).any(|w| w[0] < w[1])), "the stages' groups interleave");
    // The library's unsorted case: 32 stages of 8, V = 25,136 not a multiple of them.
    let call = Call { shape: &[1, 25136], k: 256, sorted: false };
    let plan = call.plan(2);
    assert_eq!((plan.n_stages, plan.stage_free_size, plan.sorted), (32, 786, false));
    let x = distinct(1, 25136, 5);
    let got = call.run(&x, Dtype::F32, &fp32().lnc(2)).unwrap();
    call.check("unsorted 25136", &x, &got, false);
    // A padded k (50 over 7 stages of 8) is sorted regardless.
    let padded = Call { shape: &[4, 50257], k: 50, sorted: false };
    assert!(padded.plan(1).sorted);
    let x = distinct(4, 50257, 4);
    let got = padded.run(&x, Dtype::F32, &fp32()).unwrap();
    Call { sorted: true, ..padded }.check("padded k", &x, &got, true);
}

#[test]
fn k_equal_to_v_returns_the_rows_as_they_are() {
    let call = Call { shape: &[3, 40], k: 40, sorted: true };
    let x = tied(3, 40, 5);
    let (vals, idx) = call.run(&x, Dtype::F32, &fp32()).unwrap();
    assert_eq!(vals, x);
    assert_eq!(idx, (0..3).flat_map(|_| 0..40).collect::<Vec<i64>>());
}

#[test]
fn lnc_1_and_lnc_2_give_identical_results() {
    // Ties included: with the same stages per row, the programs' split of the
    // rows changes nothing.
    for (shape, k) in [(&[6, 32000][..], 64), (&[5, 50257][..], 50), (&[300, 4096][..], 24)] {
        let call = Call { shape, k, sorted: true };
        assert_eq!(call.plan(1).n_stages, call.plan(2).n_stages, "{shape:?}");
        let x = tied(call.rows(), call.vocab(), 21);
        let one = call.run(&x, Dtype::Bf16, &Launch::new().lnc(1)).unwrap();
        let two = call.run(&x, Dtype::Bf16, &Launch::new().lnc(2)).unwrap();
        assert_eq!(one, two, "{shape:?} k={k}");
    }
    // Different stages per row (16 of 32 for 8-row tiles, 32 of 16 for 4-row
    // ones): on distinct values the results still agree, with the reference too.
    let call = Call { shape: &[8, 20000], k: 512, sorted: true };
    let (p1, p2) = (call.plan(1), call.plan(2));
    assert_eq!((p1.tile_size, p1.n_stages, p2.tile_size, p2.n_stages), (8, 16, 4, 32));
    let x = distinct(8, 20000, 23);
    let one = call.run(&x, Dtype::F32, &fp32().lnc(1)).unwrap();
    assert_eq!(one, call.run(&x, Dtype::F32, &fp32().lnc(2)).unwrap());
    call.check("LNC 1 and 2, different stages", &x, &one, true);
}

#[test]
fn the_library_config_rules() {
    // The library's derivations (hand-computed from its formulas).
    let plan = |b, v, k, s, p| rotational_topk_plan(b, v, k, s, p).unwrap();
    // 1 row: 128 stages fit, k/8 = 32 wanted, 10 needed for 2^14 columns.
    let p = plan(1, 151936, 256, true, 2);
    assert_eq!((p.per_lnc_bxs, p.tile_size, p.n_stages, p.local_top_k_per_stage, p.stage_free_size), (1, 1, 32, 8, 4748));
    // 8 rows over 2 programs: 4-row tiles leave 32 stages.
    let p = plan(8, 151936, 256, true, 2);
    assert_eq!((p.per_lnc_bxs, p.tile_size, p.n_stages, p.padded_k), (4, 4, 32, 256));
    // k = 50 over 7 stages of 8: padded to 56, so sorted.
    let p = plan(4, 50257, 50, false, 1);
    assert_eq!((p.n_stages, p.local_top_k_per_stage, p.padded_k, p.stage_free_size, p.sorted), (7, 8, 56, 7180, true));
    // k <= 8 and V + 8 <= 2^14: one stage (a scan). The library counts the
    // stage's received candidates even then, so V = 2^14 is refused.
    assert_eq!(plan(2, 16376, 8, true, 1).n_stages, 1);
    assert_eq!(rotational_topk_plan(2, 16384, 8, true, 1), Err(TopkRule::StageTooWide));
    // More rows than partitions: the cost model's tile, ceil(rows / tile) tiles.
    let p = plan(1024, 2048, 16, true, 2);
    assert_eq!(p.per_lnc_bxs, 512);
    assert!(p.tile_size <= 128 && p.n_bxs_tiles == (512 + p.tile_size - 1) / p.tile_size && p.n_stages * p.tile_size <= 128, "{p:?}");
    // The refusals.
    assert_eq!(rotational_topk_plan(4, 100, 101, true, 1), Err(TopkRule::K));
    assert_eq!(rotational_topk_plan(4, 100, 0, true, 1), Err(TopkRule::K));
    assert_eq!(rotational_topk_plan(64, 40000, 8, true, 1), Err(TopkRule::StagesDoNotFit));
    assert_eq!(rotational_topk_plan(1, 100000, 100000, true, 1), Err(TopkRule::StageTooWide));
    // A plan forced sorted (k padded) is the sorted=True plan, which is what
    // the kernel checks a sorted config against.
    let mut forced = 0;
    for bxs in [1, 129, 300, 1024] {
        for vocab in [2048, 32000, 151936] {
            for k in 1..=300 {
                for programs in [1, 2] {
                    if let Ok(p) = rotational_topk_plan(bxs, vocab, k, false, programs)
                        && p.sorted
                    {
                        assert_eq!(Ok(p), rotational_topk_plan(bxs, vocab, k, true, programs), "{bxs} {vocab} {k} {programs}");
                        forced += 1;
                    }
                }
            }
        }
    }
    assert!(forced > 1000, "{forced}");
    let compile_time = nkilib::rotational_topk_config!(bxs = 8, vocab = 151936, k = 256, sorted = true, programs = 2);
    assert_eq!(compile_time, plan(8, 151936, 256, true, 2));
}

/// A config naming `inp`'s shape, `k` and `programs`, its plan fields unset:
/// what reaches the plan's own rules.
fn asking(bxs: i64, vocab_size: i64, orig_k: i64, n_prgs: i64) -> RotationalTopkConfig {
    RotationalTopkConfig {
        BxS: bxs,
        vocab_size,
        orig_k,
        padded_k: 0,
        n_prgs,
        prg_id: 0,
        per_lnc_BxS: 0,
        local_top_k_per_stage: 0,
        n_stages: 0,
        stage_free_size: 0,
        padded_vocab_size: 0,
        sorted: true,
        tile_size: 0,
        n_bxs_tiles: 0,
    }
}

#[test]
fn broken_rules_are_refused_naming_the_parameter() {
    let x = |shape: &[usize]| tensor(shape, &vec![0.0; shape.iter().product()], Dtype::F32);
    let launch = Launch::new().lnc(1);
    let e = rotational_topk::Call::new(&x(&[4, 100]), &asking(4, 100, 101, 1)).launch(&launch).unwrap_err();
    assert!(e.message.contains("config.orig_k = 101 must be within 1..=V = 100"), "{e}");
    let e = rotational_topk::Call::new(&x(&[64, 40000]), &asking(64, 40000, 8, 1)).launch(&launch).unwrap_err();
    assert!(e.message.contains("inp: V = 40000 needs 3 stages of at most 2^14 columns but only 2 fit beside 64 rows per tile"), "{e}");
    let e = rotational_topk::Call::new(&x(&[1, 100000]), &asking(1, 100000, 100000, 1)).launch(&launch).unwrap_err();
    assert!(e.message.contains("k = 100000: a stage's 782 columns plus the 128·784 candidates it receives exceed 2^14"), "{e}");
    let e = rotational_topk::Call::new(&x(&[2, 2, 2, 64]), &asking(8, 64, 8, 1)).launch(&launch).unwrap_err();
    assert!(e.message.contains("inp must be [BxS, V] or [B, S, V], got 4 dims"), "{e}");
    let ints = nki::Tensor::from_i64(&[2, 64], &[1; 128], Dtype::I32).unwrap();
    let e = rotational_topk::Call::new(&ints, &asking(2, 64, 8, 1)).launch(&launch).unwrap_err();
    assert_eq!(e.message, "invalid inp = int32: rotational_topk takes inp as float32 or bfloat16");
}

/// The emitted package with `rotational_topk` alone.
fn package() -> &'static Path {
    static PKG: OnceLock<PathBuf> = OnceLock::new();
    PKG.get_or_init(|| package_of("rotational_topk_pkg", &[&rotational_topk::INFO]))
}

/// `cfg` as the NumPy executor's `RotationalTopkConfig` argument.
fn py_config(cfg: &RotationalTopkConfig) -> Arg {
    let i = Arg::Int;
    Arg::Object(
        "RotationalTopkConfig",
        vec![
            ("BxS", i(cfg.BxS)),
            ("vocab_size", i(cfg.vocab_size)),
            ("orig_k", i(cfg.orig_k)),
            ("padded_k", i(cfg.padded_k)),
            ("n_prgs", i(cfg.n_prgs)),
            ("prg_id", i(cfg.prg_id)),
            ("per_lnc_BxS", i(cfg.per_lnc_BxS)),
            ("local_top_k_per_stage", i(cfg.local_top_k_per_stage)),
            ("n_stages", i(cfg.n_stages)),
            ("stage_free_size", i(cfg.stage_free_size)),
            ("padded_vocab_size", i(cfg.padded_vocab_size)),
            ("sorted", Arg::Bool(cfg.sorted)),
            ("tile_size", i(cfg.tile_size)),
            ("n_bxs_tiles", i(cfg.n_bxs_tiles)),
        ],
    )
}

/// Configs that disagree with their input or with the plan, each with the
/// input shape it is passed with and what the refusal says.
fn inconsistent_configs() -> Vec<(Vec<usize>, RotationalTopkConfig, String)> {
    // [4, 1000], k = 16, one program: 2 stages of 500 columns, 8 values each.
    let base = Call { shape: &[4, 1000], k: 16, sorted: true }.config(1);
    assert_eq!(
        (base.per_lnc_BxS, base.tile_size, base.n_stages, base.local_top_k_per_stage, base.stage_free_size, base.padded_vocab_size),
        (4, 4, 2, 8, 500, 1000)
    );
    let mut cases = vec![
        (vec![5, 1000], base.clone(), "config.BxS = 4 disagrees with inp, which has 5 rows".to_string()),
        (vec![4, 1001], base.clone(), "config.vocab_size = 1000 disagrees with inp, whose rows have 1001 columns".to_string()),
        (vec![4, 1000], RotationalTopkConfig { n_prgs: 2, ..base.clone() }, "config.n_prgs = 2 disagrees with the launch".to_string()),
        (vec![4, 1000], RotationalTopkConfig { prg_id: 1, ..base.clone() }, "config.prg_id = 1 must be 0".to_string()),
    ];
    type Field = (&'static str, fn(&mut RotationalTopkConfig) -> &mut i64);
    let fields: [Field; 8] = [
        ("per_lnc_BxS", |c| &mut c.per_lnc_BxS),
        ("tile_size", |c| &mut c.tile_size),
        ("n_bxs_tiles", |c| &mut c.n_bxs_tiles),
        ("n_stages", |c| &mut c.n_stages),
        ("local_top_k_per_stage", |c| &mut c.local_top_k_per_stage),
        ("padded_k", |c| &mut c.padded_k),
        ("stage_free_size", |c| &mut c.stage_free_size),
        ("padded_vocab_size", |c| &mut c.padded_vocab_size),
    ];
    for (name, field) in fields {
        let mut cfg = base.clone();
        let value = field(&mut cfg);
        let planned = *value;
        *value += 1;
        let message = format!("config.{name} = {}, the plan for inp [BxS, V], orig_k, n_prgs is {planned}", planned + 1);
        cases.push((vec![4, 1000], cfg, message));
    }
    // k = 50 is padded to 7 stages of 8: unsorted is not a plan.
    let padded = Call { shape: &[4, 50257], k: 50, sorted: false }.config(1);
    assert!(padded.sorted);
    cases.push((
        vec![4, 50257],
        RotationalTopkConfig { sorted: false, ..padded },
        "k = 50 is padded to 56, which forces sorted".to_string(),
    ));
    cases
}

#[test]
fn a_config_that_is_not_the_plan_for_its_input_is_refused_naming_the_field() {
    for (shape, cfg, message) in inconsistent_configs() {
        let x = tensor(&shape, &vec![0.0; shape.iter().product()], Dtype::F32);
        let e = rotational_topk::Call::new(&x, &cfg).launch(&Launch::new().lnc(1)).unwrap_err();
        assert!(e.message.contains(&message), "{shape:?} {cfg:?}: {e}");
    }
}

#[test]
fn the_emitted_kernel_refuses_the_same_configs_under_numpy() {
    for (shape, cfg, message) in inconsistent_configs() {
        let inp = Arg::Tensor(shape.clone(), vec![0.0; shape.iter().product()], Dtype::F32);
        let stderr = run_numpy_refused(package(), "rotational_topk", &[inp, py_config(&cfg)], &[]);
        assert!(stderr.contains(&message), "{shape:?} {cfg:?}: {stderr}");
    }
}

/// What the emitted `rotational_topk_config_for` returns on the host (plain
/// Python, the package imported over the harness's `nki`) for each call
/// `(BxS, V, k, sorted, n_prgs)`: its fields in the bundle's order, or the
/// refusal's message.
fn python_configs(calls: &[(i64, i64, i64, bool, i64)]) -> Vec<Result<Vec<i64>, String>> {
    let script = r#"
import json, sys
from nki_harness import fake_nki
from nki_harness.runner import load_package
fake_nki.install()
package = load_package(sys.argv[1])
module = sys.modules[package.__name__ + ".rotational_topk"]
fields = [f for f in module.RotationalTopkConfig.__dataclass_fields__]
out = []
for bxs, v, k, s, p in json.loads(sys.argv[2]):
    try:
        c = module.rotational_topk_config_for(bxs, v, k, s, p)
        out.append([int(getattr(c, f)) for f in fields])
    except AssertionError as e:
        out.append(str(e))
print(json.dumps(out))
"#;
    let calls_json =
        serde_json::to_string(&calls.iter().map(|&(b, v, k, s, p)| serde_json::json!([b, v, k, s, p])).collect::<Vec<_>>()).unwrap();
    let o = std::process::Command::new(common::python())
        .current_dir(common::repo_root().join("tests/python"))
        .args(["-c", script, package().to_str().unwrap(), &calls_json])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    out.into_iter()
        .map(|v| match v {
            serde_json::Value::String(e) => Err(e),
            v => Ok(serde_json::from_value(v).unwrap()),
        })
        .collect()
}

#[test]
fn the_emitted_config_helper_computes_the_rust_config_on_the_host() {
    let calls = [
        (4, 1000, 16, true, 2),
        (1, 151936, 256, true, 2),
        (8, 151936, 256, false, 2),
        (4, 50257, 50, false, 1),
        (1024, 2048, 16, true, 2),
        (300, 4096, 24, false, 1),
        (5, 200, 7, true, 2),
        (64, 40000, 8, true, 1),
        (4, 100, 101, true, 1),
    ];
    for (call, got) in calls.iter().zip(python_configs(&calls)) {
        let &(b, v, k, s, p) = call;
        match (rotational_topk_config(b, v, k, s, p), got) {
            (Ok(c), Ok(fields)) => {
                let want = [
                    c.BxS,
                    c.vocab_size,
                    c.orig_k,
                    c.padded_k,
                    c.n_prgs,
                    c.prg_id,
                    c.per_lnc_BxS,
                    c.local_top_k_per_stage,
                    c.n_stages,
                    c.stage_free_size,
                    c.padded_vocab_size,
                    i64::from(c.sorted),
                    c.tile_size,
                    c.n_bxs_tiles,
                ];
                assert_eq!(fields, want, "{call:?}");
            }
            (Err(rule), Err(message)) => {
                let named = match rule {
                    TopkRule::K => "k must be within 1..=V",
                    TopkRule::StagesDoNotFit => "stages of at most 2^14 columns but only",
                    TopkRule::StageTooWide => "candidates it receives exceed 2^14",
                };
                assert!(message.contains(named), "{call:?}: {rule:?} vs {message}");
            }
            (want, got) => panic!("{call:?}: Rust {want:?}, Python {got:?}"),
        }
    }
}

#[test]
fn emitted_kernel_under_numpy_matches_the_emulator() {
    // Folded rows padded (V = 1001 over 4 stages), sorted and unsorted, and one
    // stage with k padded (sorted whether or not asked), with LNC 2.
    for (shape, k, sorted) in [([6usize, 1001usize], 32usize, true), ([6, 1001], 32, false), ([5, 200], 7, true), ([5, 200], 7, false)] {
        let call = Call { shape: &shape, k, sorted };
        let x = tied(call.rows(), call.vocab(), 31);
        let (v, i) = call.run(&x, Dtype::F32, &fp32().lnc(2)).unwrap();
        let args = [Arg::Tensor(shape.to_vec(), x.clone(), Dtype::F32), py_config(&call.config(2))];
        let out = run_numpy_kwargs(package(), "rotational_topk", &args, &[], 2, "fp32");
        let np_v: Vec<f64> = out[0].iter().map(|&a| f64::from(a)).collect();
        let np_i: Vec<i64> = out[1].iter().map(|&a| a as i64).collect();
        assert_eq!((np_v, np_i), (v, i), "{shape:?} k={k} sorted={sorted}");
    }
}
