//! The library's experimental `cross_entropy_forward` and
//! `cross_entropy_backward` against float64 log-sum-exps and softmax gradients
//! written from their documented formulas, at the library's test sizes
//! (vocabularies of 32,128 and 129,280, its batch and chunk sizes) in both
//! precision modes, LNC1 and LNC2; their rules; their emitted source under
//! NumPy against the emulator.

use crate::common::attention::run_numpy_kwargs;
use crate::common::{Arg, as_dtype, assert_refused_by, emitted_package, errors, run_numpy, seed_of, tensor, uniform};
use nki::hw::Generation;
use nki::{Dtype, Launch, Precision, Tensor};
use nkilib::experimental::loss::cross_entropy::{cross_entropy_backward, cross_entropy_forward};
use nkilib::experimental::loss::validation::{CrossEntropyRule, CrossEntropyShape, cross_entropy_violation};

/// One problem: `n` positions over a vocabulary of `v`, logits in `dtype`.
struct Problem {
    n: usize,
    v: usize,
    dtype: Dtype,
    logits: Vec<f64>,
    targets: Vec<i64>,
}

impl Problem {
    /// Logits uniform in [-3, 3) rounded to `dtype`; targets spread over the
    /// vocabulary, the first and last columns included.
    fn new(n: usize, v: usize, dtype: Dtype) -> Problem {
        let name = format!("ce {n} {v} {dtype:?}");
        let logits = as_dtype(&uniform(n * v, seed_of(&name), -3.0, 3.0), dtype);
        let mut targets: Vec<i64> = uniform(n, seed_of(&name) + 1, 0.0, v as f64).iter().map(|&t| t as i64).collect();
        targets[0] = 0;
        targets[n - 1] = v as i64 - 1;
        Problem { n, v, dtype, logits, targets }
    }

    fn logits(&self) -> Tensor {
        tensor(&[self.n, self.v], &self.logits, self.dtype)
    }

    fn targets(&self) -> Tensor {
        Tensor::from_i64(&[self.n], &self.targets, Dtype::I32).unwrap()
    }

    /// `(loss, lse)` per position in float64: `lse = log Σ_j exp(x_j)`,
    /// `loss = lse - x_target`.
    fn forward_reference(&self) -> (Vec<f64>, Vec<f64>) {
        let mut loss = Vec::with_capacity(self.n);
        let mut lse = Vec::with_capacity(self.n);
        for (row, &t) in self.logits.chunks(self.v).zip(&self.targets) {
            let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let l = max + row.iter().map(|x| (x - max).exp()).sum::<f64>().ln();
            lse.push(l);
            loss.push(l - row[t as usize]);
        }
        (loss, lse)
    }

    /// `scale · (exp(x - lse) - [j == target])` in float64, from the given
    /// saved `lse`.
    fn backward_reference(&self, lse: &[f64], scale: f64) -> Vec<f64> {
        let mut g = Vec::with_capacity(self.n * self.v);
        for ((row, &t), &l) in self.logits.chunks(self.v).zip(&self.targets).zip(lse) {
            g.extend(row.iter().enumerate().map(|(j, x)| scale * ((x - l).exp() - if j == t as usize { 1.0 } else { 0.0 })));
        }
        g
    }
}

/// The forward's `(loss, lse)` from the emulator.
fn forward(p: &Problem, ppb: i64, cs: i64, launch: &Launch) -> (Vec<f32>, Vec<f32>) {
    let (loss, lse) = cross_entropy_forward::Call::new(&p.logits(), &p.targets())
        .positions_per_batch(ppb)
        .chunk_size(cs)
        .dtype(p.dtype)
        .launch(launch)
        .unwrap();
    assert_eq!((loss.shape(), lse.shape(), loss.dtype()), (&[p.n][..], &[p.n][..], p.dtype));
    (loss.to_f32_vec(), lse.to_f32_vec())
}

/// The backward's gradient from the emulator, from the saved `lse`.
fn backward(p: &Problem, lse: &[f64], reduction: &str, ppb: i64, cs: i64, inplace: bool, launch: &Launch) -> Vec<f32> {
    let g = cross_entropy_backward::Call::new(&p.logits(), &p.targets(), &tensor(&[p.n], lse, p.dtype))
        .reduction(reduction)
        .positions_per_batch(ppb)
        .chunk_size(cs)
        .dtype(p.dtype)
        .inplace(inplace)
        .launch(launch)
        .unwrap();
    assert_eq!((g.shape(), g.dtype()), (&[p.n, p.v][..], p.dtype));
    g.to_f32_vec()
}

fn launch(precision: Precision, lnc: usize) -> Launch {
    Launch::new().precision(precision).lnc(lnc)
}

/// The generation a chunk fits: the library's full-width chunks (65,535 bf16,
/// 32,128 fp32) put two operands of `chunk_size · dtype bytes` in one
/// instruction, which a trn3 partition (256 KiB) holds and a trn2 one (224 KiB,
/// the backward's documented `chunk_size × dtype_bytes × 2 ≤ 229,376`) does not.
fn generation_for(cs: i64, dtype: Dtype) -> Generation {
    if 2 * cs * dtype.size_bytes() as i64 <= 229_376 { Generation::Trn2 } else { Generation::Trn3 }
}

#[test]
fn fp32_forward_matches_float64_at_the_library_sizes() {
    // [B·T, V, PB, CS] from the library's grid: the minimal case (one position,
    // one chunk); V = 32,128 in one chunk; V = 129,280 in eight fp32 chunks with
    // a partial last one, over an uneven LNC2 split and a partial last batch. (The
    // library's fp32 chunk of 32,768 needs 4 bytes more than a trn3 partition
    // for its `x - m` instruction: two 128 KiB tiles and the max column.)
    let cases = [
        (1, 32128, Dtype::Bf16, 1, 32128, 1),
        (64, 32128, Dtype::F32, 64, 32128, 2),
        (131, 129280, Dtype::F32, 64, 16384, 2),
        (131, 129280, Dtype::F32, 128, 8192, 1),
    ];
    for (n, v, dtype, ppb, cs, lnc) in cases {
        let p = Problem::new(n, v, dtype);
        let (loss, lse) = forward(&p, ppb, cs, &launch(Precision::Fp32, lnc).generation(generation_for(cs, dtype)));
        let (want_loss, want_lse) = p.forward_reference();
        // Sums of up to 129,280 fp32 terms: a few fp32 steps of |lse| <= ~16.
        for (what, got, want) in [("loss", &loss, &want_loss), ("lse", &lse, &want_lse)] {
            let (err, _) = errors(got, want);
            assert!(err <= 2e-5, "fp32 forward {what} n={n} V={v} lnc={lnc}: max error {err:.3e}");
        }
    }
}

#[test]
fn hardware_forward_is_within_bf16_roundings_of_float64() {
    // The library's smallest V = 129,280 case (B·T = 128, PB 64, CS 65535: two
    // chunks), LNC2; and V = 32,128 in bf16 and fp32 logits.
    for (n, v, dtype, ppb, cs) in
        [(128, 129280, Dtype::Bf16, 64, 65535), (96, 32128, Dtype::Bf16, 64, 32128), (40, 32128, Dtype::F32, 16, 8192)]
    {
        let p = Problem::new(n, v, dtype);
        let (loss, lse) = forward(&p, ppb, cs, &launch(Precision::Hardware, 2).generation(generation_for(cs, dtype)));
        let (want_loss, want_lse) = p.forward_reference();
        // In bf16 every step rounds to 8 significant bits: the chunk sums and
        // `d` (relative 2^-8 per chunk), `log d`, `m + log d` and the loss
        // (2^-9 relative each, at |lse| <= 16): a few steps of 2^-9·16.
        let step = if dtype == Dtype::Bf16 { 2f64.powi(-9) } else { 2f64.powi(-24) };
        for (what, got, want) in [("loss", &loss, &want_loss), ("lse", &lse, &want_lse)] {
            for (i, (&g, &w)) in got.iter().zip(want.iter()).enumerate() {
                let bound = 4.0 * step * (want_lse[i].abs() + w.abs()) + (p.v.div_ceil(cs as usize) + 1) as f64 * 2.0 * step;
                assert!((f64::from(g) - w).abs() <= bound, "{what} {dtype:?} V={v} position {i}: {g} vs {w} (bound {bound:.3e})");
            }
        }
    }
}

#[test]
fn fp32_backward_matches_float64_softmax_gradients() {
    // The library's fp32 backward: V = 129,280 in chunks of 8192 (16, the last
    // partial), PB 128 with a partial last batch, both reductions, in place and
    // not, LNC1 and LNC2.
    let p = Problem::new(131, 129280, Dtype::F32);
    let (_, lse) = p.forward_reference();
    for (reduction, scale, inplace, lnc) in [("mean", 1.0 / 131.0, true, 2), ("sum", 1.0, false, 1)] {
        let g = backward(&p, &lse, reduction, 128, 8192, inplace, &launch(Precision::Fp32, lnc));
        let want = p.backward_reference(&lse, scale);
        let (err, _) = errors(&g, &want);
        // Each value is one exp and two fp32 roundings of at most `scale`.
        assert!(err <= 4e-7 * scale, "fp32 backward {reduction} inplace={inplace}: max error {err:.3e}");
    }
}

#[test]
fn hardware_backward_is_within_bf16_roundings_of_float64() {
    // The library's smallest V = 129,280 backward case: B·T = 128, PB 128,
    // CS 16384 (eight chunks, the last partial), mean, LNC2.
    let p = Problem::new(128, 129280, Dtype::Bf16);
    let (_, lse) = p.forward_reference();
    let lse = as_dtype(&lse, Dtype::Bf16);
    let scale = 1.0 / 128.0;
    let g = backward(&p, &lse, "mean", 128, 16384, true, &launch(Precision::Hardware, 2));
    let want = p.backward_reference(&lse, scale);
    // `x - lse` is rounded to bf16 (half a step, 2^-5 at |x - lse| < 32), so the
    // softmax is off by a factor e^(±2^-5); it and the scaled value are rounded
    // (2^-9 each); the target's `-scale` is exact and its sum rounds once more.
    for (i, (&gv, &w)) in g.iter().zip(&want).enumerate() {
        let soft = w / scale + if i % p.v == p.targets[i / p.v] as usize { 1.0 } else { 0.0 };
        let bound = scale * (soft * (2f64.powi(-5).exp() - 1.0 + 3.0 * 2f64.powi(-9)) + 2f64.powi(-8));
        assert!((f64::from(gv) - w).abs() <= bound, "bf16 backward value {i}: {gv} vs {w} (bound {bound:.3e})");
    }
}

#[test]
fn the_library_fp32_chunk_of_32768_does_not_fit_a_trn3_partition() {
    // `x - m` reads two 128 KiB tiles and the `[P, 1]` max column: 4 bytes past
    // the 256 KiB partition (the executor refuses it too).
    let p = Problem::new(1, 32768, Dtype::F32);
    let l = launch(Precision::Fp32, 1).generation(Generation::Trn3);
    let (logits, targets) = (p.logits(), p.targets());
    let e =
        cross_entropy_forward::Call::new(&logits, &targets).positions_per_batch(1).chunk_size(32768).dtype(p.dtype).launch(&l).unwrap_err();
    assert!(e.message.contains("SBUF capacity exceeded") && e.message.contains("works on 262148 B"), "{e}");
}

#[test]
fn the_rules_refuse_by_name() {
    let p = Problem::new(4, 256, Dtype::F32);
    let l = Launch::new();
    let refuse = |ppb: i64, cs: i64| {
        cross_entropy_forward::Call::new(&p.logits(), &p.targets()).positions_per_batch(ppb).chunk_size(cs).launch(&l).unwrap_err().message
    };
    assert!(refuse(4, 512).contains("chunk_size 512 must be <= vocab_size 256"), "{}", refuse(4, 512));
    assert!(refuse(129, 256).contains("positions_per_batch must be in (0, 128], got 129"), "{}", refuse(129, 256));
    let lse = tensor(&[4], &[0.0; 4], Dtype::F32);
    let e = cross_entropy_backward::Call::new(&p.logits(), &p.targets(), &lse).reduction("none").chunk_size(256).launch(&l).unwrap_err();
    assert!(e.message.contains("reduction must be one of ('mean', 'sum'), got 'none'"), "{e}");
    let short = tensor(&[3], &[0.0; 3], Dtype::F32);
    let e = cross_entropy_backward::Call::new(&p.logits(), &p.targets(), &short).chunk_size(256).launch(&l).unwrap_err();
    assert!(e.message.contains("lse_state_hbm length 3 must match logits_hbm first dim 4"), "{e}");
    // The same rules as `const fn`s.
    let ok = nkilib::cross_entropy_config!(num_positions = 8192, vocab_size = 129280, positions_per_batch = 64, chunk_size = 65535);
    assert_eq!(cross_entropy_violation(ok), None);
    let cases = [
        (CrossEntropyShape { reduction: "max", ..ok }, CrossEntropyRule::Reduction),
        (CrossEntropyShape { num_positions: 0, ..ok }, CrossEntropyRule::Positions),
        (CrossEntropyShape { chunk_size: 200000, vocab_size: 202408, ..ok }, CrossEntropyRule::ChunkLimit),
        (CrossEntropyShape { chunk_size: 129281, ..ok }, CrossEntropyRule::ChunkSize),
        (CrossEntropyShape { positions_per_batch: 0, ..ok }, CrossEntropyRule::PositionsPerBatch),
        (CrossEntropyShape { positions_per_batch: 128, dtype_bytes: 4, ..ok }, CrossEntropyRule::Allocation),
    ];
    assert_refused_by(cross_entropy_violation, cases);
}

#[test]
fn emitted_kernels_under_numpy_match_the_emulator() {
    // Partial batches and chunks, an uneven LNC2 split; hardware precision, so
    // both sides round every bf16 step.
    let p = Problem::new(37, 1000, Dtype::Bf16);
    let l = launch(Precision::Hardware, 2);
    let (loss, lse) = forward(&p, 16, 384, &l);
    let logits = Arg::Tensor(vec![p.n, p.v], p.logits.clone(), p.dtype);
    let targets = Arg::Tensor(vec![p.n], p.targets.iter().map(|&t| t as f64).collect(), Dtype::I32);
    let args = [logits.clone(), targets.clone(), Arg::Int(16), Arg::Int(384), Arg::Dtype(p.dtype)];
    let np = run_numpy("cross_entropy_forward", &args, 2, "hardware");
    assert_eq!((np[0].as_slice(), np[1].as_slice()), (loss.as_slice(), lse.as_slice()), "forward numpy vs emulator");
    let lse64: Vec<f64> = lse.iter().map(|&x| f64::from(x)).collect();
    let g = backward(&p, &lse64, "mean", 16, 384, true, &l);
    let lse_arg = Arg::Tensor(vec![p.n], lse64, p.dtype);
    // `reduction` keeps its default, "mean" (the spec passes no strings).
    let kwargs = [("positions_per_batch", Arg::Int(16)), ("chunk_size", Arg::Int(384)), ("dtype", Arg::Dtype(p.dtype))];
    let np = run_numpy_kwargs(emitted_package(), "cross_entropy_backward", &[logits, targets, lse_arg], &kwargs, 2, "hardware");
    assert_eq!(np[0], g, "backward numpy vs emulator");
}
