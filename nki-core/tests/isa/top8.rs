//! `max8`, `nc_find_index8` and `nc_match_replace8` against references written
//! from their docs: the 8 largest values in descending order, the first
//! matching positions (duplicates in ascending order, all-ones when absent), and
//! replacement taking the values last to first (the docs' worked example).

use crate::common::*;
use nki_core::isa::{self as nisa, MatchReplace8Opts, NameOpts};
use nki_core::{Buffer, Dtype, ErrorKind, Precision};

/// The 8 largest of `row`, descending.
fn top8(row: &[f64]) -> Vec<f64> {
    let mut v = row.to_vec();
    v.sort_by(|a, b| b.partial_cmp(a).expect("no NaN in the inputs"));
    v.truncate(8);
    v
}

#[test]
fn max8_returns_the_eight_largest_in_descending_order_in_both_precisions() {
    let (p, f) = (32usize, 300usize);
    // Quantised values so that rows hold ties.
    let x: Vec<f64> = uniform(p * f, 3, -50.0, 50.0).iter().map(|v| v.round() / 4.0).collect();
    for (precision, dtype) in [(Precision::Fp32, Dtype::F32), (Precision::Hardware, Dtype::Bf16)] {
        let got = launch(precision)
            .run(|ctx| {
                let t = sbuf_with(ctx, &[p as i64, 3, 100], Dtype::F32, &x)?;
                let d = alloc(ctx, &[p as i64, 8], dtype, Buffer::Sbuf)?;
                nisa::max8(ctx, &d, &t, NameOpts::default())?;
                Ok(d.to_f32_vec())
            })
            .unwrap();
        // Quarter-integers below 16 in magnitude are exact in bf16.
        let want: Vec<f64> = x.chunks(f).flat_map(top8).collect();
        assert_close(&got, &want, 0.0, 0.0);
    }
}

#[test]
fn max8_of_unwritten_sbuf_reads_zeros_and_is_reported() {
    let report = launch(Precision::Fp32)
        // Warns rather than fails whatever NKI_STRICT_UNINIT the tests run under.
        .strict_uninit(false)
        .run_all(|ctx| {
            let t = alloc(ctx, &[4, 16], Dtype::F32, Buffer::Sbuf)?;
            let d = alloc(ctx, &[4, 8], Dtype::F32, Buffer::Sbuf)?;
            nisa::max8(ctx, &d, &t, NameOpts::default())?;
            Ok(d.to_f32_vec())
        })
        .unwrap();
    assert_eq!(report.results[0][0], vec![0.0; 32]);
    assert_eq!(report.undefined.len(), 1, "{:?}", report.undefined);
    assert!(report.undefined[0].starts_with("undefined behaviour: nisa.max8 reads 64 elements of "), "{:?}", report.undefined);
}

#[test]
fn find_index8_pairs_duplicates_in_order_and_marks_absent_values() {
    let data = [5.0, 1.0, 7.0, 7.0, 2.0, 7.0, 9.0, 0.0, 3.0, 3.0];
    let vals = [7.0, 3.0, 7.0, 42.0, 9.0, 5.0, 7.0, 7.0];
    // 7 occurs at 2, 3, 5: the three first 7s take them in order, the fourth finds none.
    let want = [2, 8, 3, u32::MAX as i64, 6, 0, 5, u32::MAX as i64];
    for dtype in [Dtype::U32, Dtype::U16] {
        let got = launch(Precision::Fp32)
            .run(|ctx| {
                let t = sbuf_with(ctx, &[1, 10], Dtype::F32, &data)?;
                let v = sbuf_with(ctx, &[1, 8], Dtype::F32, &vals)?;
                let d = alloc(ctx, &[1, 8], dtype, Buffer::Sbuf)?;
                nisa::nc_find_index8(ctx, &d, &t, &v, NameOpts::default())?;
                Ok(d.to_i64_vec())
            })
            .unwrap();
        let sentinel = if dtype == Dtype::U16 { 0xFFFF } else { 0xFFFF_FFFF };
        let want: Vec<i64> = want.iter().map(|&w| if w == u32::MAX as i64 { sentinel } else { w }).collect();
        assert_eq!(got, want, "{dtype}");
    }
}

#[test]
fn match_replace8_follows_the_documented_example() {
    let data = [1.0, 2.0, 3.0, 4.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0];
    let vals = [3.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0];
    let (out, idx) = launch(Precision::Fp32)
        .run(|ctx| {
            let t = sbuf_with(ctx, &[1, 11], Dtype::F32, &data)?;
            let v = sbuf_with(ctx, &[1, 8], Dtype::F32, &vals)?;
            let d = alloc(ctx, &[1, 11], Dtype::F32, Buffer::Sbuf)?;
            let i = alloc(ctx, &[1, 8], Dtype::U32, Buffer::Sbuf)?;
            nisa::nc_match_replace8(ctx, &d, &t, &v, -1.0, MatchReplace8Opts { dst_idx: Some(&i), ..Default::default() })?;
            Ok((d.to_f32_vec(), i.to_i64_vec()))
        })
        .unwrap();
    assert_eq!(idx, vec![2, 10, 9, 8, 7, 6, 5, 4]);
    assert_eq!(out, vec![1.0, 2.0, -1.0, 4.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0]);
}

#[test]
fn max8_then_match_replace8_gives_the_top_16() {
    let (p, f) = (8usize, 64usize);
    let x = f32_cells(&uniform(p * f, 5, -10.0, 10.0));
    let got = launch(Precision::Fp32)
        .run(|ctx| {
            let t = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &x)?;
            let top = alloc(ctx, &[p as i64, 16], Dtype::F32, Buffer::Sbuf)?;
            let first = top.index(&[nki_core::Idx::Full, nki_core::Idx::ds(0, 8)])?;
            let second = top.index(&[nki_core::Idx::Full, nki_core::Idx::ds(8, 8)])?;
            nisa::max8(ctx, &first, &t, NameOpts::default())?;
            let rest = alloc(ctx, &[p as i64, f as i64], Dtype::F32, Buffer::Sbuf)?;
            nisa::nc_match_replace8(ctx, &rest, &t, &first, f64::from(f32::MIN), MatchReplace8Opts::default())?;
            nisa::max8(ctx, &second, &rest, NameOpts::default())?;
            Ok(top.to_f32_vec())
        })
        .unwrap();
    let want: Vec<f64> = x
        .chunks(f)
        .flat_map(|r| {
            let mut v = r.to_vec();
            v.sort_by(|a, b| b.partial_cmp(a).unwrap());
            v.truncate(16);
            v
        })
        .collect();
    assert_close(&got, &want, 0.0, 0.0);
}

#[test]
fn top8_instructions_refuse_bad_shapes_and_index_dtypes() {
    let e = expect_err(launch(Precision::Fp32).run(|ctx| {
        let t = alloc(ctx, &[4, 7], Dtype::F32, Buffer::Sbuf)?;
        let d = alloc(ctx, &[4, 8], Dtype::F32, Buffer::Sbuf)?;
        nisa::max8(ctx, &d, &t, NameOpts::default())
    }));
    assert_err(&e, ErrorKind::Constraint, &["nisa.max8", "7 elements", "8 to 16384"]);
    let e = expect_err(launch(Precision::Fp32).run(|ctx| {
        let t = alloc(ctx, &[4, 16], Dtype::F32, Buffer::Sbuf)?;
        let d = alloc(ctx, &[4, 8], Dtype::F32, Buffer::Sbuf)?;
        nisa::nc_find_index8(ctx, &d, &t, &d, NameOpts::default())
    }));
    assert_err(&e, ErrorKind::Dtype, &["nisa.nc_find_index8", "uint32 or uint16"]);
    let e = expect_err(launch(Precision::Fp32).run(|ctx| {
        let t = alloc(ctx, &[4, 16], Dtype::F32, Buffer::Sbuf)?;
        let v = alloc(ctx, &[4, 4], Dtype::F32, Buffer::Sbuf)?;
        nisa::nc_match_replace8(ctx, &t, &t, &v, 0.0, MatchReplace8Opts::default())
    }));
    assert_err(&e, ErrorKind::Shape, &["nisa.nc_match_replace8", "vals", "4 partitions x 8 elements"]);
}
