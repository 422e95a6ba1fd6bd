//! `ring_attention_spmd_fwd` in the emulator against the float64 full-sequence
//! attention on the unsharded tensors (`common::attention::Problem`, sliced per
//! rank by `common::ring`).
//!
//! * numerics: W ∈ {1, 2, 3, 4, 8, 32}; contiguous × {causal, non-causal}, striped ×
//!   causal; odd and even b·h; LNC 1 and 2; S_local ∈ {128, 512, 4096} and one
//!   S_local > 10240 (attention_cte's 8K KV sections); d ∈ {16, 64, 128}; tp_q / tp_k.
//!   `fp32`: `max|a-b| <= 1e-5·max|ref| + 1e-6` on the output and the LSE.
//!   `hardware` (bf16 inputs, the reference on the rounded inputs):
//!   `<= 1e-3 + 1e-2·max|ref|`, and the error grows at most linearly in W;
//! * W = 1 equals `attention_cte`; striped equals contiguous after un-permuting;
//! * the fully-masked-row cases of the NKI regression test;
//! * communication: 2·(W−1) permutes of W messages each, consecutive per ring;
//! * replica groups: rings of ranks that are not `0..W`, in non-rank order;
//! * errors: every rule of the kernel, and a failing rank aborts the whole launch.
//!
//! Every case prints its measured errors (`cargo test --release --test ring -- fwd:: --nocapture`).

use crate::common::attention::Problem;
use crate::common::ring::{C, CaseBase, Global, Ring, S, assert_one_message, check_all, pick_lse, pick_out, rule_source, within};
use crate::common::{FP32_ATOL, FP32_RTOL, as_dtype, errors, tensor, uniform};
use nki::attention::ring_fwd::ring_attention_fwd::ring_attention_spmd_fwd;
use nki::{Dtype, Launch, Precision, Tensor};
use std::ops::Range;
use std::time::Instant;

/// The hardware metric (the NKI test's): `max|a-b| <= HW_ATOL + HW_RTOL·max|ref|`.
const HW_ATOL: f64 = 1e-3;
const HW_RTOL: f64 = 1e-2;

/// The kernel's keyword arguments besides q, k, v.
#[derive(Clone, Debug, Default)]
struct Args {
    num_workers: usize,
    causal: bool,
    striped: bool,
    tp_q: bool,
    tp_k: bool,
    softmax_scale: Option<f64>,
    groups: Option<Vec<Vec<i64>>>,
}

/// Per-rank `(q, k, v)` in the kernel layout.
type Shards = Vec<(Tensor, Tensor, Tensor)>;

/// Per-rank `(output, LSE)` values.
type Results = Vec<(Vec<f32>, Vec<f32>)>;

/// Runs the kernel with `training=True` on every rank of `launch` (rank `r` takes
/// `shards[r]`); returns each rank's output and LSE values.
fn run_kernel(launch: &Launch, shards: &Shards, a: &Args) -> nki::Result<Results> {
    let outs = launch.run_ranks(|ctx| call(&shards[ctx.rank()], a).run(ctx))?;
    Ok(outs
        .into_iter()
        .map(|o| {
            assert_eq!(o.len(), 2, "training=True returns the output and the LSE");
            (o.get(0).unwrap().to_f32_vec(), o.get(1).unwrap().to_f32_vec())
        })
        .collect())
}

fn call<'a>(s: &'a (Tensor, Tensor, Tensor), a: &Args) -> ring_attention_spmd_fwd::Call<'a> {
    ring_attention_spmd_fwd::Call::new(&s.0, &s.1, &s.2)
        .num_workers(a.num_workers as i64)
        .use_causal_mask(a.causal)
        .striped_input(a.striped)
        .training(true)
        .tp_q(a.tp_q)
        .tp_k(a.tp_k)
        .softmax_scale(a.softmax_scale)
        .replica_groups(a.groups.clone())
}

/// Global inputs `[b·h, S_total, d]` as the kernel receives them (rounded to its
/// input dtype; causal q pre-scaled in f64 before rounding) and the reference's scale.
struct Data {
    q: Vec<f64>,
    k: Vec<f64>,
    v: Vec<f64>,
    ref_scale: f64,
    causal: bool,
}

impl Data {
    /// The reference problem on these inputs.
    fn global(&self) -> Global<'_> {
        Global { q: &self.q, k: &self.k, v: &self.v, scale: self.ref_scale, causal: self.causal }
    }
}

/// q and k uniform in [-2, 2) (so the softmax has real peaks), v in [-1, 1).
fn data(ring: &Ring, seed: u64, dtype: Dtype, causal: bool, softmax_scale: Option<f64>) -> Data {
    let n = ring.bh() * ring.st() * ring.d;
    let scale = softmax_scale.unwrap_or(1.0 / (ring.d as f64).sqrt());
    let q = uniform(n, seed * 3 + 1, -2.0, 2.0);
    let k = as_dtype(&uniform(n, seed * 3 + 2, -2.0, 2.0), dtype);
    let v = as_dtype(&uniform(n, seed * 3 + 3, -1.0, 1.0), dtype);
    if causal {
        // The causal kernel ignores softmax_scale: the caller pre-scales q.
        let qs: Vec<f64> = q.iter().map(|x| x * scale).collect();
        Data { q: as_dtype(&qs, dtype), k, v, ref_scale: 1.0, causal }
    } else {
        Data { q: as_dtype(&q, dtype), k, v, ref_scale: scale, causal }
    }
}

fn shards(ring: &Ring, x: &Data, dtype: Dtype, tp_q: bool, tp_k: bool) -> Shards {
    (0..ring.w)
        .map(|r| {
            let (qs, qv) = ring.shard_qk(&x.q, r, tp_q);
            let (ks, kv) = ring.shard_qk(&x.k, r, tp_k);
            let (vs, vv) = ring.shard_v(&x.v, r);
            (tensor(&qs, &qv, dtype), tensor(&ks, &kv, dtype), tensor(&vs, &vv, dtype))
        })
        .collect()
}

/// One numerics case: the shared part, the layout flags and the rows checked.
#[derive(Clone, Debug)]
struct Case {
    base: CaseBase,
    tp_q: bool,
    tp_k: bool,
    /// Local row ranges checked on every rank (all rows when `None`).
    sample: Option<Vec<Range<usize>>>,
}

/// Measured `max|a-b|` and `max|ref|` of the output and the LSE over all ranks.
#[derive(Clone, Copy, Debug, Default)]
struct Errs {
    out: f64,
    out_ref: f64,
    lse: f64,
    lse_ref: f64,
}

impl Errs {
    fn add(&mut self, (out, out_ref): (f64, f64), (lse, lse_ref): (f64, f64)) {
        self.out = self.out.max(out);
        self.out_ref = self.out_ref.max(out_ref);
        self.lse = self.lse.max(lse);
        self.lse_ref = self.lse_ref.max(lse_ref);
    }
}

/// `W`, layout (`C` contiguous, `S` striped), causal mask, `(b, h)`, `S_local`, `d`, LNC.
fn case(w: usize, striped: bool, causal: bool, (b, h): (usize, usize), sl: usize, d: usize, lnc: usize) -> Case {
    Case { base: CaseBase::new(w, striped, causal, (b, h), sl, d, lnc), tp_q: false, tp_k: false, sample: None }
}

impl Case {
    fn tp(mut self, tp_q: bool, tp_k: bool) -> Case {
        self.tp_q = tp_q;
        self.tp_k = tp_k;
        self.base.name += &format!(" tp_q={tp_q} tp_k={tp_k}");
        self
    }

    fn hw(mut self) -> Case {
        self.base = self.base.hw("");
        self
    }

    fn scale(mut self, s: f64) -> Case {
        self.base = self.base.scale(s);
        self
    }

    /// Checks only these local row ranges (the reference is O(S_total²·d) per rank).
    fn sample(mut self, rows: &[Range<usize>]) -> Case {
        self.sample = Some(rows.to_vec());
        self
    }

    fn dtype(&self) -> Dtype {
        if self.base.precision == Precision::Hardware { Dtype::Bf16 } else { Dtype::F32 }
    }

    fn args(&self) -> Args {
        Args {
            num_workers: self.base.ring.w,
            causal: self.base.causal,
            striped: self.base.ring.striped,
            tp_q: self.tp_q,
            tp_k: self.tp_k,
            softmax_scale: self.base.softmax_scale,
            groups: None,
        }
    }

    /// Runs the kernel; returns the data it ran on and every rank's (output, LSE).
    fn run(&self) -> (Data, Results) {
        let x = data(&self.base.ring, self.base.seed, self.dtype(), self.base.causal, self.base.softmax_scale);
        let sh = shards(&self.base.ring, &x, self.dtype(), self.tp_q, self.tp_k);
        let launch = Launch::new().ranks(self.base.ring.w).lnc(self.base.lnc).precision(self.base.precision);
        let outs = run_kernel(&launch, &sh, &self.args()).unwrap_or_else(|e| panic!("{}: {e}", self.base.name));
        (x, outs)
    }

    /// Runs the case and measures its errors against the reference.
    fn measure(&self) -> Errs {
        let t0 = Instant::now();
        let (x, outs) = self.run();
        let t_kernel = t0.elapsed();
        let r = &self.base.ring;
        let (bh, sl, d) = (r.bh(), r.sl, r.d);
        let rows = self.sample.clone().unwrap_or_else(|| std::iter::once(0..sl).collect());
        let want = r.expected_sampled(&x.global(), &rows);
        let mut e = Errs::default();
        for (rank, ((o, l), exps)) in outs.iter().zip(&want).enumerate() {
            assert_eq!(o.len(), bh * sl * d, "{}: rank {rank} output size", self.base.name);
            assert_eq!(l.len(), bh * 128 * r.groups(), "{}: rank {rank} LSE size", self.base.name);
            for ex in exps {
                let got_o = pick_out(o, bh, sl, d, &ex.rows);
                let got_l = pick_lse(l, bh, sl, &ex.rows);
                e.add(errors(&got_o, &ex.out), errors(&got_l, &ex.lse));
            }
        }
        eprintln!(
            "{}: out max err {:.2e} (max|ref| {:.2e}), lse max err {:.2e} (max|ref| {:.2e}); kernel {:.2?}, total {:.2?}",
            self.base.name,
            e.out,
            e.out_ref,
            e.lse,
            e.lse_ref,
            t_kernel,
            t0.elapsed()
        );
        e
    }

    /// Measures and asserts the precision mode's bound.
    fn check(&self) -> Errs {
        let e = self.measure();
        let (atol, rtol) = match self.base.precision {
            Precision::Fp32 => (FP32_ATOL, FP32_RTOL),
            _ => (HW_ATOL, HW_RTOL),
        };
        let (bo, bl) = (atol + rtol * e.out_ref, atol + rtol * e.lse_ref);
        assert!(e.out <= bo, "{}: output max abs error {:.3e} > {bo:.3e}", self.base.name, e.out);
        assert!(e.lse <= bl, "{}: LSE max abs error {:.3e} > {bl:.3e}", self.base.name, e.lse);
        e
    }
}

/// The fp32 covering set at small and medium sizes: every W, layout and mask, odd
/// and even b·h, both LNC degrees, d ∈ {16, 64, 128}, tp flags, an explicit scale.
#[test]
fn fp32_small_and_medium() {
    check_all(
        &[
            case(1, C, false, (1, 2), 512, 64, 1),
            case(1, C, true, (3, 1), 128, 128, 2),
            case(1, S, true, (1, 1), 256, 16, 1),
            case(2, C, false, (1, 3), 512, 128, 2).tp(true, true),
            case(2, C, true, (2, 1), 128, 16, 1).tp(false, true),
            case(2, S, true, (1, 2), 512, 64, 2).tp(true, false),
            case(3, C, false, (1, 1), 128, 64, 1).scale(0.3),
            case(3, C, true, (3, 1), 128, 16, 2),
            case(3, S, true, (1, 2), 512, 64, 1).tp(false, true),
            case(4, C, false, (2, 1), 128, 128, 1),
            case(4, C, true, (1, 1), 512, 64, 2).scale(0.3), // ignored: q is pre-scaled
            case(4, S, true, (3, 1), 512, 128, 2),
            case(8, C, false, (1, 1), 128, 64, 2),
            case(8, C, true, (1, 2), 128, 16, 1),
            case(8, S, true, (2, 1), 128, 64, 1).tp(true, true),
        ],
        Case::check,
    );
}

/// S_local = 4096: the remainder batch of odd b·h split across LNC2 programs
/// (attention_cte shards it by query groups from 1024 rows); W = 8 once.
#[test]
fn fp32_long_local_sequences() {
    let edges = |sl: usize| vec![0..128, sl / 2 - 128..sl / 2 + 128, sl - 128..sl];
    check_all(
        &[
            case(2, C, true, (1, 3), 4096, 64, 2).sample(&edges(4096)),
            case(2, C, false, (1, 1), 4096, 128, 1).sample(&edges(4096)),
            case(4, S, true, (1, 1), 4096, 16, 2).sample(&edges(4096)),
            case(8, C, true, (1, 1), 4096, 16, 2).sample(&[0..128, 4096 - 128..4096]),
        ],
        Case::check,
    );
}

/// The largest ring the causal kernel supports: 32 workers, both layouts.
#[test]
fn thirty_two_workers() {
    for c in [case(32, S, true, (1, 1), 128, 16, 1), case(32, C, true, (1, 1), 128, 16, 1), case(32, C, false, (1, 1), 128, 16, 1)] {
        c.check();
    }
}

/// S_local > 10240: every step's attention_cte runs two KV sections (8192 + 2176).
#[test]
fn fp32_kv_sections() {
    let sl = 10240 + 128;
    case(2, C, true, (1, 1), sl, 64, 2).sample(&[0..128, 8192 - 128..8192 + 128, sl - 128..sl]).check();
}

/// bf16 inputs in hardware precision, within the NKI test's bound.
#[test]
fn hardware_precision() {
    check_all(
        &[
            case(2, C, false, (1, 2), 512, 128, 2).hw(),
            case(3, C, true, (1, 3), 512, 64, 1).hw(),
            case(4, S, true, (2, 1), 512, 128, 2).hw(),
            case(8, S, true, (1, 1), 128, 16, 1).hw().tp(true, true),
            case(2, S, true, (1, 1), 4096, 64, 2).hw().sample(&[0..128, 4096 - 128..4096]),
        ],
        Case::check,
    );
}

/// The same global data (S_total = 1024) split over W = 1, 2, 4, 8 ranks in
/// hardware precision. Each ring step adds one bf16 rounding of the unnormalised
/// output (relative 2^-9) in the merge, so the error may grow with W, but at most
/// linearly: err(W) <= W · max(err(1), one bf16 rounding of the output).
#[test]
fn hardware_error_grows_at_most_linearly_in_w() {
    for (striped, causal) in [(C, false), (S, true)] {
        let mut errs = Vec::new();
        for w in [1usize, 2, 4, 8] {
            let mut c = case(w, striped, causal, (1, 2), 1024 / w, 64, 1).hw();
            c.base.seed = 4242; // same global data for every W
            errs.push((w, c.check()));
        }
        let (_, e1) = errs[0];
        let floor_out = 2f64.powi(-9) * e1.out_ref;
        let floor_lse = 2f64.powi(-24) * 4.0 * e1.lse_ref;
        eprintln!("error growth {}: {:?}", if striped { "striped causal" } else { "contiguous full" }, errs);
        for &(w, e) in &errs {
            let (bo, bl) = (w as f64 * e1.out.max(floor_out), w as f64 * e1.lse.max(floor_lse));
            assert!(e.out <= bo, "W={w}: output error {:.3e} > W·max(err(1), 2^-9·max|ref|) = {bo:.3e}", e.out);
            assert!(e.lse <= bl, "W={w}: LSE error {:.3e} > W·max(err(1), 4 ulp) = {bl:.3e}", e.lse);
        }
    }
}

/// The sharding helpers and the per-rank reference: un-sharding inverts sharding,
/// and the per-rank reference equals the rows of one full-sequence solve.
#[test]
fn ring_helpers_match_the_full_sequence_reference() {
    for striped in [false, true] {
        let ring = Ring { w: 3, b: 1, h: 2, sl: 128, d: 16, striped };
        let (bh, st, d) = (ring.bh(), ring.st(), ring.d);
        let x = data(&ring, 11, Dtype::F32, true, None);
        let full = Problem { scale: 1.0, causal: true, ..Problem::new(bh, bh, st, st, d, &x.q, &x.k, &x.v) }.solve(true);
        let per_rank = ring.expected(&x.global());
        let outs: Vec<Vec<f32>> = per_rank.iter().map(|(o, _)| o.iter().map(|&v| v as f32).collect()).collect();
        let lses: Vec<Vec<f32>> = per_rank.iter().map(|(_, l)| l.iter().map(|&v| v as f32).collect()).collect();
        let full_lse: Vec<f64> = full.max.iter().zip(&full.sum).map(|(m, s)| m + s.ln()).collect();
        let (e_out, _) = errors(&ring.unshard_out(&outs), &full.out);
        let (e_lse, _) = errors(&ring.unshard_lse(&lses), &full_lse);
        assert!(e_out < 1e-6 && e_lse < 1e-5, "striped={striped}: per-rank reference differs from the full solve: {e_out:e} {e_lse:e}");
        // Sharding then un-sharding is the identity; the striped map is t = i·W + r.
        let q32: Vec<Vec<f32>> = (0..ring.w).map(|r| ring.local(&x.q, r).iter().map(|&v| v as f32).collect()).collect();
        let back = ring.unshard_out(&q32);
        assert!(back.iter().zip(&x.q).all(|(&a, &b)| a == b as f32));
        assert_eq!(ring.global(2, 5), if striped { 17 } else { 261 });
        // The kernel layout: q[b, h, c, i] = local[b·h, i, c] without tp.
        let (shape, t) = ring.shard_qk(&x.q, 1, false);
        assert_eq!(shape, vec![1, 2, 16, 128]);
        let l = ring.local(&x.q, 1);
        assert_eq!(t[(16 + 3) * 128 + 5], l[(128 + 5) * 16 + 3]);
    }
}

/// W = 1 is plain attention_cte: the same output and LSE as calling it directly
/// (normalised, with cached statistics), to rounding.
#[test]
fn single_worker_equals_attention_cte() {
    use nki::attention::cte::attention_cte::attention_cte;
    for (causal, lnc, bh, sl, d) in [(false, 1, 2, 512, 64), (true, 1, 1, 640, 128), (true, 2, 3, 1152, 32), (false, 2, 1, 256, 16)] {
        let ring = Ring { w: 1, b: 1, h: bh, sl, d, striped: false };
        let x = data(&ring, 99 + sl as u64, Dtype::F32, causal, None);
        let sh = shards(&ring, &x, Dtype::F32, false, false);
        let launch = Launch::new().lnc(lnc).precision(Precision::Fp32);
        let a = Args { num_workers: 1, causal, ..Args::default() };
        let (o, l) = run_kernel(&launch, &sh, &a).unwrap().swap_remove(0);
        // attention_cte on [bh, d, s] q and k, [bh, s, d] v.
        let (q3, k3, v3) =
            (sh[0].0.reshape(&[bh, d, sl]).unwrap(), sh[0].1.reshape(&[bh, d, sl]).unwrap(), sh[0].2.reshape(&[bh, sl, d]).unwrap());
        let cte = attention_cte::Call::new(&q3, &k3, &v3)
            .scale(x.ref_scale)
            .causal_mask(causal)
            .tp_q(false)
            .tp_k(false)
            .tp_out(false)
            .cache_softmax(true)
            .launch(&launch)
            .unwrap();
        let want_o: Vec<f64> = cte.get(0).unwrap().to_f32_vec().iter().map(|&v| f64::from(v)).collect();
        let nm = cte.get(1).unwrap().to_f32_vec();
        let recip = cte.get(2).unwrap().to_f32_vec();
        let want_l: Vec<f64> = nm.iter().zip(&recip).map(|(&n, &r)| -f64::from(n) - f64::from(r).ln()).collect();
        let (eo, so) = errors(&o, &want_o);
        let (el, sl_) = errors(&l, &want_l);
        eprintln!("W=1 vs attention_cte causal={causal} lnc{lnc} {bh}x{sl}x{d}: out {eo:.2e} (max {so:.2e}), lse {el:.2e} (max {sl_:.2e})");
        assert!(eo <= 1e-6 * so, "W=1 output differs from attention_cte by {eo:e} (max {so:e})");
        assert!(el <= 1e-6 * sl_ + 1e-6, "W=1 LSE differs from attention_cte's statistics by {el:e} (max {sl_:e})");
    }
}

/// Striped and contiguous rings over the same global tokens give the same global
/// output and LSE once un-permuted.
#[test]
fn striped_equals_contiguous_after_unpermuting() {
    for (w, bh, sl, d, lnc) in [(4, 2, 256, 64, 1), (3, 3, 128, 128, 2)] {
        let mut glob = Vec::new();
        for striped in [false, true] {
            let ring = Ring { w, b: 1, h: bh, sl, d, striped };
            let x = data(&ring, 5150, Dtype::F32, true, None); // the global data do not depend on the layout
            let sh = shards(&ring, &x, Dtype::F32, false, false);
            let a = Args { num_workers: w, causal: true, striped, ..Args::default() };
            let outs = run_kernel(&Launch::new().ranks(w).lnc(lnc).precision(Precision::Fp32), &sh, &a).unwrap();
            let (o, l): (Vec<_>, Vec<_>) = outs.into_iter().unzip();
            glob.push((ring.unshard_out(&o), ring.unshard_lse(&l)));
        }
        let f64s = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<_>>();
        let (eo, so) = errors(&glob[1].0, &f64s(&glob[0].0));
        let (el, sl_) = errors(&glob[1].1, &f64s(&glob[0].1));
        eprintln!("striped vs contiguous W={w}: out {eo:.2e} (max {so:.2e}), lse {el:.2e} (max {sl_:.2e})");
        assert!(eo <= 1e-5 * so, "striped and contiguous outputs differ by {eo:e}");
        assert!(el <= 1e-5 * sl_, "striped and contiguous LSEs differ by {el:e}");
    }
}

/// The NKI regression cases for rows that see no key in some ring steps
/// (contiguous: every step from a later rank; striped: local row 0 on steps from
/// a higher rank): output and LSE finite and equal to the reference, LNC2, in
/// both precisions.
#[test]
fn fully_masked_rows() {
    let cases = [
        case(4, C, true, (1, 2), 256, 16, 2),
        case(4, C, true, (1, 2), 512, 16, 2),
        case(4, S, true, (1, 2), 512, 16, 2),
        case(4, S, true, (1, 2), 512, 128, 2),
    ];
    for c in &cases {
        c.check(); // `errors` asserts every value is finite
        c.clone().hw().check();
    }
}

/// `run_all`'s communication log: per ring, 2·(W−1) permutes (K and V after every
/// step but the last), W messages each carrying one K/V buffer per rank, numbered
/// consecutively.
#[test]
fn communication_accounting() {
    for (w, lnc, bh, sl, d, dtype, tp_k) in [
        (1, 1, 2, 128, 64, Dtype::F32, false),
        (2, 1, 2, 256, 64, Dtype::F32, false),
        (3, 2, 3, 128, 32, Dtype::Bf16, true),
        (4, 1, 1, 128, 128, Dtype::F32, false),
        (5, 2, 2, 128, 16, Dtype::Bf16, false),
    ] {
        let ring = Ring { w, b: 1, h: bh, sl, d, striped: false };
        let x = data(&ring, 3, dtype, true, None);
        let sh = shards(&ring, &x, dtype, false, tp_k);
        let a = Args { num_workers: w, causal: true, tp_k, ..Args::default() };
        let launch = Launch::new().ranks(w).lnc(lnc).precision(Precision::Fp32);
        let report = launch.run_all(|ctx| call(&sh[ctx.rank()], &a).run(ctx)).unwrap();
        let buffer = bh * sl * d * dtype.size_bytes();
        check_comm(&report.comm, &[(0..w).collect()], buffer, &format!("W={w} lnc{lnc}"));
    }
}

/// Asserts `comm` holds exactly 2·(W−1) permutes per ring of `rings`, with W
/// messages and W·`buffer` bytes each and seq numbers 0, 1, ... in order.
fn check_comm(comm: &[nki::collectives::CommEvent], rings: &[Vec<usize>], buffer: usize, what: &str) {
    let total: usize = rings.iter().map(|r| 2 * (r.len() - 1)).sum();
    assert_eq!(comm.len(), total, "{what}: {} collectives, want {total}: {comm:?}", comm.len());
    for ring in rings {
        let w = ring.len();
        let mine: Vec<_> = comm.iter().filter(|e| &e.ring == ring).collect();
        assert_eq!(mine.len(), 2 * (w - 1), "{what}: ring {ring:?} has {} collectives", mine.len());
        // In completion order: 0, 1, 2, ... (a ring's collectives complete one after another).
        let seqs: Vec<u64> = mine.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (0..2 * (w as u64 - 1)).collect::<Vec<_>>(), "{what}: ring {ring:?} seq numbers");
        for e in mine {
            assert_eq!(e.op, "collective_permute_implicit", "{what}: {e:?}");
            assert_eq!(e.messages, w, "{what}: messages of {e:?}");
            assert_eq!(e.bytes, w * buffer, "{what}: bytes of {e:?}");
        }
    }
}

/// Ranks 0..8 in rings of `num_workers` given by `groups` (each listed in ring
/// order), independent data per ring: every rank's result matches its own ring's
/// reference, and each ring communicates on its own.
fn check_groups(groups: &[Vec<usize>], ring: Ring, causal: bool, tp: bool, lnc: usize) {
    let nranks: usize = groups.iter().map(Vec::len).sum();
    let dtype = Dtype::F32;
    let mut per_rank: Vec<Option<(Tensor, Tensor, Tensor)>> = (0..nranks).map(|_| None).collect();
    let mut datas = Vec::new();
    for (gi, g) in groups.iter().enumerate() {
        let x = data(&ring, 700 + gi as u64, dtype, causal, None);
        for (pos, s) in shards(&ring, &x, dtype, tp, tp).into_iter().enumerate() {
            per_rank[g[pos]] = Some(s);
        }
        datas.push(x);
    }
    let sh: Shards = per_rank.into_iter().map(|s| s.expect("every rank is in a group")).collect();
    let a = Args {
        num_workers: ring.w,
        causal,
        striped: ring.striped,
        tp_q: tp,
        tp_k: tp,
        softmax_scale: None,
        groups: Some(groups.iter().map(|g| g.iter().map(|&r| r as i64).collect()).collect()),
    };
    let launch = Launch::new().ranks(nranks).lnc(lnc).precision(Precision::Fp32);
    let report = launch.run_all(|ctx| call(&sh[ctx.rank()], &a).run(ctx)).unwrap();
    check_comm(&report.comm, groups, ring.bh() * ring.sl * ring.d * 4, &format!("groups {groups:?}"));
    let (bh, sl, d) = (ring.bh(), ring.sl, ring.d);
    for (gi, g) in groups.iter().enumerate() {
        let x = &datas[gi];
        let want = ring.expected(&x.global());
        for (pos, &rank) in g.iter().enumerate() {
            let outs = &report.results[rank][0];
            let (o, l) = (outs.get(0).unwrap().to_f32_vec(), outs.get(1).unwrap().to_f32_vec());
            assert_eq!(o.len(), bh * sl * d);
            let (eo, so) = errors(&o, &want[pos].0);
            let (el, sl_) = errors(&l, &want[pos].1);
            let what = format!("groups {groups:?} causal={causal} striped={}: rank {rank} (position {pos})", ring.striped);
            assert!(eo <= FP32_ATOL + FP32_RTOL * so, "{what}: output error {eo:.3e}");
            assert!(el <= FP32_ATOL + FP32_RTOL * sl_, "{what}: LSE error {el:.3e}");
        }
    }
    eprintln!("groups {groups:?} causal={causal} striped={}: every rank matches its ring's reference", ring.striped);
}

/// The library's multi-group test (TP4 × CP2: rings (0,4), (1,5), (2,6), (3,7),
/// non-causal, tp_q = tp_k = True) and causal rings whose ring order is not rank
/// order, so positions (not rank ids) must drive the causal offsets.
#[test]
fn replica_groups() {
    let lib = vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]];
    let ring = |w, sl, striped| Ring { w, b: 1, h: 2, sl, d: 64, striped };
    check_groups(&lib, ring(2, 256, false), false, true, 1);
    check_groups(&lib, ring(2, 256, false), true, false, 1);
    // Ring order against rank order: rank 4 is position 0 of the ring (4, 0), ...
    check_groups(&[vec![4, 0], vec![1, 5], vec![6, 2], vec![7, 3]], ring(2, 128, false), true, false, 2);
    check_groups(&[vec![6, 1, 3, 4], vec![0, 7, 5, 2]], ring(4, 128, false), true, false, 1);
    check_groups(&[vec![5, 2, 7, 0], vec![3, 1, 6, 4]], ring(4, 128, true), true, false, 1);
}

/// A launch of `w` ranks whose shards come from `make(rank)`; returns the error text.
fn launch_err(w: usize, generation: nki::hw::Generation, a: Args, make: impl Fn(usize) -> (Tensor, Tensor, Tensor)) -> String {
    let sh: Shards = (0..w).map(&make).collect();
    let what = format!("{a:?}");
    within(60, &what.clone(), move || {
        let launch = Launch::new().ranks(w).precision(Precision::Fp32).generation(generation);
        match run_kernel(&launch, &sh, &a) {
            Ok(_) => panic!("{what}: the launch succeeded, expected an error"),
            Err(e) => e.to_string(),
        }
    })
}

fn zeros(shape: &[usize]) -> Tensor {
    tensor(shape, &vec![0.25; shape.iter().product()], Dtype::F32)
}

/// One rank with a wrong k aborts every rank with that rank's assertion, without a hang.
#[test]
fn a_failing_rank_aborts_the_launch() {
    let (w, h, sl, d) = (4, 2, 128, 32);
    let a = Args { num_workers: w, causal: true, ..Args::default() };
    let err = launch_err(w, nki::hw::Generation::Trn2, a, |r| {
        let k_len = if r == 2 { 2 * sl } else { sl };
        (zeros(&[1, h, d, sl]), zeros(&[1, h, d, k_len]), zeros(&[1, h, sl, d]))
    });
    eprintln!("failing rank: {err}");
    assert!(err.contains("k must be (1, 2, 32, 128)"), "{err}");
    assert!(err.contains("[rank 2 "), "the error names the failing rank: {err}");
    assert!(err.contains("ring_attention_fwd.rs"), "the error names the kernel source: {err}");
}

/// Every rule of the kernel is an error naming it; a rule of the typed API is
/// one message on both paths, the emulated kernel's assert and `validate`.
#[test]
fn rule_violations_are_errors() {
    use nki::attention::ring_fwd::{RingDims, RingFwdConfig, RingFwdRule, RingRule};
    use nki::hw::Generation::{Trn1, Trn2};
    let (h, sl, d) = (2, 128, 32);
    let ok = |d: usize, sl: usize, kh: usize| move |_: usize| (zeros(&[1, h, d, sl]), zeros(&[1, kh, d, sl]), zeros(&[1, kh, sl, d]));
    let base = |w: usize| Args { num_workers: w, causal: true, ..Args::default() };
    let cfg = |w: i64| RingFwdConfig::new(w).causal(true);
    let dims = |head_dim: i64, seqlen: i64| RingDims { batch: 1, heads: h as i64, seqlen, head_dim };
    let ring = RingFwdRule::Ring;
    let ruled: Vec<(RingFwdConfig, RingFwdRule, String)> = vec![
        (
            RingFwdConfig::new(2).striped(true),
            ring(RingRule::StripedNeedsCausal),
            launch_err(2, Trn2, Args { causal: false, striped: true, ..base(2) }, ok(d, sl, h)),
        ),
        (cfg(1).dims(dims(160, 128)), RingFwdRule::HeadDim, launch_err(1, Trn2, base(1), ok(160, sl, h))),
        (cfg(2).dims(dims(32, 200)), ring(RingRule::SeqlenMultiple), launch_err(2, Trn2, base(2), ok(d, 200, h))),
        (cfg(1).kv_heads(3).dims(dims(32, 128)), ring(RingRule::KvHeads), launch_err(1, Trn2, base(1), ok(d, sl, 3))),
        (
            cfg(4).replica_groups(&[&[0, 1], &[2, 3]]),
            ring(RingRule::GroupSize),
            launch_err(4, Trn2, Args { groups: Some(vec![vec![0, 1], vec![2, 3]]), ..base(4) }, ok(d, sl, h)),
        ),
        (cfg(1).target(Trn1), RingFwdRule::NeedsTrn2, launch_err(1, Trn1, base(1), ok(d, sl, h))),
        (cfg(33), RingFwdRule::TooManyCausalWorkers, launch_err(1, Trn2, base(33), ok(d, sl, h))),
        (
            RingFwdConfig::new(1).softmax_scale(1e39),
            ring(RingRule::ScaleNotFinite),
            launch_err(1, Trn2, Args { causal: false, softmax_scale: Some(1e39), ..base(1) }, ok(d, sl, h)),
        ),
    ];
    for (config, rule, err) in ruled {
        assert_eq!(config.violation(), Some(rule), "{config:?}");
        let shared = if let RingFwdRule::Ring(r) = rule { Some(r) } else { None };
        assert_one_message(config.validate(), rule.message(), &err, rule_source(shared, "ring_attention_fwd.rs"));
    }
    let unruled: Vec<(&str, String)> = vec![
        ("ring_attention_spmd_fwd takes num_workers >= 1", launch_err(1, Trn2, base(0), ok(d, sl, h))),
        (
            "v must be [1, 2, 128, 32] to match q and k, got (1, 2, 128, 33)",
            launch_err(1, Trn2, base(1), |_| (zeros(&[1, h, d, sl]), zeros(&[1, h, d, sl]), zeros(&[1, h, sl, d + 1]))),
        ),
    ];
    for (rule, err) in unruled {
        eprintln!("{err}");
        assert!(err.contains(rule), "expected an error naming `{rule}`, got: {err}");
        assert!(err.contains("ring_attention_fwd.rs"), "the error names the kernel source: {err}");
    }
}
