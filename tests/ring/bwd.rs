//! `ring_attention_spmd_bwd` in the emulator against the float64 full-sequence
//! gradients on the unsharded tensors (`common::attention_grad`), sharded to the
//! kernel's layouts with `common::ring`.
//!
//! * numerics: W ∈ {1, 2, 3, 4, 8}; contiguous × {causal, non-causal}, striped ×
//!   causal; B·N ∈ {1·2, 2·2, 3·3} (3·3 with LNC2 runs the duplicate-work round);
//!   LNC 1 and 2; S_local ∈ {128, 256, 512, 2048}; d ∈ {16, 32, 64, 128, 192}.
//!   `fp32`: `max|a-b| <= 1e-4·max|ref| + 1e-6` on dQ, dK, dV (max over the whole
//!   tensor). `hardware` (fp16 inputs as in the library test, bf16 too; the
//!   reference on the rounded inputs, O rounded to the input dtype and the LSE to
//!   fp32 as the kernel receives them): `<= 1e-2 + 1e-2·max|ref|`;
//!   `mixed_precision=False` (fp16 accumulators, -LSE and D): `<= 1e-2 + 2e-2·max|ref|`;
//! * the reference itself: its forward equals the row-by-row `Problem` solve, its
//!   gradients equal central differences of that forward;
//! * finite differences of `L = Σ dY ∘ O(Q, K, V)` against the kernel's gradients;
//! * the fully-masked-row cases of the NKI regression test;
//! * every generation: trn1 (LNC1, no `range_select`), trn2 and trn3, both precisions;
//! * communication: the exact sequence of collectives per ring and work round;
//! * replica groups: two rings of two ranks with independent data;
//! * errors: every rule of the kernel, and a failing rank aborts the whole launch;
//! * SBUF: `RingBwdConfig::sbuf_bytes` equals the emulator's measured peak over
//!   shapes, dtypes, precisions, ring sizes and LNC degrees; at the boundary the
//!   longest slice the rule accepts runs without a capacity error and the next
//!   tiling up is an `Err` from the typed API and, forced past the rule, an SBUF
//!   capacity error in the emulator.
//!
//! Every case prints its measured errors (`cargo test --release --test ring -- bwd:: --nocapture`).

use crate::common::attention::Problem;
use crate::common::attention_grad::{GradData, GradProblem, Grads, bwd_shard, dmajor, grad_data, loss};
use crate::common::ring::{C, CaseBase, Ring, S, assert_one_message, check_all, rule_source, within};
use crate::common::{errors, tensor, uniform};
use nki::attention::ring_bwd::ring_attention_bwd::ring_attention_spmd_bwd;
use nki::attention::ring_bwd::{RingBwdConfig, RingBwdInputs};
use nki::attention::ring_fwd::{RingDims, RingFeatures};
use nki::hw::Generation;
use nki::{Dtype, ErrorKind, Launch, Precision, Tensor};
use std::time::Instant;

/// The fp32 metric: `max|a-b| <= FP32_RTOL·max|ref| + FP32_ATOL`.
const FP32_RTOL: f64 = 1e-4;
const FP32_ATOL: f64 = 1e-6;
/// The hardware metric (the NKI test's `rtol = atol = 1e-2` in max mode).
const HW_ATOL: f64 = 1e-2;
const HW_RTOL: f64 = 1e-2;
/// `mixed_precision=False`: the accumulators, -LSE and D are fp16. -LSE rounded
/// to fp16 is off by up to |LSE|·2^-11, so every recomputed probability carries
/// a relative error up to 2^-11·max|LSE| (0.4 % at |LSE| = 8; the cases print
/// theirs), and every fp16 accumulation of dK, dV (W·S_local/512 of them) and dQ
/// adds 2^-11 relative: the bound doubles the library's relative term.
const NOMIX_ATOL: f64 = 1e-2;
const NOMIX_RTOL: f64 = 2e-2;

/// The kernel's keyword arguments besides the six tensors.
#[derive(Clone, Debug)]
struct Args {
    num_workers: usize,
    lnc: usize,
    causal: bool,
    striped: bool,
    mixed_precision: bool,
    softmax_scale: Option<f64>,
    groups: Option<Vec<Vec<i64>>>,
}

impl Args {
    fn new(num_workers: usize, causal: bool, striped: bool) -> Args {
        Args { num_workers, lnc: 1, causal, striped, mixed_precision: true, softmax_scale: None, groups: None }
    }
}

/// One rank's q, k, v, o, dy (`[b, h, d, S_local]`) and lse (`[b, h, 128, S_local/128]`).
type Inputs = [Tensor; 6];

/// One rank's dQ, dK, dV values (`[b, h, d, S_local]`).
type Outputs = [Vec<f32>; 3];

fn call<'a>(x: &'a Inputs, a: &Args) -> ring_attention_spmd_bwd::Call<'a> {
    ring_attention_spmd_bwd::Call::new(&x[0], &x[1], &x[2], &x[3], &x[4], &x[5])
        .use_causal_mask(a.causal)
        .striped_attention(a.striped)
        .num_workers(a.num_workers as i64)
        .lnc_size(a.lnc as i64)
        .mixed_precision(a.mixed_precision)
        .softmax_scale(a.softmax_scale)
        .replica_groups(a.groups.clone())
}

fn outputs(outs: nki::Outputs) -> Outputs {
    let ts = outs.into_vec();
    assert_eq!(ts.len(), 3, "without sinks the kernel returns dQ, dK and dV");
    for t in &ts {
        assert_eq!(t.dtype(), Dtype::F32, "the gradients are fp32");
    }
    [ts[0].to_f32_vec(), ts[1].to_f32_vec(), ts[2].to_f32_vec()]
}

/// Runs the kernel on every rank of `launch` (rank `r` takes `inputs[r]`).
fn run_kernel(launch: &Launch, inputs: &[Inputs], a: &Args) -> nki::Result<Vec<Outputs>> {
    let outs = launch.run_ranks(|ctx| call(&inputs[ctx.rank()], a).run(ctx))?;
    Ok(outs.into_iter().map(outputs).collect())
}

/// Every position's kernel inputs: q, k, v, dY and the reference's O in `dtype`
/// (as the kernel receives them), the reference's LSE in fp32.
fn shard_inputs(ring: &Ring, x: &GradData, dtype: Dtype) -> Vec<Inputs> {
    (0..ring.w)
        .map(|r| {
            bwd_shard(ring, x, r)
                .into_iter()
                .enumerate()
                .map(|(i, (shape, v))| tensor(&shape, &v, if i == 5 { Dtype::F32 } else { dtype }))
                .collect::<Vec<_>>()
                .try_into()
                .expect("six inputs")
        })
        .collect()
}

/// Measured `max|a-b|` and `max|ref|` of dQ, dK, dV over every rank.
#[derive(Clone, Copy, Debug, Default)]
struct Errs {
    err: [f64; 3],
    max_ref: [f64; 3],
}

impl Errs {
    /// Every rank's outputs against the reference gradients of `g`.
    fn measure(ring: &Ring, outs: &[Outputs], g: &Grads) -> Errs {
        let mut e = Errs::default();
        assert_eq!(outs.len(), ring.w, "one result per ring position");
        for (r, o) in outs.iter().enumerate() {
            for (i, want) in [&g.dq, &g.dk, &g.dv].into_iter().enumerate() {
                let (err, m) = errors(&o[i], &dmajor(ring, want, r));
                e.err[i] = e.err[i].max(err);
                e.max_ref[i] = e.max_ref[i].max(m);
            }
        }
        e
    }

    fn check(&self, what: &str, atol: f64, rtol: f64) {
        for (i, name) in ["dQ", "dK", "dV"].iter().enumerate() {
            let bound = atol + rtol * self.max_ref[i];
            assert!(
                self.err[i] <= bound,
                "{what}: {name} max abs error {:.3e} > {bound:.3e} (max|ref| {:.3e})",
                self.err[i],
                self.max_ref[i]
            );
        }
    }

    fn show(&self) -> String {
        let n = ["dQ", "dK", "dV"];
        (0..3).map(|i| format!("{} {:.2e} (max|ref| {:.2e})", n[i], self.err[i], self.max_ref[i])).collect::<Vec<_>>().join(", ")
    }
}

/// One numerics case: the shared part, the inputs' dtype, the accumulators'
/// precision and the target.
#[derive(Clone, Debug)]
struct Case {
    base: CaseBase,
    dtype: Dtype,
    mixed_precision: bool,
    generation: Generation,
}

/// `W`, layout, causal mask, `(b, h)`, `S_local`, `d`, LNC; fp32 inputs in fp32 precision.
fn case(w: usize, striped: bool, causal: bool, (b, h): (usize, usize), sl: usize, d: usize, lnc: usize) -> Case {
    Case {
        base: CaseBase::new(w, striped, causal, (b, h), sl, d, lnc),
        dtype: Dtype::F32,
        mixed_precision: true,
        generation: Generation::default(),
    }
}

impl Case {
    /// Hardware precision with `dtype` inputs.
    fn hw(mut self, dtype: Dtype) -> Case {
        self.base = self.base.hw(&format!(" {}", dtype.nl_name()));
        self.dtype = dtype;
        self
    }

    fn no_mixed_precision(mut self) -> Case {
        self.mixed_precision = false;
        self.base.name += " mixed_precision=False";
        self
    }

    fn scale(mut self, s: f64) -> Case {
        self.base = self.base.scale(s);
        self
    }

    /// The launch targets generation `g`.
    fn on(mut self, g: Generation) -> Case {
        self.generation = g;
        self.base.name += &format!(" on {g}");
        self
    }

    fn args(&self) -> Args {
        Args {
            num_workers: self.base.ring.w,
            lnc: self.base.lnc,
            causal: self.base.causal,
            striped: self.base.ring.striped,
            mixed_precision: self.mixed_precision,
            softmax_scale: self.base.softmax_scale,
            groups: None,
        }
    }

    /// Runs the case and measures its errors against the reference.
    fn measure(&self) -> Errs {
        let t0 = Instant::now();
        let x = grad_data(&self.base.ring, self.base.seed, self.dtype, self.base.causal, self.base.scale_value());
        let t_ref = t0.elapsed();
        let inputs = shard_inputs(&self.base.ring, &x, self.dtype);
        let launch = Launch::new().ranks(self.base.ring.w).lnc(self.base.lnc).precision(self.base.precision).generation(self.generation);
        let t1 = Instant::now();
        let outs = run_kernel(&launch, &inputs, &self.args()).unwrap_or_else(|e| panic!("{}: {e}", self.base.name));
        let t_kernel = t1.elapsed();
        let e = Errs::measure(&self.base.ring, &outs, &x.g);
        eprintln!("{}: {}; reference {t_ref:.2?}, kernel {t_kernel:.2?}", self.base.name, e.show());
        e
    }

    /// Measures and asserts the mode's bound.
    fn check(&self) -> Errs {
        let e = self.measure();
        let (atol, rtol) = match (self.base.precision, self.mixed_precision) {
            (Precision::Fp32, _) => (FP32_ATOL, FP32_RTOL),
            (_, true) => (HW_ATOL, HW_RTOL),
            (_, false) => (NOMIX_ATOL, NOMIX_RTOL),
        };
        e.check(&self.base.name, atol, rtol);
        e
    }
}

/// The reference's forward equals the row-by-row `Problem` solve (common/attention.rs),
/// causal and not, with a partial last block of rows.
#[test]
fn reference_forward_matches_problem() {
    for causal in [false, true] {
        let (bh, s, d) = (2, 320, 24);
        let n = bh * s * d;
        let (q, k, v, dy) = (uniform(n, 1, -2.0, 2.0), uniform(n, 2, -2.0, 2.0), uniform(n, 3, -1.0, 1.0), uniform(n, 4, -1.0, 1.0));
        let scale = 0.37;
        let g = GradProblem { bh, s, d, q: &q, k: &k, v: &v, dy: &dy, scale, causal }.solve();
        let p = Problem { scale, causal, ..Problem::new(bh, bh, s, s, d, &q, &k, &v) }.solve(true);
        let lse: Vec<f64> = p.max.iter().zip(&p.sum).map(|(m, z)| m + z.ln()).collect();
        let diff = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
        let (eo, el) = (diff(&g.o, &p.out), diff(&g.lse, &lse));
        eprintln!("reference forward vs Problem causal={causal}: O {eo:.2e}, LSE {el:.2e}");
        assert!(eo < 1e-12 && el < 1e-12, "causal={causal}: forward differs from Problem: O {eo:e}, LSE {el:e}");
        // The forward-only run gives the same O and LSE.
        let f = GradProblem { bh, s, d, q: &q, k: &k, v: &v, dy: &dy, scale, causal }.forward();
        assert_eq!((f.o, f.lse), (g.o, g.lse));
    }
}

/// `L = Σ dY ∘ O` with O from `Problem` (not from the gradient reference).
#[allow(clippy::too_many_arguments)]
fn problem_loss(bh: usize, s: usize, d: usize, q: &[f64], k: &[f64], v: &[f64], dy: &[f64], scale: f64, causal: bool) -> f64 {
    loss(&Problem { scale, causal, ..Problem::new(bh, bh, s, s, d, q, k, v) }.solve(true).out, dy)
}

/// Central difference of `problem_loss` in entry `idx` of input `which` (0 q, 1 k, 2 v).
#[allow(clippy::too_many_arguments)]
fn central_difference(bh: usize, s: usize, d: usize, x: [&[f64]; 4], which: usize, idx: usize, scale: f64, causal: bool) -> f64 {
    let h = 1e-4;
    let at = |delta: f64| {
        let mut t = x[which].to_vec();
        t[idx] += delta;
        let mut ins = [x[0], x[1], x[2]];
        ins[which] = &t;
        problem_loss(bh, s, d, ins[0], ins[1], ins[2], x[3], scale, causal)
    };
    (at(h) - at(-h)) / (2.0 * h)
}

/// The kernel's gradients (fp32 mode) at sampled entries equal central
/// differences of `L = Σ dY ∘ O(Q, K, V)`, O from the `Problem` forward; so do
/// the reference's gradients (much tighter).
#[test]
fn finite_differences() {
    for striped in [false, true] {
        let ring = Ring { w: 2, b: 1, h: 1, sl: 128, d: 16, striped };
        let (s, d) = (ring.st(), ring.d);
        let scale = 1.0 / (d as f64).sqrt();
        let x = grad_data(&ring, 77, Dtype::F32, true, scale);
        let inputs = shard_inputs(&ring, &x, Dtype::F32);
        let outs = run_kernel(&Launch::new().ranks(2).precision(Precision::Fp32), &inputs, &Args::new(2, true, striped)).unwrap();
        let (mut worst_kernel, mut worst_ref) = (0.0f64, 0.0f64);
        // Tokens at both ends of the sequence and around the rank boundary.
        let tokens = [0usize, 1, 63, 127, 128, 129, 200, 255];
        for (which, name) in ["dQ", "dK", "dV"].iter().enumerate() {
            let reference = [&x.g.dq, &x.g.dk, &x.g.dv][which];
            for (n, &t) in tokens.iter().enumerate() {
                let c = (5 * n + 3 * which) % d;
                let idx = t * d + c;
                let fd = central_difference(1, s, d, [&x.q, &x.k, &x.v, &x.dy], which, idx, scale, true);
                // Token t lives on position r as local row i; the output is [1, 1, d, S_local].
                let (r, i) = if striped { (t % ring.w, t / ring.w) } else { (t / ring.sl, t % ring.sl) };
                let got = f64::from(outs[r][which][c * ring.sl + i]);
                let (ek, er) = ((got - fd).abs(), (reference[idx] - fd).abs());
                eprintln!(
                    "striped={striped} {name}[token {t}, {c}]: fd {fd:+.6e}, kernel {got:+.6e} (err {ek:.1e}), reference err {er:.1e}"
                );
                assert!(
                    ek <= 1e-3 * fd.abs() + 1e-6,
                    "striped={striped} {name}[token {t}, {c}]: kernel {got:e} vs finite difference {fd:e}"
                );
                assert!(er <= 1e-6 * fd.abs() + 1e-8, "striped={striped} {name}[token {t}, {c}]: reference {} vs {fd:e}", reference[idx]);
                worst_kernel = worst_kernel.max(ek / fd.abs().max(1e-3));
                worst_ref = worst_ref.max(er);
            }
        }
        eprintln!(
            "finite differences striped={striped}: worst kernel relative error {worst_kernel:.2e}, worst reference abs error {worst_ref:.2e}"
        );
    }
}

/// fp32 covering set: every W, layout and mask, B·N ∈ {1·2, 2·2, 3·3}, both LNC
/// degrees, S_local ∈ {128, 256, 512}.
#[test]
fn fp32_small_and_medium() {
    check_all(
        &[
            case(1, C, false, (1, 2), 512, 64, 1),
            case(1, C, true, (3, 3), 128, 32, 2),
            case(1, S, true, (2, 2), 256, 16, 1),
            case(2, C, false, (2, 2), 512, 32, 2),
            case(2, C, true, (1, 2), 256, 128, 1),
            case(2, S, true, (3, 3), 128, 16, 2),
            case(3, C, false, (1, 2), 512, 64, 1),
            case(3, C, true, (3, 3), 128, 32, 2),
            case(3, S, true, (2, 2), 256, 64, 1),
            case(4, C, false, (3, 3), 128, 32, 2),
            case(4, C, true, (2, 2), 512, 64, 1),
            case(4, S, true, (1, 2), 512, 128, 2),
            case(8, C, false, (2, 2), 128, 16, 2),
            case(8, C, true, (1, 2), 128, 64, 1),
            case(8, S, true, (3, 3), 128, 32, 2),
        ],
        Case::check,
    );
}

/// S_local = 2048 (four 512-key tiles, four query groups) with W = 1 and 2: the
/// only sizes where tiles above the local diagonal exist (S_local > 512), which
/// steps >= 1 of a contiguous causal ring must not skip.
#[test]
fn fp32_long_local_sequences() {
    check_all(
        &[
            case(1, C, true, (1, 2), 2048, 64, 2),
            case(2, C, false, (1, 2), 2048, 32, 1),
            case(2, C, true, (1, 2), 2048, 32, 1),
            case(2, S, true, (1, 2), 2048, 64, 2),
        ],
        Case::check,
    );
}

/// Tokens per rank that are a multiple of 128 but not of 512 beyond one tile
/// (the documented constraint is divisibility by 128): 384 keys in one tile of
/// 384, 640 in a 512-key tile and a 128-key rest, 896 in 512 + 384, causal and
/// not, contiguous and striped, both LNC degrees.
#[test]
fn fp32_seqlens_that_leave_a_partial_key_tile() {
    check_all(
        &[
            case(2, C, true, (1, 2), 384, 64, 1),
            case(2, S, true, (1, 2), 384, 32, 2),
            case(1, C, false, (1, 2), 640, 32, 2),
            case(2, C, true, (1, 2), 640, 64, 1),
            case(2, S, true, (1, 2), 896, 32, 1),
        ],
        Case::check,
    );
}

/// D = 192 (two head-dim tiles of 96) and a non-default softmax_scale.
#[test]
fn fp32_wide_heads_and_explicit_scale() {
    check_all(
        &[
            case(2, C, true, (1, 2), 256, 192, 1),
            case(3, S, true, (1, 1), 512, 192, 2),
            case(2, S, true, (1, 2), 256, 64, 1).scale(0.3),
            case(3, C, false, (2, 2), 128, 32, 2).scale(0.05),
        ],
        Case::check,
    );
}

/// fp16 inputs (the library test's dtype) and bf16 inputs in hardware precision,
/// within the library test's bound; the library's own configuration (W = 4,
/// LNC2, S_total = 8192) once.
#[test]
fn hardware_precision() {
    check_all(
        &[
            case(4, C, true, (1, 2), 2048, 64, 2).hw(Dtype::F16),
            case(4, C, false, (3, 3), 128, 64, 2).hw(Dtype::F16),
            case(4, S, true, (1, 2), 512, 128, 2).hw(Dtype::F16),
            case(2, C, true, (1, 1), 2048, 128, 1).hw(Dtype::F16),
            case(8, S, true, (1, 2), 128, 64, 1).hw(Dtype::F16),
            case(1, C, false, (2, 2), 512, 32, 1).hw(Dtype::F16),
            case(3, C, true, (1, 2), 256, 64, 1).hw(Dtype::Bf16),
            case(2, S, true, (2, 2), 512, 64, 2).hw(Dtype::Bf16),
            case(8, C, false, (1, 2), 128, 32, 2).hw(Dtype::Bf16),
        ],
        Case::check,
    );
}

/// `mixed_precision=False`: fp16 accumulators, -LSE and D, within `NOMIX_*`; on
/// the same data the error differs from (and exceeds) the mixed-precision one, so
/// the flag takes effect.
#[test]
fn hardware_without_mixed_precision() {
    for c in [case(4, C, true, (1, 2), 512, 64, 2).hw(Dtype::F16), case(2, C, true, (1, 1), 2048, 64, 1).hw(Dtype::F16)] {
        let lse = grad_data(&c.base.ring, c.base.seed, c.dtype, c.base.causal, c.base.scale_value())
            .g
            .lse
            .iter()
            .fold(0.0f64, |m, x| m.max(x.abs()));
        let em = c.check();
        let e = c.clone().no_mixed_precision().check();
        eprintln!("{}: max|LSE| {lse:.2}; mixed_precision=False: {} vs True: {}", c.base.name, e.show(), em.show());
        assert!(
            (0..3).all(|i| e.err[i] >= em.err[i]) && (0..3).any(|i| e.err[i] > 1.5 * em.err[i]),
            "{}: mixed_precision=False should lose accuracy: {} vs {}",
            c.base.name,
            e.show(),
            em.show()
        );
    }
}

/// Every generation the launch can target, in both precisions, within the same
/// bounds: trn1 has neither LNC2 nor `range_select` (the causal mask of the steps
/// after the first), so there the kernel runs LNC1 rings without the causal mask
/// and a causal single worker, and a causal ring stops at `range_select`. S_local =
/// 1024 has query groups entirely above a 512-key tile, which causal steps skip.
#[test]
fn every_generation() {
    for g in Generation::ALL {
        let hw = g.limits();
        let lnc = if hw.has_core_barrier { 2 } else { 1 };
        let mut cases = vec![case(4, C, false, (1, 2), 512, 64, lnc), case(1, C, true, (1, 2), 1024, 64, lnc)];
        if hw.has_range_select {
            cases.extend([case(2, C, true, (1, 2), 1024, 32, lnc), case(4, S, true, (1, 2), 256, 64, lnc)]);
        } else {
            let a = Args { lnc, ..Args::new(2, true, false) };
            let err = launch_err_on(g, 2, lnc, a, |_| shapes(2, 32, 256));
            assert!(err.contains("range_select") && err.contains("trn1"), "a causal ring on {g} needs range_select: {err}");
        }
        for c in cases {
            c.clone().on(g).check();
            c.on(g).hw(Dtype::Bf16).check();
        }
    }
}

/// The NKI regression cases for rows that see no key in some ring steps
/// (contiguous causal: every step from a later rank; striped: local row 0 on steps
/// from a higher rank): gradients finite and equal to the reference, both precisions.
#[test]
fn fully_masked_rows() {
    let cases = [case(4, C, true, (1, 2), 256, 16, 2), case(4, C, true, (1, 2), 256, 64, 1), case(4, S, true, (1, 2), 512, 16, 2)];
    for c in &cases {
        c.check(); // `errors` asserts every value is finite
        c.clone().hw(Dtype::F16).check();
    }
}

/// The collectives one `(b, h)` work round issues on a ring of `w`, in order:
/// `(op, bytes)` given the element size of the inputs.
fn expected_round(w: usize, lnc: usize, d: usize, sl: usize, esize: usize) -> Vec<(&'static str, usize)> {
    const PERMUTE: &str = "collective_permute_implicit";
    const REDUCE: &str = "collective_permute_implicit_reduce";
    // Q, dY (input dtype, [lnc, d, S]), LSE, D (fp32, [lnc, 128, S/128]): W messages each.
    let qdy = w * lnc * d * sl * esize;
    let stats = w * lnc * sl * 4;
    let dq = w * lnc * d * sl * 4;
    let permute_all = [(PERMUTE, qdy), (PERMUTE, qdy), (PERMUTE, stats), (PERMUTE, stats)];
    let mut ops = Vec::new();
    if w > 1 {
        ops.extend(permute_all); // step 0: the local queries start around the ring
    }
    ops.push((PERMUTE, dq)); // step 0's dQ goes out
    for step in 1..w {
        if step + 1 < w {
            ops.extend(permute_all); // the next step's queries, before this step's compute
        }
        ops.push((REDUCE, dq)); // this step's dQ joins the partial sum
    }
    ops
}

/// Asserts that `comm` holds, per ring of `rings`, exactly `rounds` repetitions
/// of `round`, with `W` messages each and consecutive seq numbers.
fn check_comm(comm: &[nki::collectives::CommEvent], rings: &[Vec<usize>], round: &[(&str, usize)], rounds: usize, what: &str) {
    let per_ring = round.len() * rounds;
    assert_eq!(comm.len(), per_ring * rings.len(), "{what}: {} collectives, want {}", comm.len(), per_ring * rings.len());
    for ring in rings {
        let mine: Vec<_> = comm.iter().filter(|e| &e.ring == ring).collect();
        assert_eq!(mine.len(), per_ring, "{what}: ring {ring:?} has {} collectives, want {per_ring}", mine.len());
        let seqs: Vec<u64> = mine.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (0..per_ring as u64).collect::<Vec<_>>(), "{what}: ring {ring:?} seq numbers");
        for (i, e) in mine.iter().enumerate() {
            let (op, bytes) = round[i % round.len()];
            let at = format!("{what}: ring {ring:?} collective {i} (round {}, #{})", i / round.len(), i % round.len());
            assert_eq!(e.op, op, "{at}: {e:?}");
            assert_eq!(e.messages, ring.len(), "{at}: messages of {e:?}");
            assert_eq!(e.bytes, bytes, "{at}: bytes of {e:?}");
        }
    }
}

/// `run_all`'s communication log, per ring and work round: 4 permutes (Q, dY,
/// LSE, D) at step 0 when W > 1 and before each step 1..W−2, one plain permute
/// of step 0's dQ and W−1 reducing permutes of dQ; nothing after the last one.
#[test]
fn communication_accounting() {
    for (w, lnc, (b, h), sl, d, dtype, causal) in [
        (1, 1, (1, 2), 128, 64, Dtype::F32, false),
        (2, 1, (1, 2), 256, 32, Dtype::F16, true),
        (3, 2, (3, 3), 128, 32, Dtype::Bf16, true),
        (4, 1, (1, 1), 128, 128, Dtype::F32, false),
        (5, 2, (2, 1), 128, 16, Dtype::F32, true),
    ] {
        let ring = Ring { w, b, h, sl, d, striped: false };
        let x = grad_data(&ring, 3, dtype, causal, 1.0 / (d as f64).sqrt());
        let inputs = shard_inputs(&ring, &x, dtype);
        let a = Args { lnc, ..Args::new(w, causal, false) };
        let launch = Launch::new().ranks(w).lnc(lnc).precision(Precision::Fp32);
        let report = launch.run_all(|ctx| call(&inputs[ctx.rank()], &a).run(ctx)).unwrap();
        let rounds = (b * h).div_ceil(lnc);
        let round = expected_round(w, lnc, d, sl, dtype.size_bytes());
        let what = format!("W={w} lnc{lnc} {b}x{h}");
        check_comm(&report.comm, &[(0..w).collect()], &round, rounds, &what);
        // The counts the brief states: per round 4·[W>1] + 4·max(W−2, 0) + 1 plain, W−1 reducing.
        let plain = report.comm.iter().filter(|e| e.op == "collective_permute_implicit").count();
        let reduce = report.comm.iter().filter(|e| e.op == "collective_permute_implicit_reduce").count();
        assert_eq!(plain, rounds * (4 * usize::from(w > 1) + 4 * w.saturating_sub(2) + 1), "{what}: plain permutes");
        assert_eq!(reduce, rounds * (w - 1), "{what}: reducing permutes");
        assert_eq!(
            report.comm.last().map(|e| e.op),
            Some(if w > 1 { "collective_permute_implicit_reduce" } else { "collective_permute_implicit" })
        );
        // The numbers still hold (O reaches the kernel rounded to a 16-bit dtype:
        // the hardware bound there).
        let outs: Vec<Outputs> = report.results.into_iter().map(|mut r| outputs(r.swap_remove(0))).collect();
        let (atol, rtol) = if dtype == Dtype::F32 { (FP32_ATOL, FP32_RTOL) } else { (HW_ATOL, HW_RTOL) };
        Errs::measure(&ring, &outs, &x.g).check(&what, atol, rtol);
        eprintln!("{what}: {} collectives ({plain} permutes, {reduce} reducing) over {rounds} round(s)", report.comm.len());
    }
}

/// Ranks in rings of `num_workers` given by `groups` (each listed in ring order),
/// independent data per ring: every rank matches its own ring's reference, and
/// each ring communicates on its own.
fn check_groups(groups: &[Vec<usize>], ring: Ring, lnc: usize) {
    let nranks: usize = groups.iter().map(Vec::len).sum();
    let scale = 1.0 / (ring.d as f64).sqrt();
    let mut per_rank: Vec<Option<Inputs>> = (0..nranks).map(|_| None).collect();
    let mut datas = Vec::new();
    for (gi, g) in groups.iter().enumerate() {
        let x = grad_data(&ring, 700 + gi as u64, Dtype::F32, true, scale);
        for (pos, s) in shard_inputs(&ring, &x, Dtype::F32).into_iter().enumerate() {
            per_rank[g[pos]] = Some(s);
        }
        datas.push(x);
    }
    let inputs: Vec<Inputs> = per_rank.into_iter().map(|s| s.expect("every rank is in a group")).collect();
    let a = Args {
        lnc,
        groups: Some(groups.iter().map(|g| g.iter().map(|&r| r as i64).collect()).collect()),
        ..Args::new(ring.w, true, ring.striped)
    };
    let launch = Launch::new().ranks(nranks).lnc(lnc).precision(Precision::Fp32);
    let report = launch.run_all(|ctx| call(&inputs[ctx.rank()], &a).run(ctx)).unwrap();
    let round = expected_round(ring.w, lnc, ring.d, ring.sl, 4);
    check_comm(&report.comm, groups, &round, ring.bh().div_ceil(lnc), &format!("groups {groups:?}"));
    let mut results: Vec<Option<Outputs>> = report.results.into_iter().map(|mut r| Some(outputs(r.swap_remove(0)))).collect();
    for (gi, g) in groups.iter().enumerate() {
        let outs: Vec<Outputs> = g.iter().map(|&rank| results[rank].take().expect("each rank once")).collect();
        let e = Errs::measure(&ring, &outs, &datas[gi].g);
        let what = format!("groups {groups:?} striped={}: ring {g:?}", ring.striped);
        eprintln!("{what}: {}", e.show());
        e.check(&what, FP32_ATOL, FP32_RTOL);
    }
}

/// Four ranks as two causal rings ((0, 2), (1, 3)) with num_workers = 2 and
/// independent data per ring; and rings whose order is not rank order.
#[test]
fn replica_groups() {
    let ring = |w, sl, striped| Ring { w, b: 1, h: 2, sl, d: 32, striped };
    check_groups(&[vec![0, 2], vec![1, 3]], ring(2, 256, false), 1);
    check_groups(&[vec![3, 1], vec![0, 2]], ring(2, 128, true), 2);
}

fn filled(shape: &[usize], dtype: Dtype) -> Tensor {
    tensor(shape, &vec![0.25; shape.iter().product()], dtype)
}

/// Shapes of one rank's inputs: `[b, h, d, sl]` for q, k, v, o, dy; the LSE's own.
#[derive(Clone, Debug)]
struct Shapes {
    qkv: [Vec<usize>; 5],
    lse: Vec<usize>,
    dtypes: [Dtype; 5],
}

fn shapes(h: usize, d: usize, sl: usize) -> Shapes {
    let x = vec![1, h, d, sl];
    Shapes { qkv: [x.clone(), x.clone(), x.clone(), x.clone(), x], lse: vec![1, h, 128, sl.div_ceil(128)], dtypes: [Dtype::F32; 5] }
}

/// A launch of `w` ranks (LNC `lnc`) whose inputs come from `make(rank)`; returns the error text.
fn launch_err(w: usize, lnc: usize, a: Args, make: impl Fn(usize) -> Shapes) -> String {
    launch_err_on(Generation::default(), w, lnc, a, make)
}

/// [`launch_err`] on generation `g`.
fn launch_err_on(g: Generation, w: usize, lnc: usize, a: Args, make: impl Fn(usize) -> Shapes) -> String {
    let inputs: Vec<Inputs> = (0..w)
        .map(|r| {
            let s = make(r);
            let t = |i: usize| filled(&s.qkv[i], s.dtypes[i]);
            [t(0), t(1), t(2), t(3), t(4), filled(&s.lse, Dtype::F32)]
        })
        .collect();
    let what = format!("{a:?}");
    within(60, &what.clone(), move || {
        let launch = Launch::new().ranks(w).lnc(lnc).precision(Precision::Fp32).generation(g);
        match run_kernel(&launch, &inputs, &a) {
            Ok(_) => panic!("{what}: the launch succeeded, expected an error"),
            Err(e) => e.to_string(),
        }
    })
}

/// Every rule of the kernel is an error naming it; a rule of the typed API is
/// one message on both paths, the emulated kernel's assert and `validate`.
#[test]
fn rule_violations_are_errors() {
    use nki::attention::ring_bwd::RingBwdRule;
    use nki::attention::ring_fwd::RingRule;
    let (h, d, sl) = (2, 32, 256);
    let base = |w: usize| Args::new(w, true, false);
    let ok = move |_: usize| shapes(h, d, sl);
    let with = |i: usize, shape: Vec<usize>| {
        move |_: usize| {
            let mut s = shapes(h, d, sl);
            s.qkv[i] = shape.clone();
            s
        }
    };
    let cfg = |w: i64| RingBwdConfig::new(w).causal(true);
    let dims = |head_dim: i64, seqlen: i64| RingDims { batch: 1, heads: h as i64, seqlen, head_dim };
    let ring = RingBwdRule::Ring;
    let ruled: Vec<(RingBwdConfig, RingBwdRule, String)> = vec![
        (RingBwdConfig::new(2).striped(true), ring(RingRule::StripedNeedsCausal), launch_err(2, 1, Args::new(2, false, true), ok)),
        (cfg(2).dims(dims(32, 200)), ring(RingRule::SeqlenMultiple), launch_err(2, 1, base(2), move |_| shapes(h, d, 200))),
        (cfg(1).dims(dims(131, 256)), RingBwdRule::HeadDimTiles, launch_err(1, 1, base(1), move |_| shapes(h, 131, sl))),
        (cfg(1).kv_heads(3).dims(dims(32, 256)), ring(RingRule::KvHeads), launch_err(1, 1, base(1), with(1, vec![1, 3, d, sl]))),
        (
            cfg(4).replica_groups(&[&[0, 1], &[2, 3]]),
            ring(RingRule::GroupSize),
            launch_err(4, 1, Args { groups: Some(vec![vec![0, 1], vec![2, 3]]), ..base(4) }, ok),
        ),
        (
            RingBwdConfig::new(1).softmax_scale(1e39),
            ring(RingRule::ScaleNotFinite),
            launch_err(1, 1, Args { softmax_scale: Some(1e39), ..Args::new(1, false, false) }, ok),
        ),
        (cfg(1).softmax_scale(0.0), RingBwdRule::CausalScale, launch_err(1, 1, Args { softmax_scale: Some(0.0), ..base(1) }, ok)),
    ];
    for (config, rule, err) in ruled {
        assert_eq!(config.violation(), Some(rule), "{config:?}");
        let shared = if let RingBwdRule::Ring(r) = rule { Some(r) } else { None };
        assert_one_message(config.validate(), rule.message(), &err, rule_source(shared, "ring_attention_bwd.rs"));
    }
    let cases: Vec<(&str, String)> = vec![
        ("lnc_size is 2 but the kernel runs on 1 LNC program(s)", launch_err(2, 1, Args { lnc: 2, ..base(2) }, ok)),
        ("lnc_size is 1 but the kernel runs on 2 LNC program(s)", launch_err(2, 2, base(2), ok)),
        (
            "k_ref must be [B, N_kv, D, S], q_ref is (1, 2, 32, 256), got (1, 2, 32, 512)",
            launch_err(1, 1, base(1), with(1, vec![1, h, d, 2 * sl])),
        ),
        ("v_ref must have k_ref's shape", launch_err(1, 1, base(1), with(2, vec![1, h + 1, d, sl]))),
        ("o_ref must have q_ref's shape", launch_err(1, 1, base(1), with(3, vec![1, h, d + 1, sl]))),
        ("dy_ref must have q_ref's shape", launch_err(1, 1, base(1), with(4, vec![2, h, d, sl]))),
        (
            "lse_ref must be [B, N, 128, S / 128] = [1, 2, 128, 2], got (1, 2, 128, 4)",
            launch_err(1, 1, base(1), move |_| Shapes { lse: vec![1, h, 128, 4], ..shapes(h, d, sl) }),
        ),
        (
            "lse_ref must be [B, N, 128, S / 128]",
            launch_err(1, 1, base(1), move |_| Shapes { lse: vec![1, h, 2, 128], ..shapes(h, d, sl) }),
        ),
        (
            "must share one dtype",
            launch_err(2, 1, base(2), move |_| {
                let mut s = shapes(h, d, sl);
                s.dtypes[2] = Dtype::Bf16;
                s
            }),
        ),
        ("ring_attention_spmd_bwd takes num_workers >= 1", launch_err(1, 1, base(0), ok)),
    ];
    for (rule, err) in cases {
        eprintln!("{err}");
        assert!(err.contains(rule), "expected an error naming `{rule}`, got: {err}");
        assert!(err.contains("ring_attention_bwd.rs"), "the error names the kernel source: {err}");
    }
}

/// One rank with a wrong k aborts every rank with that rank's assertion, without
/// a hang, in both LNC degrees.
#[test]
fn a_failing_rank_aborts_the_launch() {
    for lnc in [1, 2] {
        let (w, h, d, sl) = (4, 2, 32, 128);
        let a = Args { lnc, ..Args::new(w, true, false) };
        let t0 = Instant::now();
        let err = launch_err(w, lnc, a, move |r| {
            let mut s = shapes(h, d, sl);
            if r == 2 {
                s.qkv[1] = vec![1, h, d, 2 * sl];
            }
            s
        });
        eprintln!("failing rank (lnc{lnc}, {:.2?}): {err}", t0.elapsed());
        assert!(err.contains("k_ref must be [B, N_kv, D, S], q_ref is (1, 2, 32, 128)"), "{err}");
        assert!(err.contains("[rank 2 "), "the error names the failing rank: {err}");
        assert!(err.contains("ring_attention_bwd.rs"), "the error names the kernel source: {err}");
    }
}

/// `w` ranks of one `(b, h)` pair per LNC program: q, k, v, o, dy `[1, lnc, d, sl]`
/// of `dtype` and the LSE, all constant (the footprint does not depend on values).
fn sized_inputs(w: usize, lnc: usize, d: usize, sl: usize, dtype: Dtype) -> Vec<Inputs> {
    let s = Shapes { dtypes: [dtype; 5], ..shapes(lnc, d, sl) };
    (0..w)
        .map(|_| {
            let t = |i: usize| filled(&s.qkv[i], dtype);
            [t(0), t(1), t(2), t(3), t(4), filled(&s.lse, Dtype::F32)]
        })
        .collect()
}

/// Per-rank inputs regrouped by kind (q, k, v, o, dy, lse), one tensor per rank each.
fn by_kind(inputs: &[Inputs]) -> Vec<Vec<Tensor>> {
    (0..6).map(|i| inputs.iter().map(|x| x[i].clone()).collect()).collect()
}

/// The typed API's view of [`by_kind`]'s lists.
fn typed_inputs(kinds: &[Vec<Tensor>]) -> RingBwdInputs<'_> {
    RingBwdInputs {
        q: &kinds[0],
        k: &kinds[1],
        v: &kinds[2],
        o: &kinds[3],
        dy: &kinds[4],
        lse: &kinds[5],
        sinks: None,
        segment_ids: None,
        bias: None,
    }
}

/// The typed configuration of a launch of `a` over `[1, lnc, d, sl]` inputs of `dtype`.
fn typed(a: &Args, d: usize, sl: usize, dtype: Dtype) -> RingBwdConfig {
    let dims = RingDims { batch: 1, heads: a.lnc as i64, seqlen: sl as i64, head_dim: d as i64 };
    RingBwdConfig::new(a.num_workers as i64)
        .causal(a.causal)
        .striped(a.striped)
        .mixed_precision(a.mixed_precision)
        .lnc(a.lnc as i64)
        .dims(dims)
        .dtype(dtype)
}

/// The largest SBUF peak of any program of any rank of a raw kernel launch.
fn measured_sbuf_peak(a: &Args, d: usize, sl: usize, dtype: Dtype, generation: Generation) -> nki::Result<usize> {
    let inputs = sized_inputs(a.num_workers, a.lnc, d, sl, dtype);
    let launch = Launch::new().ranks(a.num_workers).lnc(a.lnc).precision(Precision::Fp32).generation(generation);
    let report = launch.run_all(|ctx| call(&inputs[ctx.rank()], a).run(ctx))?;
    Ok(report.memory.iter().flatten().map(|m| m.sbuf_peak).max().expect("at least one program"))
}

/// The footprint the rule uses bounds the kernel's: `RingBwdConfig::sbuf_bytes`
/// (every tile the kernel holds) is at least the emulator's measured SBUF peak
/// (the bytes live at once, the largest over the programs) for one key tile
/// (S < 512) and several, one to three workers, causal, striped or neither, fp32
/// / bf16 / fp16 inputs with and without mixed precision, one to three head-dim
/// tiles, and LNC2 with a spare program.
#[test]
fn sbuf_footprint_bounds_the_measured_peak() {
    let mut cases = Vec::new();
    for (w, causal, striped, lnc, d, sl, dtype, mixed) in [
        (1, false, false, 1, 64, 128, Dtype::F32, true),
        (1, true, false, 1, 32, 256, Dtype::Bf16, true),
        (1, false, false, 1, 128, 512, Dtype::F16, false),
        (2, true, false, 1, 128, 1024, Dtype::Bf16, true),
        (2, true, true, 2, 64, 512, Dtype::F32, true),
        (3, true, false, 1, 192, 512, Dtype::Bf16, false),
        (2, false, false, 1, 256, 256, Dtype::F16, true),
        (3, true, true, 1, 384, 1536, Dtype::F32, false),
    ] {
        cases.push((Args { lnc, mixed_precision: mixed, ..Args::new(w, causal, striped) }, d, sl, dtype));
    }
    // LNC2 with one (b, h) pair: program 1 repeats pair (0, 0) as spare work.
    let spare = Args { lnc: 2, ..Args::new(2, true, false) };
    for (a, d, sl, dtype) in cases {
        let want = typed(&a, d, sl, dtype).sbuf_bytes().expect("dims and dtype are set") as usize;
        let got = measured_sbuf_peak(&a, d, sl, dtype, Generation::Trn2).unwrap_or_else(|e| panic!("{a:?} d {d} S {sl}: {e}"));
        eprintln!("{a:?} d {d} S {sl} {dtype}: footprint {want} B, measured {got} B");
        assert!(got <= want, "{a:?} d {d} S {sl} {dtype}: measured {got} B above the footprint {want} B");
    }
    let inputs: Vec<Inputs> = sized_inputs(2, 1, 64, 256, Dtype::F32);
    let launch = Launch::new().ranks(2).lnc(2).precision(Precision::Fp32);
    let report = launch.run_all(|ctx| call(&inputs[ctx.rank()], &spare).run(ctx)).unwrap();
    let want = typed(&spare, 64, 256, Dtype::F32).sbuf_bytes().expect("dims and dtype are set") as usize;
    let peaks: Vec<usize> = report.memory.iter().flatten().map(|m| m.sbuf_peak).collect();
    assert!(
        peaks.iter().all(|&p| p == peaks[0] && p <= want),
        "LNC2 with a spare program: every program holds one pair's tiles: {peaks:?}"
    );
}

/// At the boundary of the SBUF rule, per target: the longest slice
/// `max_seqlen` accepts runs through the typed API without a capacity error
/// (its measured peak within the target's SBUF); the next tiling up (+512
/// tokens) is an `Err` naming S, its bytes, the capacity, the target and the
/// limit; and the kernel forced past the rule still runs in the emulator, whose
/// SBUF beyond capacity is spilled as the compiler spills it.
/// Cases: trn2 bf16 D = 128 (the common shape, one causal worker), fp32 D = 512
/// over two workers (where the visiting buffers count), and trn3.
#[test]
fn the_longest_slice_that_fits_runs_and_the_next_is_rejected() {
    for (w, causal, d, dtype, target) in [
        (1, true, 128, Dtype::Bf16, Generation::Trn2),
        (2, false, 512, Dtype::F32, Generation::Trn2),
        (1, false, 512, Dtype::F32, Generation::Trn3),
    ] {
        let a = Args::new(w, causal, false);
        let cap = target.limits().sbuf_bytes_per_partition;
        let probe = typed(&a, d, 128, dtype).target(target);
        let max = probe.max_seqlen().expect("dims and dtype are set") as usize;
        let what = format!("{target} w {w} d {d} {dtype}: S_local <= {max}");
        eprintln!("{what}");
        let at = |sl: usize| probe.dims(RingDims { seqlen: sl as i64, ..probe.ring.dims.unwrap() });
        assert!(at(max).violation().is_none(), "{what}");

        // The typed API takes the longest slice, and it runs within the target's SBUF.
        let launch = Launch::new().ranks(w).precision(Precision::Fp32).generation(target);
        let inputs = sized_inputs(w, 1, d, max, dtype);
        let kinds = by_kind(&inputs);
        let views = typed_inputs(&kinds);
        RingBwdConfig { ring: RingFeatures { dims: None, ..probe.ring }, ..probe }
            .check(&launch, &views)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let t0 = Instant::now();
        let peak =
            measured_sbuf_peak(&a, d, max, dtype, target).unwrap_or_else(|e| panic!("{what}: the longest accepted slice fails: {e}"));
        eprintln!("{what}: ran in {:.1?}, peak {peak} B of {cap} B", t0.elapsed());
        assert!(peak <= cap, "{what}: peak {peak} B");
        assert!(peak as i64 <= at(max).sbuf_bytes().unwrap(), "{what}");

        // One tiling up: the typed API refuses it at run time...
        let next = max + 512;
        let bigger = sized_inputs(w, 1, d, next, dtype);
        let kinds = by_kind(&bigger);
        let views = typed_inputs(&kinds);
        let e = RingBwdConfig { ring: RingFeatures { dims: None, ..probe.ring }, ..probe }.launch(&launch, &views).unwrap_err();
        let bytes = at(next).sbuf_bytes().unwrap();
        assert_eq!(e.kind, ErrorKind::Argument, "{e}");
        for part in [
            format!("invalid S = {next}"),
            format!("{bytes} B"),
            format!("{cap} B of {target}"),
            format!("at most {max} tokens"),
            "SBUF".into(),
        ] {
            assert!(e.to_string().contains(&part), "{what}: the error should name `{part}`: {e}");
        }
        assert!(bytes > cap as i64, "{what}: {bytes} B");
        // ... while the kernel itself still runs: what does not fit is spilled.
        let peak = measured_sbuf_peak(&a, d, next, dtype, target).unwrap_or_else(|e| panic!("{what}: past the rule: {e}"));
        assert!(peak as i64 <= bytes, "{what}: past the rule the peak {peak} B exceeds the footprint {bytes} B");
    }
}

/// The typed API's target and dtype must match the launch and the inputs.
#[test]
fn sbuf_rule_inputs_must_match_the_launch() {
    let inputs = sized_inputs(2, 1, 64, 256, Dtype::F32);
    let kinds = by_kind(&inputs);
    let views = typed_inputs(&kinds);
    let launch = Launch::new().ranks(2).precision(Precision::Fp32);
    let e = RingBwdConfig::new(2).target(Generation::Trn3).launch(&launch, &views).unwrap_err();
    assert!(e.to_string().contains("invalid target = trn3: must equal the launch's generation trn2"), "{e}");
    let e = RingBwdConfig::new(2).dtype(Dtype::Bf16).launch(&launch, &views).unwrap_err();
    assert!(e.to_string().contains("invalid q = dtype float32: the configuration's dtype is bfloat16"), "{e}");
    assert!(RingBwdConfig::new(2).dtype(Dtype::F32).launch(&launch, &views).is_ok());
}
