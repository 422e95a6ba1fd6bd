//! The library's experimental `conv1d` against a float64 1-D convolution
//! written from its documented formula, at the library's test configurations
//! (padding, strides, dilations, kernel sizes 1 to 100, bias, activations,
//! LNC C_out split, fp32 / bf16) in both precision modes; its rules; its
//! emitted source under NumPy against the emulator.

use crate::common::attention::run_numpy_kwargs;
use crate::common::{Arg, as_dtype, assert_refused_by, emitted_package, errors, seed_of, tensor, uniform};
use crate::mlp::activation;
use nki::{Dtype, Launch, Precision};
use nkilib::experimental::conv::conv1d::{ActFnType, Conv1dRule, Conv1dShape, conv1d, conv1d_violation};

/// One configuration of the library's test.
#[derive(Clone, Copy, Debug)]
struct Conv {
    b: usize,
    c_in: usize,
    c_out: usize,
    l: usize,
    k: usize,
    stride: usize,
    pad: (usize, usize),
    dilation: usize,
    bias: bool,
    act: Option<ActFnType>,
    lnc_shard: bool,
    dtype: Dtype,
}

/// The inputs of one call: `x [B, C_in, L]`, `filters [K, C_in, C_out]`, `bias [C_out]`.
struct Inputs {
    x: Vec<f64>,
    f: Vec<f64>,
    bias: Vec<f64>,
}

impl Conv {
    fn l_out(&self) -> usize {
        (self.l + self.pad.0 + self.pad.1 - self.dilation * (self.k - 1) - 1) / self.stride + 1
    }

    /// Values uniform in [-1, 1), rounded to the dtype.
    fn inputs(&self) -> Inputs {
        let seed = seed_of(&format!("{self:?}"));
        let x = as_dtype(&uniform(self.b * self.c_in * self.l, seed, -1.0, 1.0), self.dtype);
        let f = as_dtype(&uniform(self.k * self.c_in * self.c_out, seed + 1, -1.0, 1.0), self.dtype);
        let bias = as_dtype(&uniform(self.c_out, seed + 2, -1.0, 1.0), self.dtype);
        Inputs { x, f, bias }
    }

    /// `y[b, o, l] = act(bias[o] + Σ_k Σ_i f[k, i, o] · x[b, i, l·stride + k·dilation - pad_left])`
    /// (zero outside the input) in float64, before (`pre`) and after the activation.
    fn reference(&self, inp: &Inputs) -> (Vec<f64>, Vec<f64>) {
        let (l_out, mut pre) = (self.l_out(), vec![0.0; self.b * self.c_out * self.l_out()]);
        for b in 0..self.b {
            for o in 0..self.c_out {
                let row = &mut pre[(b * self.c_out + o) * l_out..][..l_out];
                for (l, y) in row.iter_mut().enumerate() {
                    let mut acc = if self.bias { inp.bias[o] } else { 0.0 };
                    for k in 0..self.k {
                        let pos = (l * self.stride + k * self.dilation) as i64 - self.pad.0 as i64;
                        if pos < 0 || pos >= self.l as i64 {
                            continue;
                        }
                        for i in 0..self.c_in {
                            acc += inp.f[(k * self.c_in + i) * self.c_out + o] * inp.x[(b * self.c_in + i) * self.l + pos as usize];
                        }
                    }
                    *y = acc;
                }
            }
        }
        let post = pre.iter().map(|&v| self.act.map_or(v, |a| activation(a, v))).collect();
        (pre, post)
    }

    fn run(&self, inp: &Inputs, launch: &Launch) -> Vec<f32> {
        let x = tensor(&[self.b, self.c_in, self.l], &inp.x, self.dtype);
        let f = tensor(&[self.k, self.c_in, self.c_out], &inp.f, self.dtype);
        let bias = tensor(&[self.c_out], &inp.bias, self.dtype);
        let mut call = conv1d::Call::new(&x, &f)
            .stride(self.stride as i64)
            .padding((self.pad.0 as i64, self.pad.1 as i64))
            .dilation(self.dilation as i64)
            .lnc_shard(self.lnc_shard);
        if self.bias {
            call = call.bias(&bias);
        }
        if let Some(a) = self.act {
            call = call.activation_fn(a);
        }
        let out = call.launch(launch).unwrap();
        assert_eq!((out.shape(), out.dtype()), (&[self.b, self.c_out, self.l_out()][..], self.dtype));
        out.to_f32_vec()
    }

    /// The launch's programs: two when the library's test splits C_out.
    fn lnc(&self) -> usize {
        if self.lnc_shard { 2 } else { 1 }
    }
}

/// A configuration: `(B, C_in, C_out, L, K)`, `(stride, padding, dilation)`, the options.
const fn conv(
    (b, c_in, c_out, l, k): (usize, usize, usize, usize, usize),
    (stride, pad, dilation): (usize, (usize, usize), usize),
    bias: bool,
    act: Option<ActFnType>,
    lnc_shard: bool,
    dtype: Dtype,
) -> Conv {
    Conv { b, c_in, c_out, l, k, stride, pad, dilation, bias, act, lnc_shard, dtype }
}

const SILU: Option<ActFnType> = Some(ActFnType::SiLU);
const GELU: Option<ActFnType> = Some(ActFnType::GELU);
const F32: Dtype = Dtype::F32;
const BF16: Dtype = Dtype::Bf16;

/// The library's configurations (its basic list and the Whisper layers,
/// the two 1280-channel layers at 320 channels: the same tiling over fewer
/// C_in and C_out tiles).
const CASES: &[Conv] = &[
    conv((1, 16, 32, 20, 3), (1, (0, 0), 1), false, None, false, F32),
    conv((1, 16, 32, 20, 3), (1, (0, 0), 1), true, SILU, false, F32),
    conv((2, 64, 128, 40, 5), (2, (2, 2), 2), true, GELU, false, F32),
    conv((1, 48, 96, 64, 3), (1, (1, 1), 1), false, None, false, F32),
    conv((1, 64, 128, 100, 5), (1, (2, 2), 1), true, GELU, false, F32),
    conv((2, 96, 192, 80, 7), (2, (3, 3), 1), false, SILU, false, F32),
    conv((1, 256, 256, 200, 3), (1, (1, 1), 1), false, None, false, F32),
    conv((1, 192, 384, 300, 5), (1, (3, 3), 1), false, SILU, false, F32),
    conv((1, 256, 256, 512, 3), (1, (1, 1), 1), true, GELU, false, F32),
    conv((1, 32, 64, 50, 1), (1, (0, 0), 1), false, None, false, F32),
    conv((1, 32, 64, 50, 8), (1, (3, 3), 1), true, GELU, false, F32),
    conv((1, 48, 64, 128, 100), (1, (1, 1), 1), true, None, false, F32),
    conv((1, 64, 128, 100, 3), (2, (1, 1), 1), false, None, false, F32),
    conv((1, 64, 128, 100, 3), (3, (1, 1), 1), false, None, false, F32),
    conv((1, 64, 128, 100, 5), (10, (2, 2), 1), true, GELU, false, F32),
    conv((1, 32, 64, 50, 3), (1, (2, 2), 2), false, None, false, F32),
    conv((1, 32, 64, 100, 3), (1, (3, 3), 3), true, GELU, false, F32),
    conv((1, 64, 128, 150, 5), (2, (4, 6), 2), false, SILU, false, F32),
    conv((1, 32, 64, 50, 3), (1, (0, 2), 1), false, None, false, F32),
    conv((1, 64, 128, 80, 5), (2, (1, 3), 1), true, GELU, false, F32),
    conv((1, 48, 96, 60, 7), (1, (2, 4), 1), false, SILU, false, F32),
    conv((2, 64, 128, 100, 3), (1, (1, 1), 1), false, None, false, F32),
    conv((8, 32, 64, 50, 3), (1, (1, 1), 1), false, SILU, false, F32),
    conv((1, 16, 32, 20, 3), (1, (0, 0), 1), false, None, true, F32),
    conv((1, 128, 256, 200, 5), (2, (2, 2), 1), true, GELU, true, F32),
    conv((2, 96, 192, 150, 7), (1, (3, 3), 1), false, SILU, true, F32),
    conv((1, 16, 32, 20, 3), (1, (0, 0), 1), false, None, false, BF16),
    conv((1, 16, 32, 20, 3), (1, (0, 0), 1), true, SILU, false, BF16),
    conv((1, 64, 128, 100, 5), (1, (2, 2), 1), true, GELU, false, BF16),
    conv((2, 80, 384, 1500, 3), (1, (1, 1), 1), true, GELU, false, F32),
    conv((1, 128, 320, 1500, 3), (1, (1, 1), 1), true, GELU, true, BF16),
    conv((2, 384, 384, 1500, 3), (2, (1, 1), 1), true, GELU, false, F32),
    conv((1, 320, 320, 1500, 3), (2, (1, 1), 1), true, GELU, true, BF16),
];

#[test]
fn fp32_matches_float64_at_the_library_configurations() {
    for cv in CASES {
        let inp = cv.inputs();
        let got = cv.run(&inp, &Launch::new().precision(Precision::Fp32).lnc(cv.lnc()));
        let (_, want) = cv.reference(&inp);
        // fp32 sums of C_in·K products of magnitude <= 1, in fp32 PSUM.
        let n = (cv.c_in * cv.k) as f64;
        let bound = 2f64.powi(-24) * 4.0 * n.powf(1.5);
        let (err, _) = errors(&got, &want);
        assert!(err <= bound, "{cv:?}: max error {err:.3e} > {bound:.3e}");
    }
}

#[test]
fn hardware_mode_rounds_the_sum_to_the_input_dtype_before_and_after_the_activation() {
    for cv in [CASES[2], CASES[17], CASES[24], CASES[27], CASES[28], CASES[30]] {
        let inp = cv.inputs();
        let got = cv.run(&inp, &Launch::new().precision(Precision::Hardware).lnc(cv.lnc()));
        let (pre, post) = cv.reference(&inp);
        // The fp32 PSUM sum, rounded once to the dtype (with a bias, before the
        // activation, whose slope is below 1.2), and the activation's result
        // rounded again.
        let unit = if cv.dtype == Dtype::Bf16 { 2f64.powi(-8) } else { 2f64.powi(-24) };
        let sum_error = 2f64.powi(-24) * 4.0 * ((cv.c_in * cv.k) as f64).powf(1.5);
        for (j, ((&g, &p), &w)) in got.iter().zip(&pre).zip(&post).enumerate() {
            let bound = unit * (1.2 * p.abs() + w.abs()) + 1.2 * sum_error + 1e-6 * w.abs();
            assert!((f64::from(g) - w).abs() <= bound, "{cv:?} output {j}: {g} vs {w}");
        }
    }
}

#[test]
fn the_rules_refuse_by_name() {
    let cv = conv((1, 4, 8, 16, 3), (1, (0, 0), 1), false, None, false, F32);
    let inp = cv.inputs();
    let x = tensor(&[1, 4, 16], &inp.x, F32);
    let f = tensor(&[3, 4, 8], &inp.f, F32);
    let l = Launch::new();
    let e = conv1d::Call::new(&x, &f).stride(0).launch(&l).unwrap_err();
    assert!(e.message.contains("Stride must be >= 1, got stride=0"), "{e}");
    let e = conv1d::Call::new(&x, &f).dilation(0).launch(&l).unwrap_err();
    assert!(e.message.contains("Dilation must be >= 1, got dilation=0"), "{e}");
    let e = conv1d::Call::new(&x, &f).padding((-1, 0)).launch(&l).unwrap_err();
    assert!(e.message.contains("Padding must be non-negative"), "{e}");
    let f3 = tensor(&[3, 3, 8], &inp.f[..72], F32);
    let e = conv1d::Call::new(&x, &f3).launch(&l).unwrap_err();
    assert!(e.message.contains("got C_in=4 vs C_in_filter=3"), "{e}");
    let e = conv1d::Call::new(&x, &f).dilation(8).launch(&l).unwrap_err();
    assert!(e.message.contains("spans 17 inputs, more than L + pad_left + pad_right = 16"), "{e}");
    let fb = tensor(&[3, 4, 8], &inp.f, Dtype::Bf16);
    let e = conv1d::Call::new(&x, &fb).launch(&l).unwrap_err();
    assert!(e.message.contains("x_in.dtype must match filters.dtype"), "{e}");
    let ok = Conv1dShape { c_in: 80, filter_c_in: 80, l: 1500, k: 3, stride: 2, padding: (1, 1), dilation: 1 };
    assert_eq!(conv1d_violation(ok), None);
    assert_refused_by(
        conv1d_violation,
        [
            (Conv1dShape { stride: 0, ..ok }, Conv1dRule::Stride),
            (Conv1dShape { dilation: 0, ..ok }, Conv1dRule::Dilation),
            (Conv1dShape { padding: (1, -1), ..ok }, Conv1dRule::Padding),
            (Conv1dShape { filter_c_in: 81, ..ok }, Conv1dRule::Channels),
            (Conv1dShape { k: 0, ..ok }, Conv1dRule::OutputLength),
            (Conv1dShape { k: 752, dilation: 2, ..ok }, Conv1dRule::OutputLength),
        ],
    );
    assert_eq!(conv1d_violation(Conv1dShape { k: 751, dilation: 2, ..ok }), None);
}

#[test]
fn emitted_kernel_under_numpy_matches_the_emulator() {
    // Two C_in tiles (the second of 44 channels: two taps per matmul), two
    // C_out tiles split over LNC2, two L_out tiles, stride, dilation, uneven
    // padding, bias and GELU, in bf16.
    let cv = conv((2, 172, 300, 1100, 5), (2, (3, 5), 2), true, GELU, true, BF16);
    let inp = cv.inputs();
    let emu = cv.run(&inp, &Launch::new().precision(Precision::Hardware).lnc(2));
    let args = [
        Arg::Tensor(vec![cv.b, cv.c_in, cv.l], inp.x, cv.dtype),
        Arg::Tensor(vec![cv.k, cv.c_in, cv.c_out], inp.f, cv.dtype),
        Arg::Tensor(vec![cv.c_out], inp.bias, cv.dtype),
    ];
    let kwargs = [
        ("stride", Arg::Int(2)),
        ("padding", Arg::Tuple(vec![Arg::Int(3), Arg::Int(5)])),
        ("dilation", Arg::Int(2)),
        ("activation_fn", Arg::Member("ActFnType", "GELU")),
        ("lnc_shard", Arg::Bool(true)),
    ];
    let np = run_numpy_kwargs(emitted_package(), "conv1d", &args, &kwargs, 2, "hardware");
    assert_eq!(np[0], emu, "numpy vs emulator");
}
