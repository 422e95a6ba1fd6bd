//! The emitted `ring_attention_fwd.py` (NKI 2.x Python): it passes the signature
//! check against the official NKI tables, imports `attention_cte` from its own
//! package, and run under the NumPy executor of `tests/python/nki_harness` (ranks
//! as threads, fp32) agrees with the emulator within `1e-5·max|emulator| + 1e-6`
//! on the output and the LSE — and both agree with the float64 reference.

use crate::common;

use crate::common::attention::{run_numpy_kwargs_ranks, run_numpy_refused};
use crate::common::ring::{Global, Ring};
use crate::common::{Arg, RankArgs, as_dtype, assert_close, assert_close_lse, errors, tensor, uniform};
use nki::attention::ring_fwd::ring_attention_fwd::ring_attention_spmd_fwd;
use nki::{Dtype, Launch, Precision};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const RTOL: f64 = 1e-5;
const ATOL: f64 = 1e-6;

/// The package emitted for the ring kernel alone (it pulls in what it calls).
fn package() -> &'static Path {
    static PKG: OnceLock<PathBuf> = OnceLock::new();
    PKG.get_or_init(|| common::package_of("ring_fwd_pkg", &[&ring_attention_spmd_fwd::INFO]))
}

#[test]
fn emitted_package_passes_the_check_and_imports_attention_cte() {
    let pkg = package();
    let (ok, out, err) = common::harness(&["check", &pkg.display().to_string()]);
    assert!(ok, "signature check failed:\n{out}{err}");
    let src = std::fs::read_to_string(pkg.join("ring_attention_fwd.py")).expect("the package holds ring_attention_fwd.py");
    assert!(
        src.contains("\nfrom .attention_cte import attention_cte\n"),
        "ring_attention_fwd.py must import attention_cte from the package:\n{src}"
    );
    assert!(!src.contains("def attention_cte("), "ring_attention_fwd.py must not define its own attention_cte");
    // The library's signature, then this kernel's keyword arguments with defaults that keep its behaviour.
    let library = "\n@nki.jit\ndef ring_attention_spmd_fwd(q, k, v, replica_groups=None, num_workers=1, softmax_scale=None, use_causal_mask=False, striped_input=False, training=False, lse_dtype=nl.float32, tp_q=False, tp_k=False";
    assert!(
        src.contains(&format!(
            "{library}, sinks=None, zigzag_input=False, window_left=None, window_right=None, chunk_size=None, soft_cap=None, q_segment_ids=None, kv_segment_ids=None, bias=None):"
        )),
        "the library's signature as a prefix"
    );
    let cte = std::fs::read_to_string(pkg.join("attention_cte.py")).expect("the package holds attention_cte.py");
    assert!(cte.contains("def attention_cte("), "attention_cte.py defines attention_cte");
    let init = std::fs::read_to_string(pkg.join("__init__.py")).expect("__init__.py");
    assert!(init.contains("ring_attention_spmd_fwd"), "__init__.py re-exports the kernel:\n{init}");
}

/// The emitted kernel refuses a broken rule with the message the typed API
/// returns for it: its asserts name the constants of `ring_rules.py`.
#[test]
fn numpy_refusals_are_the_typed_rules_messages() {
    use nki::attention::ring_fwd::{RingFwdRule, RingRule};
    let refused = |rule: RingFwdRule, dims: [usize; 4], kwargs: &[(&str, Arg)]| {
        let tensors = qkv(dims, 7).map(|(shape, values)| Arg::Tensor(shape, values, Dtype::F32));
        let err = run_numpy_refused(package(), "ring_attention_spmd_fwd", &tensors, kwargs);
        assert!(err.contains(rule.message()), "expected the emitted kernel to refuse with `{rule}`, got: {err}");
    };
    refused(RingFwdRule::Ring(RingRule::StripedNeedsCausal), [2, 2, 128, 32], &[("striped_input", Arg::Bool(true))]);
    refused(RingFwdRule::Ring(RingRule::SeqlenMultiple), [2, 2, 200, 32], &[]);
    refused(RingFwdRule::Ring(RingRule::KvHeads), [2, 3, 128, 32], &[]);
}

/// A tensor's shape and values.
type Shaped = (Vec<usize>, Vec<f64>);

/// One NumPy-vs-emulator case; `groups` lists the rings (rank ids in ring order)
/// of a launch with more ranks than `ring.w`.
struct Case {
    name: &'static str,
    ring: Ring,
    causal: bool,
    lnc: usize,
    tp: bool,
    groups: Option<Vec<Vec<usize>>>,
}

impl Case {
    /// A case on one ring of `ring.w` ranks.
    fn new(name: &'static str, ring: Ring, causal: bool, lnc: usize, tp: bool) -> Case {
        Case { name, ring, causal, lnc, tp, groups: None }
    }

    fn check(&self) {
        let r = &self.ring;
        let rings: Vec<Vec<usize>> = self.groups.clone().unwrap_or_else(|| vec![(0..r.w).collect()]);
        let nranks: usize = rings.iter().map(Vec::len).sum();
        let scale = 1.0 / (r.d as f64).sqrt();
        // Per ring: global data, the kernel's per-position inputs and the reference.
        let mut inputs: Vec<Option<[Shaped; 3]>> = (0..nranks).map(|_| None).collect();
        let mut want: Vec<Option<(Vec<f64>, Vec<f64>)>> = (0..nranks).map(|_| None).collect();
        for (gi, ring_ranks) in rings.iter().enumerate() {
            let n = r.bh() * r.st() * r.d;
            let seed = 900 + 10 * gi as u64 + self.name.len() as u64;
            let raw_q = uniform(n, seed, -2.0, 2.0);
            let q = if self.causal {
                as_dtype(&raw_q.iter().map(|x| x * scale).collect::<Vec<_>>(), Dtype::F32)
            } else {
                as_dtype(&raw_q, Dtype::F32)
            };
            let k = as_dtype(&uniform(n, seed + 1, -2.0, 2.0), Dtype::F32);
            let v = as_dtype(&uniform(n, seed + 2, -1.0, 1.0), Dtype::F32);
            let ref_scale = if self.causal { 1.0 } else { scale };
            let expected = r.expected(&Global { q: &q, k: &k, v: &v, scale: ref_scale, causal: self.causal });
            for (pos, (&rank, e)) in ring_ranks.iter().zip(expected).enumerate() {
                inputs[rank] = Some([r.shard_qk(&q, pos, self.tp), r.shard_qk(&k, pos, self.tp), r.shard_v(&v, pos)]);
                want[rank] = Some(e);
            }
        }
        let inputs: Vec<_> = inputs.into_iter().map(|i| i.expect("every rank is in a ring")).collect();
        let groups_i64: Option<Vec<Vec<i64>>> =
            self.groups.as_ref().map(|g| g.iter().map(|r| r.iter().map(|&x| x as i64).collect()).collect());

        // The emulator.
        let tensors: Vec<_> = inputs.iter().map(|[q, k, v]| [q, k, v].map(|(s, x)| tensor(s, x, Dtype::F32))).collect();
        let emu = Launch::new()
            .ranks(nranks)
            .lnc(self.lnc)
            .precision(Precision::Fp32)
            .run_ranks(|ctx| {
                let [q, k, v] = &tensors[ctx.rank()];
                ring_attention_spmd_fwd::Call::new(q, k, v)
                    .num_workers(r.w as i64)
                    .use_causal_mask(self.causal)
                    .striped_input(r.striped)
                    .training(true)
                    .tp_q(self.tp)
                    .tp_k(self.tp)
                    .replica_groups(groups_i64.clone())
                    .run(ctx)
            })
            .unwrap_or_else(|e| panic!("{}: {e}", self.name));

        // The emitted kernel under NumPy: q, k, v positional, the rest by keyword.
        let groups_arg = match &self.groups {
            None => Arg::None,
            Some(g) => Arg::Tuple(g.iter().map(|ring| Arg::Tuple(ring.iter().map(|&x| Arg::Int(x as i64)).collect())).collect()),
        };
        let per_rank: Vec<RankArgs<'_>> = inputs
            .iter()
            .map(|[q, k, v]| {
                let args = [q, k, v].map(|(s, x)| Arg::Tensor(s.clone(), x.clone(), Dtype::F32)).to_vec();
                let kwargs = vec![
                    ("replica_groups", groups_arg.clone()),
                    ("num_workers", Arg::Int(r.w as i64)),
                    ("softmax_scale", Arg::None),
                    ("use_causal_mask", Arg::Bool(self.causal)),
                    ("striped_input", Arg::Bool(r.striped)),
                    ("training", Arg::Bool(true)),
                    ("lse_dtype", Arg::Dtype(Dtype::F32)),
                    ("tp_q", Arg::Bool(self.tp)),
                    ("tp_k", Arg::Bool(self.tp)),
                ];
                (args, kwargs)
            })
            .collect();
        let t0 = std::time::Instant::now();
        let np = run_numpy_kwargs_ranks(package(), "ring_attention_spmd_fwd", &per_rank, self.lnc, "fp32");
        let t_np = t0.elapsed();

        assert_eq!(np.len(), nranks, "{}: NumPy returned {} ranks", self.name, np.len());
        let (mut worst_np_emu, mut worst_np_ref) = (0.0f64, 0.0f64);
        for (rank, (np_outs, emu_outs)) in np.iter().zip(&emu).enumerate() {
            assert_eq!(np_outs.len(), 2, "{} rank {rank}: training=True returns the output and the LSE", self.name);
            let (want_o, want_l) = want[rank].as_ref().unwrap();
            for (i, what) in ["output", "LSE"].iter().enumerate() {
                let e: Vec<f64> = emu_outs.get(i).unwrap().to_f32_vec().iter().map(|&x| f64::from(x)).collect();
                let tag = format!("{} rank {rank} {what}", self.name);
                assert_close(&format!("{tag} (numpy vs emulator)"), &np_outs[i], &e, ATOL, RTOL);
                let reference = if i == 0 { want_o } else { want_l };
                assert_close(&format!("{tag} (numpy vs float64 reference)"), &np_outs[i], reference, ATOL, RTOL);
                worst_np_emu = worst_np_emu.max(errors(&np_outs[i], &e).0);
                worst_np_ref = worst_np_ref.max(errors(&np_outs[i], reference).0);
            }
        }
        eprintln!(
            "{}: numpy vs emulator max err {worst_np_emu:.2e}, numpy vs reference {worst_np_ref:.2e}; NumPy run {t_np:.2?}",
            self.name
        );
    }
}

/// Causal rings of four ranks, contiguous and striped.
#[test]
fn numpy_causal_w4_contiguous_and_striped() {
    for (name, b, h, striped) in [("contiguous causal W4", 1, 2, false), ("striped causal W4", 2, 1, true)] {
        Case::new(name, Ring { w: 4, b, h, sl: 256, d: 32, striped }, true, 1, false).check();
    }
}

/// LNC2 with an odd b·h: with S_local < 1024 the remainder batch is program 0's
/// (non-causal W4); with S_local >= 1024 the two programs split it by query
/// groups (causal W2).
#[test]
fn numpy_lnc2_odd_batch() {
    Case::new("contiguous full W4 lnc2", Ring { w: 4, b: 1, h: 3, sl: 128, d: 32, striped: false }, false, 2, true).check();
    Case::new("contiguous causal W2 lnc2 split", Ring { w: 2, b: 1, h: 1, sl: 1024, d: 32, striped: false }, true, 2, false).check();
}

/// Two rings of two ranks in non-rank order: the position table built from the groups.
#[test]
fn numpy_replica_groups_causal() {
    Case {
        groups: Some(vec![vec![3, 1], vec![0, 2]]),
        ..Case::new("groups causal", Ring { w: 2, b: 1, h: 2, sl: 128, d: 32, striped: false }, true, 1, false)
    }
    .check();
}

/// GQA (4 query heads on 2 KV heads) with sinks and a soft cap, striped causal
/// over 3 ranks on LNC 2: the emitted kernel under NumPy matches the emulator.
#[test]
fn numpy_gqa_with_sinks_striped_w3_lnc2() {
    let (w, h, hk, sl, d) = (3usize, 4usize, 2usize, 128usize, 16usize);
    let sinks = uniform(h, 951, -1.0, 2.0);
    let per_rank: Vec<[Shaped; 3]> = (0..w).map(|r| qkv([h, hk, sl, d], 960 + 3 * r as u64)).collect();
    let sink_t = tensor(&[h], &sinks, Dtype::F32);
    let tensors: Vec<_> = per_rank.iter().map(|[q, k, v]| [q, k, v].map(|(s, x)| tensor(s, x, Dtype::F32))).collect();
    let emu = lnc2_fp32(w)
        .run_ranks(|ctx| {
            let [q, k, v] = &tensors[ctx.rank()];
            ring_attention_spmd_fwd::Call::new(q, k, v)
                .num_workers(w as i64)
                .use_causal_mask(true)
                .striped_input(true)
                .training(true)
                .sinks(Some(&sink_t))
                .soft_cap(Some(0.5))
                .run(ctx)
        })
        .unwrap();
    let ranks: Vec<RankArgs<'_>> = per_rank
        .iter()
        .map(|[q, k, v]| {
            let args = [q, k, v].map(|(s, x)| Arg::Tensor(s.clone(), x.clone(), Dtype::F32)).to_vec();
            let mut kwargs = causal_training(w, "striped_input");
            kwargs.extend([("sinks", Arg::Tensor(vec![h], sinks.clone(), Dtype::F32)), ("soft_cap", Arg::Float(0.5))]);
            (args, kwargs)
        })
        .collect();
    numpy_matches_emulator("GQA + sinks", &ranks, &emu, assert_close);
}

/// Zigzag causal with a window and chunks, GQA 2:1, over 3 ranks on LNC 2: the
/// emitted kernel's per-row key bounds and skipped steps under NumPy match the emulator.
#[test]
fn numpy_zigzag_window_and_chunks_w3_lnc2() {
    numpy_zigzag(&[("window_left", 300), ("chunk_size", 200)], false);
}

/// Zigzag causal with segment ids (some query ids no key has: zero rows, LSE
/// -inf) over 3 ranks on LNC 2: the ids travelling with K and V and the masked
/// rows under NumPy match the emulator.
#[test]
fn numpy_zigzag_segment_ids_w3_lnc2() {
    numpy_zigzag(&[], true);
}

/// Striped causal with a bias over 3 ranks on LNC 2: the visiting keys' bias
/// columns gathered at run time (`scalar_offset`, stride W) under NumPy match
/// the emulator.
#[test]
fn numpy_striped_bias_w3_lnc2() {
    let (w, h, sl, d) = (3usize, 2usize, 128usize, 16usize);
    let per_rank: Vec<[Shaped; 4]> = (0..w)
        .map(|r| {
            let seed = 1090 + 4 * r as u64;
            let [q, k, v] = qkv([h, 1, sl, d], seed);
            [q, k, v, (vec![1, h, sl, w * sl], as_dtype(&uniform(h * sl * w * sl, seed + 3, -2.0, 2.0), Dtype::F32))]
        })
        .collect();
    let tensors: Vec<_> = per_rank.iter().map(|xs| xs.clone().map(|(s, x)| tensor(&s, &x, Dtype::F32))).collect();
    let emu = lnc2_fp32(w)
        .run_ranks(|ctx| {
            let [q, k, v, bias] = &tensors[ctx.rank()];
            ring_attention_spmd_fwd::Call::new(q, k, v)
                .num_workers(w as i64)
                .use_causal_mask(true)
                .striped_input(true)
                .training(true)
                .bias(Some(bias))
                .run(ctx)
        })
        .unwrap();
    let ranks: Vec<RankArgs<'_>> = per_rank
        .iter()
        .map(|[q, k, v, bias]| {
            let args = [q, k, v].map(|(s, x)| Arg::Tensor(s.clone(), x.clone(), Dtype::F32)).to_vec();
            let mut kwargs = causal_training(w, "striped_input");
            kwargs.push(("bias", Arg::Tensor(bias.0.clone(), bias.1.clone(), Dtype::F32)));
            (args, kwargs)
        })
        .collect();
    numpy_matches_emulator("striped bias", &ranks, &emu, assert_close);
}

/// Plain zigzag causal over 3 ranks on LNC 2: the half-size calls picked at run
/// time (`scalar_offset`) under NumPy match the emulator.
#[test]
fn numpy_zigzag_half_size_steps_w3_lnc2() {
    numpy_zigzag(&[], false);
}

/// The emulator's launch of `w` ranks on LNC 2 in fp32.
fn lnc2_fp32(w: usize) -> Launch {
    Launch::new().ranks(w).lnc(2).precision(Precision::Fp32)
}

/// A zigzag causal ring of 3 ranks (GQA 2:1, 256 tokens per rank, LNC 2) with
/// `extra` integer keyword arguments and, with `segments`, segment ids (ids 0..3,
/// the queries' first 10 tokens 7), NumPy against the emulator.
fn numpy_zigzag(extra: &[(&'static str, i64)], segments: bool) {
    let (w, h, hk, sl, d) = (3usize, 2usize, 1usize, 256usize, 16usize);
    let per_rank: Vec<[Shaped; 3]> = (0..w).map(|r| qkv([h, hk, sl, d], 990 + 3 * r as u64)).collect();
    let tensors: Vec<_> = per_rank.iter().map(|[q, k, v]| [q, k, v].map(|(s, x)| tensor(s, x, Dtype::F32))).collect();
    let ids: Vec<[Vec<f64>; 2]> = (0..w)
        .map(|r| {
            let kv: Vec<f64> = uniform(sl, 997 + r as u64, 0.0, 4.0).iter().map(|x| x.floor()).collect();
            let q = kv.iter().enumerate().map(|(i, &x)| if i < 10 { 7.0 } else { x }).collect();
            [q, kv]
        })
        .collect();
    let id_tensors: Vec<[nki::Tensor; 2]> = ids.iter().map(|pair| pair.clone().map(|x| tensor(&[1, sl], &x, Dtype::I32))).collect();
    let emu = lnc2_fp32(w)
        .run_ranks(|ctx| {
            let [q, k, v] = &tensors[ctx.rank()];
            let [q_ids, kv_ids] = &id_tensors[ctx.rank()];
            let arg = |name: &str| extra.iter().find(|(n, _)| *n == name).map(|&(_, x)| x);
            ring_attention_spmd_fwd::Call::new(q, k, v)
                .num_workers(w as i64)
                .use_causal_mask(true)
                .zigzag_input(true)
                .window_left(arg("window_left"))
                .chunk_size(arg("chunk_size"))
                .training(true)
                .q_segment_ids(segments.then_some(q_ids))
                .kv_segment_ids(segments.then_some(kv_ids))
                .run(ctx)
        })
        .unwrap();
    let ranks: Vec<RankArgs<'_>> = per_rank
        .iter()
        .zip(&ids)
        .map(|([q, k, v], [q_ids, kv_ids])| {
            let args = [q, k, v].map(|(s, x)| Arg::Tensor(s.clone(), x.clone(), Dtype::F32)).to_vec();
            let mut kwargs = causal_training(w, "zigzag_input");
            kwargs.extend(extra.iter().map(|&(name, x)| (name, Arg::Int(x))));
            if segments {
                kwargs.push(("q_segment_ids", Arg::Tensor(vec![1, sl], q_ids.clone(), Dtype::I32)));
                kwargs.push(("kv_segment_ids", Arg::Tensor(vec![1, sl], kv_ids.clone(), Dtype::I32)));
            }
            (args, kwargs)
        })
        .collect();
    numpy_matches_emulator(&format!("zigzag {extra:?} segments={segments}"), &ranks, &emu, assert_close_lse);
}

/// One rank's random q `[1, h, d, sl]`, k `[1, hk, d, sl]` and v `[1, hk, sl, d]`
/// (`dims` = `[h, hk, sl, d]`), from seeds `seed`, `seed + 1`, `seed + 2`.
fn qkv([h, hk, sl, d]: [usize; 4], seed: u64) -> [Shaped; 3] {
    [
        (vec![1, h, d, sl], as_dtype(&uniform(h * d * sl, seed, -0.5, 0.5), Dtype::F32)),
        (vec![1, hk, d, sl], as_dtype(&uniform(hk * d * sl, seed + 1, -2.0, 2.0), Dtype::F32)),
        (vec![1, hk, sl, d], as_dtype(&uniform(hk * d * sl, seed + 2, -1.0, 1.0), Dtype::F32)),
    ]
}

/// The keyword arguments of a causal training ring of `w` workers in `layout`
/// (`striped_input` or `zigzag_input`).
fn causal_training(w: usize, layout: &'static str) -> Vec<(&'static str, Arg)> {
    vec![
        ("num_workers", Arg::Int(w as i64)),
        ("use_causal_mask", Arg::Bool(true)),
        ("training", Arg::Bool(true)),
        (layout, Arg::Bool(true)),
    ]
}

/// Runs the emitted ring forward under NumPy (LNC 2) with `ranks`' arguments and
/// compares each rank's output and LSE with the emulator's by `close`.
fn numpy_matches_emulator(what: &str, ranks: &[RankArgs<'_>], emu: &[nki::Outputs], close: fn(&str, &[f32], &[f64], f64, f64)) {
    let np = run_numpy_kwargs_ranks(package(), "ring_attention_spmd_fwd", ranks, 2, "fp32");
    for (rank, (np_outs, emu_outs)) in np.iter().zip(emu).enumerate() {
        for (i, out) in ["output", "LSE"].iter().enumerate() {
            let e: Vec<f64> = emu_outs.get(i).unwrap().to_f32_vec().iter().map(|&x| f64::from(x)).collect();
            close(&format!("{what} rank {rank} {out} (numpy vs emulator)"), &np_outs[i], &e, ATOL, RTOL);
        }
    }
}
