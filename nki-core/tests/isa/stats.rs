//! `bn_stats` / `bn_aggr` against float64 statistics written from their docs:
//! per partition, (count, mean, variance*count) of the even and of the odd
//! elements, and the merged mean and population variance.

use crate::common::*;
use nki_core::isa::{self as nisa, NameOpts};
use nki_core::{Buffer, Dtype, ErrorKind, Precision};

/// `(count, mean, sum of squared deviations)` of `v` in f64.
fn moments(v: &[f64]) -> [f64; 3] {
    let n = v.len() as f64;
    if v.is_empty() {
        return [0.0, 0.0, 0.0];
    }
    let mean = v.iter().sum::<f64>() / n;
    [n, mean, v.iter().map(|x| (x - mean) * (x - mean)).sum()]
}

/// The documented six statistics of one row.
fn stats_ref(row: &[f64]) -> Vec<f64> {
    let even: Vec<f64> = row.iter().step_by(2).copied().collect();
    let odd: Vec<f64> = row.iter().skip(1).step_by(2).copied().collect();
    moments(&even).into_iter().chain(moments(&odd)).collect()
}

/// Mean and population variance of a row.
fn mean_var(row: &[f64]) -> [f64; 2] {
    let [n, mean, m2] = moments(row);
    [mean, m2 / n]
}

#[test]
fn bn_stats_summarises_even_and_odd_elements_in_both_precisions() {
    let (p, f) = (16usize, 37usize);
    // bf16 input: its values are what the engine sees, in both modes.
    let x: Vec<f64> = uniform(p * f, 7, -3.0, 5.0).iter().map(|&v| f64::from(bf16(v as f32))).collect();
    for precision in [Precision::Hardware, Precision::Fp32] {
        let got = launch(precision)
            .run(|ctx| {
                let t = sbuf_with(ctx, &[p as i64, f as i64], Dtype::Bf16, &x)?;
                let d = alloc(ctx, &[p as i64, 6], Dtype::F32, Buffer::Sbuf)?;
                nisa::bn_stats(ctx, &d, &t, NameOpts::default())?;
                Ok(d.to_f32_vec())
            })
            .unwrap();
        let want: Vec<f64> = x.chunks(f).flat_map(stats_ref).collect();
        assert_close(&got, &want, 1e-5, 1e-4);
        assert_eq!(got[0], 19.0, "{precision}: 19 even elements in a row of 37");
        assert_eq!(got[3], 18.0, "{precision}: 18 odd elements");
    }
}

#[test]
fn bn_aggr_merges_chunks_into_the_row_mean_and_variance() {
    // Rows of 1000 elements: two bn_stats chunks (512 + 488) side by side, then one bn_aggr.
    let (p, f, chunk) = (8usize, 1000usize, 512usize);
    let x = f32_cells(&uniform(p * f, 11, 2.0, 6.0));
    for (precision, dst_dtype, tol) in [(Precision::Fp32, Dtype::F32, 1e-5), (Precision::Hardware, Dtype::Bf16, 8e-3)] {
        let got = launch(precision)
            .run(|ctx| {
                let t = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &x)?;
                let stats = alloc(ctx, &[p as i64, 12], Dtype::F32, Buffer::Sbuf)?;
                for (c, lo) in (0..f).step_by(chunk).enumerate() {
                    let hi = (lo + chunk).min(f);
                    let part = t.index(&[nki_core::Idx::Full, nki_core::Idx::ds(lo as i64, (hi - lo) as i64)])?;
                    let out = stats.index(&[nki_core::Idx::Full, nki_core::Idx::ds(6 * c as i64, 6)])?;
                    nisa::bn_stats(ctx, &out, &part, NameOpts::default())?;
                }
                let mv = alloc(ctx, &[p as i64, 2], dst_dtype, Buffer::Sbuf)?;
                nisa::bn_aggr(ctx, &mv, &stats, NameOpts::default())?;
                Ok(mv.to_f32_vec())
            })
            .unwrap();
        let want: Vec<f64> = x.chunks(f).flat_map(mean_var).collect();
        assert_close(&got, &want, tol, tol);
    }
}

#[test]
fn bn_stats_and_bn_aggr_refuse_bad_shapes() {
    let e = expect_err(launch(Precision::Fp32).run(|ctx| {
        let t = alloc(ctx, &[4, 513], Dtype::F32, Buffer::Sbuf)?;
        let d = alloc(ctx, &[4, 6], Dtype::F32, Buffer::Sbuf)?;
        nisa::bn_stats(ctx, &d, &t, NameOpts::default())
    }));
    assert_err(&e, ErrorKind::Constraint, &["nisa.bn_stats", "513", "bn_stats_fmax = 512"]);
    let e = expect_err(launch(Precision::Fp32).run(|ctx| {
        let t = alloc(ctx, &[4, 8], Dtype::F32, Buffer::Sbuf)?;
        let d = alloc(ctx, &[4, 4], Dtype::F32, Buffer::Sbuf)?;
        nisa::bn_stats(ctx, &d, &t, NameOpts::default())
    }));
    assert_err(&e, ErrorKind::Shape, &["nisa.bn_stats", "4 partitions x 6 elements"]);
    let e = expect_err(launch(Precision::Fp32).run(|ctx| {
        let t = alloc(ctx, &[4, 7], Dtype::F32, Buffer::Sbuf)?;
        let d = alloc(ctx, &[4, 2], Dtype::F32, Buffer::Sbuf)?;
        nisa::bn_aggr(ctx, &d, &t, NameOpts::default())
    }));
    assert_err(&e, ErrorKind::Shape, &["nisa.bn_aggr", "7 elements", "triples"]);
}
