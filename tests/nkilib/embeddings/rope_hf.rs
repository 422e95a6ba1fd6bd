//! The library's `rope_hf` against a float64 HuggingFace rotation written from
//! its documented semantics (`x·cos + rotate_half(x)·sin`, `rotate_half(x) =
//! [−x₂, x₁]`; backward `x·cos + [x₂, −x₁]·sin` with the halves of `sin`
//! swapped, the transposed rotation), over the library's own test
//! configurations in LNC1 and LNC2, separate and packed angles, both precision
//! modes; the emitted kernel under NumPy against the emulator; the rules.

use crate::common::attention::run_numpy_kwargs;
use crate::common::sweep::sweep;
use crate::common::{Arg, FP32_ATOL, FP32_RTOL, as_dtype, assert_close, assert_refused_by, emitted_package, seed_of, tensor, uniform};
use nki::{Dtype, Launch, Precision};
use nkilib::embeddings::rope_hf::{RopeHfRule, RopeHfShape, rope_hf, rope_hf_violation};

/// One call: sizes, dtype, direction, LNC, and how the angles are given.
#[derive(Clone, Copy, Debug)]
struct Config {
    b: usize,
    qh: usize,
    kh: usize,
    s: usize,
    d: usize,
    dtype: Dtype,
    backward: bool,
    lnc: usize,
    /// Angles as one `rope_cache` `[(b,) s', 2d]` instead of `cos`, `sin`.
    packed: bool,
    /// Angles with the batch dim (`[b, s', ·]`), else `[s', ·]` shared.
    batched: bool,
    /// Positions the angles cover (`s' >= s`).
    rope_seq: usize,
}

/// The configurations of the library's `test_rope_hf.py` (batch, q heads, k
/// heads, seq, head dim, dtype, backward), each run there in LNC1 and LNC2.
const LIBRARY_CONFIGS: [(usize, usize, usize, usize, usize, Dtype, bool); 6] = [
    (1, 32, 8, 256, 128, Dtype::Bf16, false),
    (1, 32, 8, 256, 128, Dtype::F32, false),
    (2, 16, 4, 512, 128, Dtype::Bf16, false),
    (4, 1, 1, 512, 128, Dtype::Bf16, false),
    (1, 32, 8, 512, 64, Dtype::F32, false),
    (1, 32, 8, 256, 128, Dtype::F32, true),
];

/// Every library configuration in both LNC sizes; LNC2 with the packed cache
/// `[s, 2d]` (shared over the batch) as the library's tests also run it.
fn library_calls() -> Vec<Config> {
    let mut out = vec![];
    for (b, qh, kh, s, d, dtype, backward) in LIBRARY_CONFIGS {
        let base = Config { b, qh, kh, s, d, dtype, backward, lnc: 1, packed: false, batched: true, rope_seq: s };
        out.push(base);
        out.push(Config { lnc: 2, ..base });
        out.push(Config { lnc: 2, packed: true, batched: false, ..base });
    }
    out
}

struct Inputs {
    q: Vec<f64>,
    k: Vec<f64>,
    /// `[(b,) s', d]` each.
    cos: Vec<f64>,
    sin: Vec<f64>,
}

impl Config {
    fn name(&self) -> String {
        format!("{self:?}")
    }

    fn angle_batches(&self) -> usize {
        if self.batched { self.b } else { 1 }
    }

    /// Standard-normal-like inputs (uniform, unit variance) in the dtype; the
    /// angles too, as in the library's tests (any cos and sin, not only unit pairs).
    fn inputs(&self) -> Inputs {
        let seed = seed_of(&self.name());
        let r = 3f64.sqrt();
        let n = self.angle_batches() * self.rope_seq * self.d;
        let draw = |len: usize, i: u64| as_dtype(&uniform(len, seed + i, -r, r), self.dtype);
        Inputs {
            q: draw(self.b * self.qh * self.s * self.d, 0),
            k: draw(self.b * self.kh * self.s * self.d, 1),
            cos: draw(n, 2),
            sin: draw(n, 3),
        }
    }

    /// The rotated `x` `[b, heads, s, d]`, in float64 from the documented
    /// formula; also the per-element magnitude `|x·cos| + |x'·sin|` the
    /// rounding of each term is relative to.
    fn reference(&self, x: &[f64], inp: &Inputs, heads: usize) -> (Vec<f64>, Vec<f64>) {
        let (s, d, h) = (self.s, self.d, self.d / 2);
        let (mut out, mut mag) = (vec![0.0; x.len()], vec![0.0; x.len()]);
        for bi in 0..self.b {
            let ab = if self.batched { bi } else { 0 };
            for hi in 0..heads {
                for si in 0..s {
                    let row = ((bi * heads + hi) * s + si) * d;
                    let ang = (ab * self.rope_seq + si) * d;
                    for i in 0..d {
                        // rotate_half pairs i with i ± h; backward rotates the product x·sin.
                        let (j, sign) = if i < h { (i + h, -1.0) } else { (i - h, 1.0) };
                        let (c, sn) = (inp.cos[ang + i], inp.sin[ang + if self.backward { j } else { i }]);
                        let rot = if self.backward { -sign * x[row + j] * sn } else { sign * x[row + j] * sn };
                        out[row + i] = x[row + i] * c + rot;
                        mag[row + i] = (x[row + i] * c).abs() + rot.abs();
                    }
                }
            }
        }
        (out, mag)
    }

    fn angle_shape(&self, dim: usize) -> Vec<usize> {
        if self.batched { vec![self.b, self.rope_seq, dim] } else { vec![self.rope_seq, dim] }
    }

    /// The packed cache: each angle row's cos then its sin.
    fn cache(&self, inp: &Inputs) -> Vec<f64> {
        inp.cos.chunks(self.d).zip(inp.sin.chunks(self.d)).flat_map(|(c, s)| c.iter().chain(s).copied()).collect()
    }

    /// The emulator's `(q_out, k_out)`.
    fn run(&self, inp: &Inputs, precision: Precision) -> nki::Result<(Vec<f32>, Vec<f32>)> {
        let (qs, ks) = ([self.b, self.qh, self.s, self.d], [self.b, self.kh, self.s, self.d]);
        let (q, k) = (tensor(&qs, &inp.q, self.dtype), tensor(&ks, &inp.k, self.dtype));
        let (q_out, k_out) = (tensor(&qs, &vec![0.0; inp.q.len()], self.dtype), tensor(&ks, &vec![0.0; inp.k.len()], self.dtype));
        let cache = tensor(&self.angle_shape(2 * self.d), &self.cache(inp), self.dtype);
        let (cos, sin) = (tensor(&self.angle_shape(self.d), &inp.cos, self.dtype), tensor(&self.angle_shape(self.d), &inp.sin, self.dtype));
        let mut call = rope_hf::Call::new(&q, &k, &q_out, &k_out).backward(self.backward);
        call = if self.packed { call.rope_cache(&cache) } else { call.cos(&cos).sin(&sin) };
        let (qo, ko) = call.launch(&Launch::new().lnc(self.lnc).precision(precision))?;
        Ok((qo.to_f32_vec(), ko.to_f32_vec()))
    }

    /// Runs in `precision` and checks both outputs: fp32 against the fp32
    /// metric; otherwise each element within `3u·(|x·cos| + |x'·sin|)` of the
    /// float64 value (`u` the dtype's unit roundoff: the two products, then
    /// their sum, rounded to the dtype in turn).
    fn check(&self, precision: Precision) {
        let inp = self.inputs();
        let (qo, ko) = self.run(&inp, precision).unwrap_or_else(|e| panic!("{}: {e}", self.name()));
        for (what, got, x, heads) in [("q_out", &qo, &inp.q, self.qh), ("k_out", &ko, &inp.k, self.kh)] {
            let (want, mag) = self.reference(x, &inp, heads);
            let label = format!("{} {what}", self.name());
            if precision == Precision::Fp32 {
                assert_close(&label, got, &want, FP32_ATOL, FP32_RTOL);
                continue;
            }
            let u = if self.dtype == Dtype::F32 { 2f64.powi(-24) } else { 2f64.powi(-8) };
            assert_eq!(got.len(), want.len(), "{label}");
            for (i, ((&g, &w), &m)) in got.iter().zip(&want).zip(&mag).enumerate() {
                let err = (f64::from(g) - w).abs();
                assert!(err <= 3.0 * u * m + 1e-30, "{label}: element {i}: {g} vs {w} (error {err:.3e}, bound {:.3e})", 3.0 * u * m);
            }
        }
    }

    /// The emitted kernel's positional arguments and its angle keyword arguments.
    fn numpy_args(&self, inp: &Inputs) -> (Vec<Arg>, Vec<(&'static str, Arg)>) {
        let (qs, ks) = (vec![self.b, self.qh, self.s, self.d], vec![self.b, self.kh, self.s, self.d]);
        let args = vec![
            Arg::Tensor(qs.clone(), inp.q.clone(), self.dtype),
            Arg::Tensor(ks.clone(), inp.k.clone(), self.dtype),
            Arg::Tensor(qs, vec![0.0; inp.q.len()], self.dtype),
            Arg::Tensor(ks, vec![0.0; inp.k.len()], self.dtype),
        ];
        let mut kwargs = vec![("backward", Arg::Bool(self.backward))];
        if self.packed {
            kwargs.push(("rope_cache", Arg::Tensor(self.angle_shape(2 * self.d), self.cache(inp), self.dtype)));
        } else {
            kwargs.push(("cos", Arg::Tensor(self.angle_shape(self.d), inp.cos.clone(), self.dtype)));
            kwargs.push(("sin", Arg::Tensor(self.angle_shape(self.d), inp.sin.clone(), self.dtype)));
        }
        (args, kwargs)
    }
}

/// A small call (two batches of separate angles, one program) the edge cases vary.
const SMALL: Config =
    Config { b: 2, qh: 2, kh: 1, s: 256, d: 64, dtype: Dtype::Bf16, backward: false, lnc: 1, packed: false, batched: true, rope_seq: 256 };

/// Every library call with fp32 inputs in `fp32` precision (the bf16 ones too,
/// their inputs given in fp32): the fp32 metric.
#[test]
fn library_configs_in_fp32_match_float64() {
    for cfg in library_calls() {
        Config { dtype: Dtype::F32, ..cfg }.check(Precision::Fp32);
    }
}

/// Every library call in its own dtype (bf16 or fp32) in hardware precision.
#[test]
fn library_configs_in_hardware_precision_match_float64() {
    for cfg in library_calls() {
        cfg.check(Precision::Hardware);
    }
}

/// Angles covering more positions than the sequence (the first `seq` are
/// used), a batched packed cache, a shared cos/sin pair, both directions, and
/// a sequence of more than eight tiles per program (two DMA groups).
#[test]
fn longer_angles_batched_cache_and_two_groups() {
    let base = Config { qh: 3, packed: true, rope_seq: 384, ..SMALL };
    for cfg in [
        base,
        Config { backward: true, ..base },
        Config { packed: false, batched: false, backward: true, ..base },
        Config { b: 1, qh: 2, s: 2304, rope_seq: 2304, packed: false, lnc: 2, ..base },
    ] {
        cfg.check(Precision::Hardware);
        Config { dtype: Dtype::F32, ..cfg }.check(Precision::Fp32);
    }
}

/// The emitted kernel under NumPy equals the emulator element for element:
/// separate batched angles forward (LNC1), the shared packed cache backward
/// (LNC2), in both precision modes.
#[test]
fn emitted_kernel_under_numpy_equals_emulator() {
    let base = SMALL;
    for (cfg, m) in sweep([base, Config { lnc: 2, packed: true, batched: false, backward: true, rope_seq: 320, ..base }]) {
        let (dtype, precision, mode) = m.run(Dtype::F32, Dtype::Bf16);
        let cfg = Config { dtype, ..cfg };
        let inp = cfg.inputs();
        let (qo, ko) = cfg.run(&inp, precision).unwrap();
        let (args, kwargs) = cfg.numpy_args(&inp);
        let np = run_numpy_kwargs(emitted_package(), "rope_hf", &args, &kwargs, cfg.lnc, mode);
        assert_eq!(np.len(), 2, "rope_hf returns q_out and k_out");
        assert!(np[0] == qo && np[1] == ko, "{} {mode}: NumPy and the emulator differ", cfg.name());
    }
}

/// The rules, as `const fn` and when the kernel is traced, naming the parameter.
#[test]
fn rules_refuse_by_name() {
    let ok = RopeHfShape {
        q: [1, 32, 256, 128],
        k: [1, 8, 256, 128],
        rope_ndim: 3,
        rope: [1, 256, 128],
        packed: false,
        cos_sin: true,
        sin_like_cos: true,
        programs: 2,
    };
    assert_eq!(rope_hf_violation(ok), None);
    let cases = [
        (RopeHfShape { k: [1, 8, 128, 128], ..ok }, RopeHfRule::QkMismatch),
        (RopeHfShape { q: [1, 32, 256, 7], k: [1, 8, 256, 7], ..ok }, RopeHfRule::HeadDim),
        (RopeHfShape { packed: true, ..ok }, RopeHfRule::AngleSource),
        (RopeHfShape { cos_sin: false, ..ok }, RopeHfRule::AngleSource),
        (RopeHfShape { sin_like_cos: false, ..ok }, RopeHfRule::SinShape),
        (RopeHfShape { packed: true, cos_sin: false, ..ok }, RopeHfRule::AngleDim),
        (RopeHfShape { rope: [2, 256, 128], ..ok }, RopeHfRule::AngleBatch),
        (RopeHfShape { rope: [1, 255, 128], ..ok }, RopeHfRule::AngleSeq),
        (RopeHfShape { q: [1, 32, 128, 128], k: [1, 8, 128, 128], rope: [1, 128, 128], ..ok }, RopeHfRule::SeqTiles),
    ];
    assert_refused_by(rope_hf_violation, cases);
    let c = nkilib::rope_hf_config!(q = [4, 1, 512, 128], k = [4, 1, 512, 128], rope = [512, 256], packed = true, programs = 2);
    assert_eq!((c.rope_ndim, c.rope), (2, [1, 512, 256]));

    // The library's negative test: 64 positions are less than a tile.
    let short = Config { b: 1, s: 64, dtype: Dtype::F32, rope_seq: 64, ..SMALL };
    let e = short.run(&short.inputs(), Precision::Fp32).unwrap_err();
    assert!(e.to_string().contains("q: seq = 64 must be a multiple of 128 * 1 programs"), "{e}");
    let lnc2 = Config { s: 128, rope_seq: 128, lnc: 2, ..short };
    let e = lnc2.run(&lnc2.inputs(), Precision::Fp32).unwrap_err();
    assert!(e.to_string().contains("seq = 128 must be a multiple of 128 * 2 programs"), "{e}");
    let few = Config { s: 128, rope_seq: 100, ..short };
    let e = few.run(&few.inputs(), Precision::Fp32).unwrap_err();
    assert!(e.to_string().contains("the angles cover 100 positions, fewer than seq = 128"), "{e}");
    let x = tensor(&[1, 1, 128, 64], &[0.0; 128 * 64], Dtype::F32);
    let angles = tensor(&[128, 64], &[0.0; 128 * 64], Dtype::F32);
    let cache = tensor(&[128, 128], &[0.0; 128 * 128], Dtype::F32);
    let launch = Launch::new();
    let e = rope_hf::Call::new(&x, &x, &x, &x).launch(&launch).unwrap_err();
    assert!(e.to_string().contains("give either rope_cache or both cos and sin, not both"), "{e}");
    let e = rope_hf::Call::new(&x, &x, &x, &x).cos(&angles).sin(&angles).rope_cache(&cache).launch(&launch).unwrap_err();
    assert!(e.to_string().contains("give either rope_cache or both cos and sin, not both"), "{e}");
    let e = rope_hf::Call::new(&x, &x, &x, &x).rope_cache(&angles).launch(&launch).unwrap_err();
    assert!(e.to_string().contains("the angles' last dim must be 128, got (128, 64)"), "{e}");
    let ints = nki::Tensor::from_i64(&[1, 1, 128, 64], &[1; 128 * 64], Dtype::I32).unwrap();
    let e = rope_hf::Call::new(&ints, &x, &x, &x).rope_cache(&cache).launch(&launch).unwrap_err();
    assert_eq!(e.message, "invalid q = int32: rope_hf takes q as float32, bfloat16 or float16");
}
