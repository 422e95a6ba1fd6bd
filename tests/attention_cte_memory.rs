//! The emulator's peak memory on a long sequence: `attention_cte` over
//! bs·h = 2, S = 32768, d = 128 tiles the work in 128-query groups and 8K-key
//! sections, so the process never holds an S×S matrix. The test resets the
//! kernel's peak resident set before the launch and asserts the whole process
//! (inputs included) stays under 1 GiB, then checks sampled rows against the
//! float64 reference (`max|a-b| <= 1e-5 max|ref| + 1e-6`).
//!
//! This file holds one test so the process's peak belongs to it alone.

mod common;

use common::attention::{Problem, QueryPositions, k_layout};
use common::{assert_close, status_bytes, uniform};
use nki::attention::cte::{CteConfig, CteInputs};
use nki::{Dtype, Launch, Precision, Tensor};

const GIB: u64 = 1 << 30;

#[test]
#[cfg(target_os = "linux")]
fn long_sequence_peak_memory_stays_under_one_gib() {
    let (bs, s, d) = (2usize, 32768usize, 128usize);
    let scale = 1.0 / (d as f64).sqrt();
    // q [bs, s, d] (tp_q), k [bs, d, s], v [bs, s, d]: the kernel's default layouts.
    let q = uniform(bs * s * d, 31, -1.0, 1.0);
    let k_nat = uniform(bs * s * d, 32, -1.0, 1.0);
    let v = uniform(bs * s * d, 33, -1.0, 1.0);
    let (k_shape, k_dmajor) = k_layout(&k_nat, bs, s, d, false);
    let as_f32 = |shape: &[usize], x: &[f64]| {
        let vals: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        Tensor::from_f32(shape, &vals, Dtype::F32).expect("shape matches")
    };
    let (qt, kt, vt) = (as_f32(&[bs, s, d], &q), as_f32(&k_shape, &k_dmajor), as_f32(&[bs, s, d], &v));
    drop(k_dmajor);

    std::fs::write("/proc/self/clear_refs", "5").expect("resetting the peak resident set (Linux >= 4.0)");
    let before = status_bytes("VmRSS");
    let cfg = CteConfig::new().scale(scale).causal_mask(true);
    let out = cfg
        .launch(&Launch::new().lnc(2).precision(Precision::Fp32), &CteInputs::new(&qt, &kt, &vt))
        .expect("attention_cte runs")
        .out
        .to_f32_vec();
    let peak = status_bytes("VmHWM");
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    eprintln!("peak resident set {:.0} MiB ({:.0} MiB before the launch)", mib(peak), mib(before));
    assert!(
        peak < GIB,
        "peak resident set {:.0} MiB >= 1 GiB ({:.0} MiB before the launch, inputs and reference data included)",
        mib(peak),
        mib(before)
    );

    // Rows at the start, around the 8K section boundaries and at the end of each batch.
    for b in 0..bs {
        for start in [0usize, 8190, 16383, 32760] {
            let rows = 8;
            let kb = &k_nat[b * s * d..(b + 1) * s * d];
            let vb = &v[b * s * d..(b + 1) * s * d];
            let qs = &q[(b * s + start) * d..(b * s + start + rows) * d];
            let problem = Problem {
                scale,
                positions: QueryPositions { offset: start as i64, stride: 1 },
                ..Problem::new(1, 1, rows, s, d, qs, kb, vb)
            };
            let want = problem.solve(true).out;
            let got = &out[(b * s + start) * d..(b * s + start + rows) * d];
            assert_close(&format!("batch {b} rows {start}..{}", start + rows), got, &want, 1e-6, 1e-5);
        }
    }
}
