//! The temperature softmax example (`activate2` on trn3) against float64, and
//! its emitted kernel under the NumPy executor against the emulator.

use crate::common::{Arg, as_dtype, as_f32, assert_close, emitted_package, tensor, try_run_numpy_on, uniform};
use nki::hw::Generation;
use nki::{Dtype, Launch, Precision};
use nki_examples::temperature_softmax::temperature_softmax;

fn reference(x: &[f64], m: usize, inv_temp: f64) -> Vec<f64> {
    x.chunks(m)
        .flat_map(|row| {
            let mx = row.iter().copied().fold(f64::MIN, f64::max);
            let s: f64 = row.iter().map(|v| ((v - mx) * inv_temp).exp()).sum();
            row.iter().map(move |v| ((v - mx) * inv_temp).exp() / s).collect::<Vec<_>>()
        })
        .collect()
}

fn trn3(precision: Precision) -> Launch {
    Launch::new().generation(Generation::Trn3).precision(precision)
}

#[test]
fn matches_float64_in_fp32_mode() {
    let (n, m, inv_temp) = (256, 333, 0.7);
    let x = uniform(n * m, 71, -6.0, 6.0);
    let out = temperature_softmax::Call::new(&tensor(&[n, m], &x, Dtype::F32), inv_temp).launch(&trn3(Precision::Fp32)).unwrap();
    assert_close("temperature softmax", &out.to_f32_vec(), &reference(&x, m, inv_temp), 1e-6, 1e-5);
}

#[test]
fn hardware_mode_with_bf16_output_stays_within_bf16_precision() {
    let (n, m, inv_temp) = (128, 512, 2.5);
    let x = as_dtype(&uniform(n * m, 72, -4.0, 4.0), Dtype::Bf16);
    let out = temperature_softmax::Call::new(&tensor(&[n, m], &x, Dtype::Bf16), inv_temp).launch(&trn3(Precision::Hardware)).unwrap();
    // fp32 statistics, one bf16 rounding of each probability: relative error below 2^-8.
    for (g, w) in out.to_f32_vec().iter().zip(&reference(&x, m, inv_temp)) {
        assert!((f64::from(*g) - w).abs() <= w.abs() / 256.0 + 1e-9, "got {g}, want {w}");
    }
}

#[test]
fn emitted_kernel_under_numpy_matches_the_emulator() {
    let (n, m, inv_temp) = (128, 130, 0.25);
    let x = uniform(n * m, 73, -5.0, 5.0);
    for (precision, mode) in [(Precision::Fp32, "fp32"), (Precision::Hardware, "hardware")] {
        let emu = temperature_softmax::Call::new(&tensor(&[n, m], &x, Dtype::F32), inv_temp).launch(&trn3(precision)).unwrap();
        let args = vec![Arg::Tensor(vec![n, m], x.clone(), Dtype::F32), Arg::Float(inv_temp)];
        let np = try_run_numpy_on(emitted_package(), "temperature_softmax", &[args], 1, mode, "trn3").map(as_f32).unwrap().swap_remove(0);
        // fp32 outputs; the two exp implementations may differ in the last bits.
        let emu: Vec<f64> = emu.to_f32_vec().into_iter().map(f64::from).collect();
        assert_close(&format!("numpy vs emulator ({mode})"), &np[0], &emu, 1e-9, 1e-6);
    }
}

#[test]
fn refuses_trn2_and_a_non_positive_inverse_temperature() {
    let x = tensor(&[128, 8], &[0.0; 1024], Dtype::F32);
    let e = temperature_softmax::Call::new(&x, 1.0).launch(&Launch::new()).unwrap_err();
    assert!(e.to_string().contains("trn3"), "{e}");
    let e = temperature_softmax::Call::new(&x, 0.0).launch(&trn3(Precision::Fp32)).unwrap_err();
    assert!(e.message.contains("temperature_softmax takes inv_temp > 0"), "{e}");
}
