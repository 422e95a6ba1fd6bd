//! The emitted `ring_attention_bwd.py` (NKI 2.x Python): it passes the signature
//! check against the official NKI tables, keeps the library's signature as a
//! prefix (then `sinks=None`), and
//! run under the NumPy executor of `tests/python/nki_harness` (W = 4 ranks as
//! threads, fp32) agrees with the emulator within `1e-4·max|emulator| + 1e-6` on
//! dQ, dK and dV — and both agree with the float64 full-sequence reference.

use crate::common;

use crate::common::attention::run_numpy_kwargs_ranks;
use crate::common::attention_grad::{bwd_shard, dmajor, grad_data};
use crate::common::ring::Ring;
use crate::common::{Arg, RankArgs, assert_close, errors, tensor};
use nki::attention::ring_bwd::ring_attention_bwd::ring_attention_spmd_bwd;
use nki::{Dtype, Launch, Precision, Tensor};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

const RTOL: f64 = 1e-4;
const ATOL: f64 = 1e-6;

/// The package emitted for the ring backward alone (it pulls in what it calls).
fn package() -> &'static Path {
    static PKG: OnceLock<PathBuf> = OnceLock::new();
    PKG.get_or_init(|| common::package_of("ring_bwd_pkg", &[&ring_attention_spmd_bwd::INFO]))
}

#[test]
fn emitted_package_passes_the_check_with_the_library_signature() {
    let pkg = package();
    let (ok, out, err) = common::harness(&["check", &pkg.display().to_string()]);
    assert!(ok, "signature check failed:\n{out}{err}");
    let src = std::fs::read_to_string(pkg.join("ring_attention_bwd.py")).expect("the package holds ring_attention_bwd.py");
    assert!(
        src.contains(
            "\n@nki.jit\ndef ring_attention_spmd_bwd(q_ref, k_ref, v_ref, o_ref, dy_ref, lse_ref, use_causal_mask=False, \
             mixed_precision=True, softmax_scale=None, num_workers=1, lnc_size=1, replica_groups=None, striped_attention=False, \
             sinks=None, zigzag_attention=False, window_left=None, window_right=None, chunk_size=None, soft_cap=None, q_segment_ids=None, kv_segment_ids=None, bias=None):\n"
        ),
        "ring_attention_bwd.py must keep the library's signature as a prefix:\n{src}"
    );
    assert!(src.contains("\nfrom .ring_features import ring_tensors\n"), "imports its helpers from the package");
    let init = std::fs::read_to_string(pkg.join("__init__.py")).expect("__init__.py");
    assert!(init.contains("ring_attention_spmd_bwd"), "__init__.py re-exports the kernel:\n{init}");
}

/// One NumPy-vs-emulator case on a ring of `ring.w` ranks.
struct Case {
    name: &'static str,
    ring: Ring,
    causal: bool,
    lnc: usize,
}

impl Case {
    fn check(&self) {
        let r = &self.ring;
        let scale = 1.0 / (r.d as f64).sqrt();
        let x = grad_data(r, 31 + self.name.len() as u64, Dtype::F32, self.causal, scale);
        let shards: Vec<_> = (0..r.w).map(|pos| bwd_shard(r, &x, pos)).collect();

        // The emulator.
        let tensors: Vec<Vec<Tensor>> = shards.iter().map(|s| s.iter().map(|(sh, v)| tensor(sh, v, Dtype::F32)).collect()).collect();
        let emu: Vec<[Vec<f32>; 3]> = Launch::new()
            .ranks(r.w)
            .lnc(self.lnc)
            .precision(Precision::Fp32)
            .run_ranks(|ctx| {
                let t = &tensors[ctx.rank()];
                ring_attention_spmd_bwd::Call::new(&t[0], &t[1], &t[2], &t[3], &t[4], &t[5])
                    .use_causal_mask(self.causal)
                    .striped_attention(r.striped)
                    .num_workers(r.w as i64)
                    .lnc_size(self.lnc as i64)
                    .run(ctx)
            })
            .unwrap_or_else(|e| panic!("{}: {e}", self.name))
            .into_iter()
            .map(|o| [0, 1, 2].map(|i| o.get(i).expect("dQ, dK and dV").to_f32_vec()))
            .collect();

        // The emitted kernel under NumPy: the six tensors positional, the rest by keyword.
        let per_rank: Vec<RankArgs<'_>> = shards
            .iter()
            .map(|s| {
                let args = s.iter().map(|(sh, v)| Arg::Tensor(sh.clone(), v.clone(), Dtype::F32)).collect();
                let kwargs = vec![
                    ("use_causal_mask", Arg::Bool(self.causal)),
                    ("mixed_precision", Arg::Bool(true)),
                    ("softmax_scale", Arg::None),
                    ("num_workers", Arg::Int(r.w as i64)),
                    ("lnc_size", Arg::Int(self.lnc as i64)),
                    ("replica_groups", Arg::None),
                    ("striped_attention", Arg::Bool(r.striped)),
                ];
                (args, kwargs)
            })
            .collect();
        let t0 = Instant::now();
        let np = run_numpy_kwargs_ranks(package(), "ring_attention_spmd_bwd", &per_rank, self.lnc, "fp32");
        let t_np = t0.elapsed();

        assert_eq!(np.len(), r.w, "{}: NumPy returned {} ranks", self.name, np.len());
        let (mut worst_np_emu, mut worst_np_ref, mut worst_emu_ref) = (0.0f64, 0.0f64, 0.0f64);
        for (rank, (np_outs, emu_outs)) in np.iter().zip(&emu).enumerate() {
            assert_eq!(np_outs.len(), 3, "{} rank {rank}: the kernel returns dQ, dK, dV", self.name);
            for (i, (what, reference)) in [("dQ", &x.g.dq), ("dK", &x.g.dk), ("dV", &x.g.dv)].into_iter().enumerate() {
                let e: Vec<f64> = emu_outs[i].iter().map(|&v| f64::from(v)).collect();
                let want = dmajor(r, reference, rank);
                let tag = format!("{} rank {rank} {what}", self.name);
                assert_close(&format!("{tag} (numpy vs emulator)"), &np_outs[i], &e, ATOL, RTOL);
                assert_close(&format!("{tag} (numpy vs float64 reference)"), &np_outs[i], &want, ATOL, RTOL);
                assert_close(&format!("{tag} (emulator vs float64 reference)"), &emu_outs[i], &want, ATOL, RTOL);
                worst_np_emu = worst_np_emu.max(errors(&np_outs[i], &e).0);
                worst_np_ref = worst_np_ref.max(errors(&np_outs[i], &want).0);
                worst_emu_ref = worst_emu_ref.max(errors(&emu_outs[i], &want).0);
            }
        }
        eprintln!(
            "{}: numpy vs emulator max err {worst_np_emu:.2e}, numpy vs reference {worst_np_ref:.2e}, \
             emulator vs reference {worst_emu_ref:.2e}; NumPy run {t_np:.2?}",
            self.name
        );
    }
}

#[test]
fn numpy_striped_causal_w4() {
    Case { name: "striped causal W4", ring: Ring { w: 4, b: 1, h: 2, sl: 256, d: 32, striped: true }, causal: true, lnc: 1 }.check();
}

#[test]
fn numpy_contiguous_causal_w4() {
    Case { name: "contiguous causal W4", ring: Ring { w: 4, b: 2, h: 1, sl: 256, d: 32, striped: false }, causal: true, lnc: 1 }.check();
}

/// LNC2 with an odd B·N: the second program repeats pair (0, 0) in the last round.
#[test]
fn numpy_lnc2_contiguous_causal_w4_odd_batch() {
    Case { name: "contiguous causal W4 lnc2 1x3", ring: Ring { w: 4, b: 1, h: 3, sl: 128, d: 32, striped: false }, causal: true, lnc: 2 }
        .check();
}

/// 640 tokens per rank: a 512-key tile and a 128-key rest, in both artifacts.
#[test]
fn numpy_contiguous_causal_w2_partial_key_tile() {
    Case { name: "contiguous causal W2 S640", ring: Ring { w: 2, b: 1, h: 1, sl: 640, d: 32, striped: false }, causal: true, lnc: 1 }
        .check();
}

/// Non-causal, with two head-dim tiles (D = 192 → 2 × 96).
#[test]
fn numpy_contiguous_full_w4_wide_heads() {
    Case { name: "contiguous full W4 d192", ring: Ring { w: 4, b: 1, h: 1, sl: 128, d: 192, striped: false }, causal: false, lnc: 1 }
        .check();
}

/// Runs one NumPy-vs-emulator backward case with random inputs (LSEs in [2, 3]
/// keep the probabilities below one): `extra` keyword arguments on top of a causal
/// ring of `w` ranks on LNC 2, with sinks when given, and with `segments` segment
/// ids 0..3 per rank (the first 10 queries of every rank id 7, which no key has,
/// and LSE `-inf`), and with `bias` a random bias per rank.
#[allow(clippy::too_many_arguments)]
fn numpy_case(
    name: &str,
    dims: [usize; 5],
    sinks: Option<Vec<f64>>,
    segments: bool,
    bias: bool,
    extra: Vec<(&'static str, Arg)>,
    emu_call: impl Fn(ring_attention_spmd_bwd::Call<'_>) -> ring_attention_spmd_bwd::Call<'_> + Sync,
) {
    let [w, b, h, hk, sl] = dims;
    let d = 16;
    let shapes =
        [vec![b, h, d, sl], vec![b, hk, d, sl], vec![b, hk, d, sl], vec![b, h, d, sl], vec![b, h, d, sl], vec![b, h, 128, sl / 128]];
    let per_rank: Vec<Vec<(Vec<usize>, Vec<f64>)>> = (0..w)
        .map(|r| {
            shapes
                .iter()
                .enumerate()
                .map(|(i, shape)| {
                    let n: usize = shape.iter().product();
                    let (lo, hi) = if i == 5 { (2.0, 3.0) } else { (-1.0, 1.0) };
                    let mut x = common::as_dtype(&common::uniform(n, 980 + 10 * r as u64 + i as u64, lo, hi), Dtype::F32);
                    if segments && i == 5 {
                        // LSE [.., p, g] is row 128 g + p: rows 0..10 are p < 10, g = 0.
                        x.iter_mut()
                            .enumerate()
                            .filter(|(j, _)| j % sl < 10 * (sl / 128) && j % (sl / 128) == 0)
                            .for_each(|(_, v)| *v = f64::NEG_INFINITY);
                    }
                    (shape.clone(), x)
                })
                .collect()
        })
        .collect();
    let ids: Vec<[Vec<f64>; 2]> = (0..w)
        .map(|r| {
            let kv: Vec<f64> =
                (0..b).flat_map(|bi| common::uniform(sl, 1990 + 7 * r as u64 + bi as u64, 0.0, 4.0)).map(|x| x.floor()).collect();
            let q = kv.iter().enumerate().map(|(i, &x)| if i % sl < 10 { 7.0 } else { x }).collect();
            [q, kv]
        })
        .collect();
    let biases: Vec<Vec<f64>> = (0..w).map(|r| common::uniform(b * h * sl * w * sl, 2990 + r as u64, -2.0, 2.0)).collect();
    let bias_tensors: Vec<Tensor> = biases.iter().map(|x| tensor(&[b, h, sl, w * sl], x, Dtype::F32)).collect();
    let id_tensors: Vec<[Tensor; 2]> = ids.iter().map(|pair| pair.clone().map(|x| tensor(&[b, sl], &x, Dtype::I32))).collect();
    let sink_t = sinks.as_ref().map(|x| tensor(&[h], x, Dtype::F32));
    let tensors: Vec<Vec<Tensor>> = per_rank.iter().map(|xs| xs.iter().map(|(s, x)| tensor(s, x, Dtype::F32)).collect()).collect();
    let emu: Vec<Vec<Vec<f32>>> = Launch::new()
        .ranks(w)
        .lnc(2)
        .precision(Precision::Fp32)
        .run_ranks(|ctx| {
            let t = &tensors[ctx.rank()];
            let [q_ids, kv_ids] = &id_tensors[ctx.rank()];
            let call = ring_attention_spmd_bwd::Call::new(&t[0], &t[1], &t[2], &t[3], &t[4], &t[5])
                .use_causal_mask(true)
                .num_workers(w as i64)
                .lnc_size(2)
                .sinks(sink_t.as_ref())
                .q_segment_ids(segments.then_some(q_ids))
                .kv_segment_ids(segments.then_some(kv_ids))
                .bias(bias.then_some(&bias_tensors[ctx.rank()]));
            emu_call(call).run(ctx)
        })
        .unwrap()
        .into_iter()
        .map(|o| o.into_vec().iter().map(Tensor::to_f32_vec).collect())
        .collect();
    let ranks: Vec<RankArgs<'_>> = per_rank
        .iter()
        .zip(&ids)
        .zip(&biases)
        .map(|((xs, [q_ids, kv_ids]), rank_bias)| {
            let args = xs.iter().map(|(s, x)| Arg::Tensor(s.clone(), x.clone(), Dtype::F32)).collect();
            let mut kwargs = vec![("use_causal_mask", Arg::Bool(true)), ("num_workers", Arg::Int(w as i64)), ("lnc_size", Arg::Int(2))];
            if let Some(x) = &sinks {
                kwargs.push(("sinks", Arg::Tensor(vec![h], x.clone(), Dtype::F32)));
            }
            kwargs.extend(extra.iter().cloned());
            if segments {
                kwargs.push(("q_segment_ids", Arg::Tensor(vec![b, sl], q_ids.clone(), Dtype::I32)));
                kwargs.push(("kv_segment_ids", Arg::Tensor(vec![b, sl], kv_ids.clone(), Dtype::I32)));
            }
            if bias {
                kwargs.push(("bias", Arg::Tensor(vec![b, h, sl, w * sl], rank_bias.clone(), Dtype::F32)));
            }
            (args, kwargs)
        })
        .collect();
    let np = run_numpy_kwargs_ranks(package(), "ring_attention_spmd_bwd", &ranks, 2, "fp32");
    let outs = if sinks.is_some() { 4 } else { 3 };
    for (rank, (np_outs, emu_outs)) in np.iter().zip(&emu).enumerate() {
        assert_eq!((np_outs.len(), emu_outs.len()), (outs, outs), "{name}: dQ, dK, dV (and dsinks)");
        for (i, what) in ["dQ", "dK", "dV", "dsinks"].iter().take(outs).enumerate() {
            let e: Vec<f64> = emu_outs[i].iter().map(|&x| f64::from(x)).collect();
            assert_close(&format!("{name} rank {rank} {what} (numpy vs emulator)"), &np_outs[i], &e, ATOL, RTOL);
        }
    }
}

/// GQA (4 query heads on 2 KV heads, 2 batches) with sinks and a soft cap,
/// striped causal over 3 ranks on LNC 2: the emitted kernel under NumPy matches the
/// emulator on dQ, dK, dV and this rank's share of dsinks.
#[test]
fn numpy_gqa_with_sinks_striped_w3_lnc2() {
    let sinks = common::uniform(4, 971, -1.0, 2.0);
    let extra = vec![("striped_attention", Arg::Bool(true)), ("soft_cap", Arg::Float(0.5))];
    numpy_case("GQA + sinks + soft cap", [3, 2, 4, 2, 128], Some(sinks), false, false, extra, |c| {
        c.striped_attention(true).soft_cap(Some(0.5))
    });
}

/// Zigzag causal with a window and chunks, GQA 2:1, over 3 ranks on LNC 2: the
/// per-row key bounds and the skipped steps under NumPy match the emulator.
#[test]
fn numpy_zigzag_window_and_chunks_w3_lnc2() {
    let extra = vec![("zigzag_attention", Arg::Bool(true)), ("window_left", Arg::Int(300)), ("chunk_size", Arg::Int(200))];
    numpy_case("zigzag window chunks", [3, 1, 2, 1, 256], None, false, false, extra, |c| {
        c.zigzag_attention(true).window_left(Some(300)).chunk_size(Some(200))
    });
}

/// Segment ids with GQA 2:1 and 2 batches, zigzag causal over 3 ranks on LNC 2:
/// the query ids travelling with Q and the rows with LSE -inf (zero gradients)
/// under NumPy match the emulator.
#[test]
fn numpy_zigzag_segment_ids_w3_lnc2() {
    let extra = vec![("zigzag_attention", Arg::Bool(true))];
    numpy_case("zigzag segment ids", [3, 2, 2, 1, 256], None, true, false, extra, |c| c.zigzag_attention(true));
}

/// A bias with GQA 2:1, zigzag causal over 3 ranks on LNC 2: the bias rows
/// travelling with Q and each rank's key columns gathered at run time under
/// NumPy match the emulator.
#[test]
fn numpy_zigzag_bias_w3_lnc2() {
    let extra = vec![("zigzag_attention", Arg::Bool(true))];
    numpy_case("zigzag bias", [3, 1, 2, 1, 256], None, false, true, extra, |c| c.zigzag_attention(true));
}
