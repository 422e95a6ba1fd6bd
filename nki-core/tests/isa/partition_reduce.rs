//! `tensor_partition_reduce` against its documented behaviour in float64: the
//! partitions of a tile folded into one with add, average or maximum.

use crate::common::*;
use nki_core::isa::{self as nisa, EngineOpts, NameOpts};
use nki_core::language::NlOp;
use nki_core::{Buffer, Dtype, ErrorKind, Precision, s};

/// Column-wise fold of a `p x f` row-major matrix in float64.
fn fold(x: &[f64], f: usize, op: &str) -> Vec<f64> {
    let p = x.len() / f;
    (0..f)
        .map(|j| {
            let col = (0..p).map(|i| x[i * f + j]);
            match op {
                "add" => col.sum(),
                "average" => col.sum::<f64>() / p as f64,
                _ => col.fold(f64::NEG_INFINITY, f64::max),
            }
        })
        .collect()
}

#[test]
fn add_average_and_maximum_fold_the_partitions_in_both_precisions() {
    let (p, f) = (24usize, 40usize);
    // Dyadic values: every partial sum is exact in f32, so only the final division
    // and the destination's rounding can differ from float64.
    let x = dyadic(p * f, 11, -8.0, 8.0, 6);
    for (op, name) in [(NlOp::Add, "add"), (NlOp::Average, "average"), (NlOp::Maximum, "maximum")] {
        for (precision, dtype) in [(Precision::Fp32, Dtype::F32), (Precision::Hardware, Dtype::Bf16)] {
            let got = launch(precision)
                .run(|ctx| {
                    let t = sbuf_with(ctx, &[p as i64, 4, 10], Dtype::F32, &x)?;
                    let d = alloc(ctx, &[1, f as i64], dtype, Buffer::Sbuf)?;
                    nisa::tensor_partition_reduce(ctx, &d, op, &t, NameOpts::default())?;
                    Ok(d.to_f32_vec())
                })
                .unwrap();
            let want: Vec<f64> = fold(&x, f, name)
                .iter()
                .map(|&v| {
                    let v32 = v as f32;
                    f64::from(if dtype == Dtype::Bf16 { bf16(v32) } else { v32 })
                })
                .collect();
            assert_close(&got, &want, 0.0, 0.0);
        }
    }
}

#[test]
fn unwritten_partitions_read_as_zero_and_are_reported() {
    let report = launch(Precision::Fp32)
        // Warns rather than fails whatever NKI_STRICT_UNINIT the tests run under.
        .strict_uninit(false)
        .run_all(|ctx| {
            let t = alloc(ctx, &[8, 4], Dtype::F32, Buffer::Sbuf)?;
            nisa::memset(ctx, &t.index(&s![0..2, ..])?, 1.0, EngineOpts::default())?;
            let d = alloc(ctx, &[1, 4], Dtype::F32, Buffer::Sbuf)?;
            nisa::tensor_partition_reduce(ctx, &d, NlOp::Add, &t, NameOpts::default())?;
            Ok(d.to_f32_vec())
        })
        .unwrap();
    assert_eq!(report.results[0][0], vec![2.0; 4]);
    assert_eq!(report.undefined.len(), 1, "{:?}", report.undefined);
    assert!(report.undefined[0].contains("reads 24 elements of 'tensor' [8, 4] float32 in SBUF"), "{:?}", report.undefined);
    assert!(report.undefined[0].contains("(the first at [2, 0])"), "{:?}", report.undefined);
}

#[test]
fn run_time_errors_name_the_operand_and_the_rule() {
    let run = |op: NlOp, dst_shape: [i64; 2], buffer: Buffer| {
        launch(Precision::Fp32).run(move |ctx| {
            let t = alloc(ctx, &[8, 4], Dtype::F32, buffer)?;
            let d = alloc(ctx, &dst_shape, Dtype::F32, Buffer::Sbuf)?;
            nisa::tensor_partition_reduce(ctx, &d, op, &t, NameOpts::default())
        })
    };
    let e = expect_err(run(NlOp::Multiply, [1, 4], Buffer::Sbuf));
    assert_err(&e, ErrorKind::Constraint, &["nisa.tensor_partition_reduce", "op=nl.multiply", "nl.average"]);
    let e = expect_err(run(NlOp::Add, [2, 4], Buffer::Sbuf));
    assert_err(&e, ErrorKind::Shape, &["dst", "must be 1 partition x 4 elements"]);
    let e = expect_err(run(NlOp::Add, [1, 4], Buffer::Psum));
    assert_err(&e, ErrorKind::Constraint, &["data", "cannot be in PSUM"]);
}
