//! The library's `RoPE` against a float64 rotation of each pair by its angle, in
//! both layouts and precision modes, over small shapes and the library's own
//! large test configurations (chunked over batches, heads and sequence), with
//! and without LNC sharding; its emitted source under NumPy against the
//! emulator.

use crate::common::{Arg, as_dtype, assert_close, run_numpy, tensor, uniform};
use nki::{Dtype, Launch, Precision};
use nkilib::embeddings::rope::{RoPE, RopeRule, rope_violation};

mod rope_hf;

/// A RoPE problem: `x` `[d, b, h, s]` and the angles `[d/2, b, s]`.
struct Problem {
    shape: [usize; 4],
    x: Vec<f64>,
    angle: Vec<f64>,
}

impl Problem {
    fn new(shape: [usize; 4], seed: u64) -> Problem {
        let [d, b, h, s] = shape;
        Problem { shape, x: uniform(d * b * h * s, seed, -1.0, 1.0), angle: uniform(d / 2 * b * s, seed + 1, -4.0, 4.0) }
    }

    fn cos(&self) -> Vec<f64> {
        self.angle.iter().map(|a| a.cos()).collect()
    }

    fn sin(&self) -> Vec<f64> {
        self.angle.iter().map(|a| a.sin()).collect()
    }

    /// Each pair `(e, o)` rotated by its angle: `(e·cos − o·sin, o·cos + e·sin)`,
    /// from `x`, `cos`, `sin` as given (already rounded to their dtypes). The
    /// pair of element `i < d/2` is `i + d/2` (contiguous) or `(2i, 2i+1)`.
    fn reference(&self, x: &[f64], cos: &[f64], sin: &[f64], contiguous: bool) -> Vec<f64> {
        let [d, b, h, s] = self.shape;
        let at = |p: usize, bi: usize, hi: usize, si: usize| ((p * b + bi) * h + hi) * s + si;
        let mut out = vec![0.0; x.len()];
        for i in 0..d / 2 {
            let (pe, po) = if contiguous { (i, i + d / 2) } else { (2 * i, 2 * i + 1) };
            for bi in 0..b {
                for hi in 0..h {
                    for si in 0..s {
                        let (c, sn) = (cos[(i * b + bi) * s + si], sin[(i * b + bi) * s + si]);
                        let (e, o) = (x[at(pe, bi, hi, si)], x[at(po, bi, hi, si)]);
                        out[at(pe, bi, hi, si)] = e * c - o * sn;
                        out[at(po, bi, hi, si)] = o * c + e * sn;
                    }
                }
            }
        }
        out
    }

    /// The emulator's result with `x`, `cos`, `sin` in `dtype`.
    fn run(&self, dtype: Dtype, launch: &Launch, contiguous: bool, lnc_shard: bool) -> nki::Result<Vec<f32>> {
        let [d, b, _, s] = self.shape;
        let (x, c, sn) =
            (tensor(&self.shape, &self.x, dtype), tensor(&[d / 2, b, s], &self.cos(), dtype), tensor(&[d / 2, b, s], &self.sin(), dtype));
        let out = RoPE::Call::new(&x, &c, &sn).contiguous_layout(contiguous).lnc_shard(lnc_shard).launch(launch)?;
        assert_eq!((out.shape(), out.dtype()), (&self.shape[..], dtype));
        Ok(out.to_f32_vec())
    }
}

/// Smallest, typical (with LNC sharding), uneven, and one of several chunks
/// (`B·n_heads·S` = 16384 per program); d_head 64 and 128.
const SHAPES: [([usize; 4], bool); 4] =
    [([64, 1, 1, 1], false), ([128, 2, 8, 256], true), ([64, 3, 5, 40], false), ([128, 4, 8, 512], true)];

/// The library's test configurations beyond `B <= 64`, `S <= 512`,
/// `n_heads <= 16` (each `B·n_heads·S` = 65536, several chunks per program with
/// LNC sharding), with their layouts.
const LIBRARY_SHAPES: [([usize; 4], bool); 5] =
    [([128, 8192, 1, 8], true), ([64, 1, 1, 8192], true), ([128, 1, 512, 128], true), ([128, 4, 8, 1024], true), ([64, 255, 8, 6], false)];

#[test]
fn fp32_rotates_every_pair_in_both_layouts() {
    for (i, (shape, shard)) in SHAPES.into_iter().enumerate() {
        let p = Problem::new(shape, 10 + i as u64);
        for contiguous in [true, false] {
            let launch = Launch::new().precision(Precision::Fp32).lnc(if shard { 2 } else { 1 });
            let got = p.run(Dtype::F32, &launch, contiguous, shard).unwrap();
            let want =
                p.reference(&as_dtype(&p.x, Dtype::F32), &as_dtype(&p.cos(), Dtype::F32), &as_dtype(&p.sin(), Dtype::F32), contiguous);
            assert_close(&format!("RoPE fp32 {shape:?} contiguous={contiguous}"), &got, &want, 1e-6, 0.0);
        }
    }
}

#[test]
fn bf16_rounds_each_product_and_each_result() {
    for (i, (shape, shard)) in SHAPES.into_iter().enumerate() {
        let p = Problem::new(shape, 20 + i as u64);
        for contiguous in [true, false] {
            let launch = Launch::new().lnc(if shard { 2 } else { 1 });
            let got = p.run(Dtype::Bf16, &launch, contiguous, shard).unwrap();
            let want =
                p.reference(&as_dtype(&p.x, Dtype::Bf16), &as_dtype(&p.cos(), Dtype::Bf16), &as_dtype(&p.sin(), Dtype::Bf16), contiguous);
            // Two products of magnitude <= 1, each rounded to bf16 (2^-9 relative
            // half-step), then their sum or difference rounded (<= 2 in
            // magnitude): at most 2^-9 + 2^-9 + 2·2^-9.
            assert_close(&format!("RoPE bf16 {shape:?} contiguous={contiguous}"), &got, &want, 4.0 / 512.0, 0.0);
        }
    }
}

#[test]
fn the_library_test_configurations_run_in_both_precision_modes() {
    for (i, (shape, contiguous)) in LIBRARY_SHAPES.into_iter().enumerate() {
        let p = Problem::new(shape, 40 + i as u64);
        for (dtype, precision, atol) in [(Dtype::F32, Precision::Fp32, 1e-6), (Dtype::Bf16, Precision::Hardware, 4.0 / 512.0)] {
            let got = p.run(dtype, &Launch::new().precision(precision).lnc(2), contiguous, true).unwrap();
            let want = p.reference(&as_dtype(&p.x, dtype), &as_dtype(&p.cos(), dtype), &as_dtype(&p.sin(), dtype), contiguous);
            assert_close(&format!("RoPE {dtype:?} {shape:?} contiguous={contiguous}"), &got, &want, atol, 0.0);
        }
    }
}

#[test]
fn the_library_limits_are_refused_naming_the_parameter() {
    let launch = Launch::new();
    let e = Problem::new([96, 1, 1, 8], 1).run(Dtype::F32, &launch, true, false).unwrap_err();
    assert!(e.message.contains("d_head must be 64 or 128, got 96") && e.message.contains("x_in"), "{e}");
    let p = Problem::new([64, 1, 1, 3], 2);
    let e = p.run(Dtype::F32, &Launch::new().lnc(2), true, true).unwrap_err();
    assert!(e.message.contains("S = 3 must be a multiple of the 2 programs"), "{e}");
    let x = tensor(&[64, 1, 1, 8], &[0.0; 512], Dtype::F32);
    let wrong = tensor(&[32, 1, 4], &[0.0; 128], Dtype::F32);
    let e = RoPE::Call::new(&x, &wrong, &wrong).launch(&launch).unwrap_err();
    assert!(e.message.contains("cos must be [d_head/2, B, S] = [32, 1, 8], got [32, 1, 4]"), "{e}");
    // Integer tensors are refused by the declared dtypes, naming the parameter.
    let ints = nki::Tensor::from_i64(&[64, 1, 1, 8], &[1; 512], Dtype::I32).unwrap();
    let angles = tensor(&[32, 1, 8], &[0.0; 256], Dtype::F32);
    let e = RoPE::Call::new(&ints, &angles, &angles).launch(&launch).unwrap_err();
    assert_eq!(e.message, "invalid x_in = int32: RoPE takes x_in as float32, bfloat16 or float16");
    assert_eq!(RoPE::INFO.params[1].dtypes, ["float32", "bfloat16", "float16"]);
    // The same rules as `const fn`s, for compile-time checks.
    assert_eq!(rope_violation(128, 64, 16, 512, 2), None);
    assert_eq!(rope_violation(128, 8192, 512, 8192, 2), None);
    assert_eq!(rope_violation(96, 1, 1, 8, 1), Some(RopeRule::HeadDim));
    assert_eq!(rope_violation(128, 0, 1, 8, 1), Some(RopeRule::Batch));
    assert_eq!(rope_violation(128, 1, 0, 8, 1), Some(RopeRule::Heads));
    assert_eq!(rope_violation(128, 1, 1, 0, 1), Some(RopeRule::Seq));
    assert_eq!(rope_violation(128, 1, 1, 3, 2), Some(RopeRule::SeqNotDivisible));
    assert_eq!(nkilib::rope_config!(d_head = 128, batch = 2, heads = 8, seq = 256, programs = 2), (128, 2, 8, 256));
}

#[test]
fn emitted_kernel_under_numpy_matches_the_emulator() {
    // Small, and chunked: two sequence chunks (4096 + 4), then one head and one batch per chunk.
    for shape in [[64, 2, 3, 16], [64, 2, 3, 4100]] {
        numpy_matches_the_emulator(&Problem::new(shape, 30), 1, [true, false]);
    }
    // A library configuration, two batch chunks per program.
    numpy_matches_the_emulator(&Problem::new(LIBRARY_SHAPES[4].0, 31), 2, [false]);
}

fn numpy_matches_the_emulator(p: &Problem, lnc: usize, layouts: impl IntoIterator<Item = bool>) {
    let [d, b, _, s] = p.shape;
    for contiguous in layouts {
        let launch = Launch::new().precision(Precision::Fp32).lnc(lnc);
        let emu: Vec<f64> = p.run(Dtype::F32, &launch, contiguous, lnc > 1).unwrap().into_iter().map(f64::from).collect();
        let args = [
            Arg::Tensor(p.shape.to_vec(), p.x.clone(), Dtype::F32),
            Arg::Tensor(vec![d / 2, b, s], p.cos(), Dtype::F32),
            Arg::Tensor(vec![d / 2, b, s], p.sin(), Dtype::F32),
            Arg::Bool(lnc > 1),
            Arg::Bool(contiguous),
        ];
        let np = &run_numpy("RoPE", &args, lnc, "fp32")[0];
        assert_close(&format!("RoPE numpy vs emulator {:?} contiguous={contiguous}", p.shape), np, &emu, 0.0, 0.0);
    }
}
