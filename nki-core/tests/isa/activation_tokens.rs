//! The activation tokens beyond the basic set (tanh/sigmoid GELU approximations,
//! erf, trigonometry, softplus, mish, sign) through `nisa.activation`, against
//! float64 definitions written here, in both precision modes.

use crate::common::*;
use nki_core::isa::{self as nisa, ActivationOpts};
use nki_core::nl::{self, NlOp};
use nki_core::{Buffer, Dtype, Precision};
use std::f64::consts::PI;

/// erf by its Maclaurin series (|x| <= 3: terms peak near 1e3, leaving ~1e-12 accuracy in f64).
fn erf(x: f64) -> f64 {
    let (mut term, mut sum) = (x, x);
    for n in 1..200 {
        term *= -x * x / n as f64;
        sum += term / (2 * n + 1) as f64;
    }
    2.0 / PI.sqrt() * sum
}

fn softplus(x: f64) -> f64 {
    (1.0 + x.exp()).ln()
}

fn reference(op: NlOp, x: f64) -> f64 {
    match op {
        NlOp::GeluApprxTanh => 0.5 * x * (1.0 + ((2.0 / PI).sqrt() * (x + 0.044715 * x.powi(3))).tanh()),
        NlOp::GeluApprxSigmoid => x / (1.0 + (-1.702 * x).exp()),
        NlOp::Erf => erf(x),
        NlOp::Sin => x.sin(),
        NlOp::Cos => x.cos(),
        NlOp::Arctan => x.atan(),
        NlOp::Softplus => softplus(x),
        NlOp::Mish => x * softplus(x).tanh(),
        NlOp::Sign => x.signum() * if x == 0.0 { 0.0 } else { 1.0 },
        other => panic!("{other} has no reference here"),
    }
}

const TOKENS: [NlOp; 9] =
    [nl::gelu_apprx_tanh, nl::gelu_apprx_sigmoid, nl::erf, nl::sin, nl::cos, nl::arctan, nl::softplus, nl::mish, nl::sign];

#[test]
fn new_activation_tokens_match_their_float64_definitions() {
    let (p, f) = (16usize, 40usize);
    let mut x = f32_cells(&uniform(p * f, 9, -3.0, 3.0));
    x[0] = 0.0;
    for (precision, dtype, tol) in [(Precision::Fp32, Dtype::F32, 2e-6), (Precision::Hardware, Dtype::Bf16, 8e-3)] {
        let outs = launch(precision)
            .run(|ctx| {
                let t = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &x)?;
                let mut all = Vec::new();
                for op in TOKENS {
                    let d = alloc(ctx, &[p as i64, f as i64], dtype, Buffer::Sbuf)?;
                    nisa::activation(ctx, &d, op, &t, ActivationOpts::default())?;
                    all.push(d.to_f32_vec());
                }
                Ok(all)
            })
            .unwrap();
        for (op, got) in TOKENS.iter().zip(outs) {
            let want: Vec<f64> = x.iter().map(|&v| reference(*op, v)).collect();
            let (worst, at) = got
                .iter()
                .zip(&want)
                .map(|(g, w)| (f64::from(*g) - w).abs() / w.abs().max(1.0))
                .zip(0..)
                .fold((0.0, 0), |a, (e, i)| if e > a.0 { (e, i) } else { a });
            assert!(worst <= tol, "{op} ({precision}): error {worst:e} at x = {} (got {}, want {})", x[at], got[at], want[at]);
        }
    }
}

#[test]
fn gelu_keeps_its_float32_digits_in_the_negative_tail() {
    // gelu(-z·√2) = -z·√2 · erfc(z) / 2, with erfc from tables: there `1 + erf`
    // cancels, so only an erf accurate to float64 leaves float32 digits (down to
    // erfc near 1e-8: float64's 1 + erf holds no more).
    let erfc = [(3.0, 2.209_049_699_858_544e-5), (4.0, 1.541_725_790_028_002e-8)];
    let x: Vec<f64> = erfc.iter().map(|&(z, _)| f64::from((-z * 2f64.sqrt()) as f32)).collect();
    let got = launch(Precision::Fp32)
        .run(|ctx| {
            let t = sbuf_with(ctx, &[2, 1], Dtype::F32, &x)?;
            let d = alloc(ctx, &[2, 1], Dtype::F32, Buffer::Sbuf)?;
            nisa::activation(ctx, &d, nl::gelu, &t, ActivationOpts::default())?;
            Ok(d.to_f32_vec())
        })
        .unwrap();
    for ((&(z, erfc_z), &g), &xv) in erfc.iter().zip(&got).zip(&x) {
        // The input is -z·√2 rounded to f32: erfc moves by its slope, -2/√π · e^(-z²), per unit of z.
        let dz = -xv / 2f64.sqrt() - z;
        let want = 0.5 * xv * (erfc_z - 2.0 / PI.sqrt() * (-z * z).exp() * dz);
        assert!((f64::from(g) - want).abs() <= 1e-6 * want.abs(), "gelu({xv}) = {g}, want {want:e}");
    }
}
