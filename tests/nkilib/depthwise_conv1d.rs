//! The library's experimental `depthwise_conv1d_implicit_gemm` against a
//! float64 depthwise convolution written from its documented formula, at the
//! library's test configurations (padding, strides, kernels longer than 128
//! taps, fp32 / bf16 / fp16) in both precision modes, LNC1 and LNC2; its rules;
//! its emitted source under NumPy against the emulator.

use crate::common::attention::run_numpy_kwargs;
use crate::common::{Arg, as_dtype, assert_refused_by, emitted_package, errors, seed_of, tensor, uniform};
use nki::{Dtype, Launch, Precision};
use nkilib::experimental::conv::depthwise_conv1d::{DepthwiseRule, DepthwiseShape, depthwise_conv1d_implicit_gemm, depthwise_violation};

/// One configuration of the library's test: `[batch, channels, width, kernel_size, stride_w, pad_w, dtype]`.
#[derive(Clone, Copy, Debug)]
struct Conv {
    n: usize,
    c: usize,
    w: usize,
    s: usize,
    stride: usize,
    pad: usize,
    dtype: Dtype,
}

impl Conv {
    fn q(&self) -> usize {
        (self.w + 2 * self.pad - self.s) / self.stride + 1
    }

    /// Inputs and filters uniform in [-1, 1), rounded to the dtype.
    fn inputs(&self) -> (Vec<f64>, Vec<f64>) {
        let seed = seed_of(&format!("{self:?}"));
        let x = as_dtype(&uniform(self.n * self.c * self.w, seed, -1.0, 1.0), self.dtype);
        let f = as_dtype(&uniform(self.c * self.s, seed + 1, -1.0, 1.0), self.dtype);
        (x, f)
    }

    /// `out[n, c, q] = Σ_s f[c, s] · x[n, c, q·stride + s - pad]` (zero outside) in float64.
    fn reference(&self, x: &[f64], f: &[f64]) -> Vec<f64> {
        let (q_len, mut out) = (self.q(), Vec::new());
        for n in 0..self.n {
            for c in 0..self.c {
                let row = &x[(n * self.c + c) * self.w..][..self.w];
                for q in 0..q_len {
                    let mut acc = 0.0;
                    for s in 0..self.s {
                        let i = (q * self.stride + s) as i64 - self.pad as i64;
                        if i >= 0 && (i as usize) < self.w {
                            acc += f[c * self.s + s] * row[i as usize];
                        }
                    }
                    out.push(acc);
                }
            }
        }
        out
    }

    fn run(&self, x: &[f64], f: &[f64], launch: &Launch) -> Vec<f32> {
        let img = tensor(&[self.n, self.c, 1, self.w], x, self.dtype);
        let filt = tensor(&[self.c, 1, 1, self.s], f, self.dtype);
        let (p, st) = (self.pad as i64, self.stride as i64);
        let out = depthwise_conv1d_implicit_gemm::Call::new(&img, &filt)
            .padding(((0, 0), (p, p)))
            .stride((1, st))
            .feature_group_count(self.c as i64)
            .launch(launch)
            .unwrap();
        assert_eq!((out.shape(), out.dtype()), (&[self.n, self.c, 1, self.q()][..], self.dtype));
        out.to_f32_vec()
    }
}

const fn conv(n: usize, c: usize, w: usize, s: usize, stride: usize, pad: usize, dtype: Dtype) -> Conv {
    Conv { n, c, w, s, stride, pad, dtype }
}

/// The library's configurations (fast and full lists), bar its 8192-channel and
/// 2048-channel ones (the same tiling over more channel tiles).
const CASES: &[Conv] = &[
    conv(1, 16, 512, 64, 1, 0, Dtype::Bf16),
    conv(1, 256, 512, 64, 1, 10, Dtype::Bf16),
    conv(1, 256, 512, 64, 2, 0, Dtype::Bf16),
    conv(1, 256, 512, 64, 2, 5, Dtype::Bf16),
    conv(1, 16, 512, 3, 1, 0, Dtype::Bf16),
    conv(1, 16, 512, 200, 1, 10, Dtype::Bf16),
    conv(1, 256, 1024, 512, 1, 0, Dtype::Bf16),
    conv(2, 256, 512, 64, 1, 5, Dtype::Bf16),
    conv(1, 2, 512, 64, 1, 0, Dtype::Bf16),
    conv(1, 256, 129, 128, 1, 0, Dtype::Bf16),
    conv(1, 256, 128, 128, 1, 1, Dtype::Bf16),
    conv(1, 256, 512, 64, 1, 0, Dtype::F32),
    conv(1, 256, 512, 128, 1, 0, Dtype::F16),
    conv(1, 16, 512, 200, 2, 10, Dtype::Bf16),
    conv(1, 256, 1024, 256, 3, 0, Dtype::Bf16),
    conv(1, 256, 4096, 256, 16, 0, Dtype::Bf16),
    conv(1, 256, 512, 64, 2, 0, Dtype::F32),
    conv(1, 512, 5000, 8, 1, 0, Dtype::Bf16),
];

#[test]
fn fp32_matches_float64_at_the_library_configurations() {
    for (i, cv) in CASES.iter().enumerate() {
        let (x, f) = cv.inputs();
        let got = cv.run(&x, &f, &Launch::new().precision(Precision::Fp32).lnc(1 + i % 2));
        let (err, _) = errors(&got, &cv.reference(&x, &f));
        // fp32 sums of S products of magnitude <= 1.
        assert!(err <= 4e-7 * cv.s as f64, "{cv:?}: max error {err:.3e}");
    }
}

#[test]
fn hardware_mode_rounds_the_fp32_sum_once_to_the_input_dtype() {
    for cv in [CASES[1], CASES[3], CASES[5], CASES[12]] {
        let (x, f) = cv.inputs();
        let got = cv.run(&x, &f, &Launch::new().precision(Precision::Hardware).lnc(2));
        let want = cv.reference(&x, &f);
        // Products of dtype values are exact in fp32; the PSUM sum is fp32 (a
        // rounding of 2^-24 per partial sum, partial sums of S terms below 1
        // growing like sqrt(S)) and is rounded once to the output dtype.
        let unit = if cv.dtype == Dtype::F16 { 2f64.powi(-11) } else { 2f64.powi(-8) };
        let sum_error = 2f64.powi(-24) * 4.0 * (cv.s as f64).powf(1.5);
        for (j, (&g, &w)) in got.iter().zip(&want).enumerate() {
            let bound = unit * w.abs() + sum_error;
            assert!((f64::from(g) - w).abs() <= bound, "{cv:?} output {j}: {g} vs {w}");
        }
    }
}

#[test]
fn the_rules_refuse_by_name() {
    let cv = conv(1, 4, 64, 3, 1, 0, Dtype::F32);
    let (x, f) = cv.inputs();
    let img = tensor(&[1, 4, 1, 64], &x, Dtype::F32);
    let filt = tensor(&[4, 1, 1, 3], &f, Dtype::F32);
    let call = || depthwise_conv1d_implicit_gemm::Call::new(&img, &filt).feature_group_count(4);
    let l = Launch::new();
    let e = call().stride((2, 1)).launch(&l).unwrap_err();
    assert!(e.message.contains("Only stride_h=1 is supported, got stride_h=2"), "{e}");
    let e = call().rhs_dilation((1, 2)).launch(&l).unwrap_err();
    assert!(e.message.contains("Only rhs_dilation=(1,1) is supported"), "{e}");
    let e = depthwise_conv1d_implicit_gemm::Call::new(&img, &filt).launch(&l).unwrap_err();
    assert!(e.message.contains("feature_group_count must equal C=4), got 1"), "{e}");
    let odd = tensor(&[1, 3, 1, 64], &x[..192], Dtype::F32);
    let e = depthwise_conv1d_implicit_gemm::Call::new(&odd, &tensor(&[3, 1, 1, 3], &f[..9], Dtype::F32))
        .feature_group_count(3)
        .launch(&Launch::new().lnc(2))
        .unwrap_err();
    assert!(e.message.contains("C = 3 must be divisible by the 2 LNC programs"), "{e}");
    let ok = DepthwiseShape {
        c: 256,
        w: 512,
        s: 64,
        pad_w: (5, 5),
        stride: (1, 2),
        rhs_dilation: (1, 1),
        lhs_dilation: (1, 1),
        feature_group_count: 256,
        batch_group_count: 1,
        programs: 2,
    };
    assert_eq!(depthwise_violation(ok), None);
    assert_refused_by(
        depthwise_violation,
        [
            (DepthwiseShape { stride: (2, 1), ..ok }, DepthwiseRule::Stride),
            (DepthwiseShape { lhs_dilation: (2, 1), ..ok }, DepthwiseRule::Dilation),
            (DepthwiseShape { batch_group_count: 2, ..ok }, DepthwiseRule::BatchGroups),
            (DepthwiseShape { feature_group_count: 1, ..ok }, DepthwiseRule::Depthwise),
            (DepthwiseShape { pad_w: (-1, 0), ..ok }, DepthwiseRule::Padding),
            (DepthwiseShape { s: 523, ..ok }, DepthwiseRule::KernelSize),
            (DepthwiseShape { c: 255, feature_group_count: 255, ..ok }, DepthwiseRule::ChannelShards),
        ],
    );
}

#[test]
fn emitted_kernel_under_numpy_matches_the_emulator() {
    // Two S tiles, padding, stride 2, a channel tile split over LNC2.
    let cv = conv(2, 6, 300, 150, 2, 7, Dtype::Bf16);
    let (x, f) = cv.inputs();
    let emu = cv.run(&x, &f, &Launch::new().precision(Precision::Hardware).lnc(2));
    let args = [Arg::Tensor(vec![2, 6, 1, 300], x, cv.dtype), Arg::Tensor(vec![6, 1, 1, 150], f, cv.dtype)];
    let pair = |a: i64, b: i64| Arg::Tuple(vec![Arg::Int(a), Arg::Int(b)]);
    let kwargs = [("padding", Arg::Tuple(vec![pair(0, 0), pair(7, 7)])), ("stride", pair(1, 2)), ("feature_group_count", Arg::Int(6))];
    let np = run_numpy_kwargs(emitted_package(), "depthwise_conv1d_implicit_gemm", &args, &kwargs, 2, "hardware");
    assert_eq!(np[0], emu, "numpy vs emulator");
}
