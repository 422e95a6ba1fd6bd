//! `nisa.dma_compute`: sources summed element-wise in float32 into `dst` (rounded
//! once into its dtype), against a float64 reference in both precision modes;
//! the indirect (vector_offset) read-modify-write form; the documented limits.

use crate::common::*;
use nki_core::isa::{DmaComputeOpts, OobMode, dma_compute};
use nki_core::language::NlOp;
use nki_core::{Buffer, Dtype, ErrorKind, Precision};

/// Sums three bf16 / f32 sources into a bf16 dst: the f32 sum of the decoded
/// values, in list order, rounded once into dst (hardware) or kept (fp32).
#[test]
fn sums_sources_in_float32_and_rounds_once() {
    let (p, f) = (4usize, 6usize);
    let a = uniform(p * f, 1, -2.0, 2.0);
    let b = uniform(p * f, 2, -2.0, 2.0);
    let c = uniform(p * f, 3, -2.0, 2.0);
    for precision in [Precision::Hardware, Precision::Fp32] {
        let out = launch(precision)
            .run(|ctx| {
                let sa = sbuf_with(ctx, &[p as i64, f as i64], Dtype::Bf16, &a)?;
                let sb = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &b)?;
                let sc = sbuf_with(ctx, &[p as i64, f as i64], Dtype::Bf16, &c)?;
                let dst = alloc(ctx, &[p as i64, f as i64], Dtype::Bf16, Buffer::Sbuf)?;
                dma_compute(ctx, &dst, &[sa, sb, sc], NlOp::Add, DmaComputeOpts { scales: Some(&[1.0, 1.0, 1.0]), ..Default::default() })?;
                Ok(dst.to_f32_vec())
            })
            .unwrap();
        // The bf16 sources hold bf16 values (written rounded); the float32 sum in
        // list order rounds into the bf16 dst only in hardware precision.
        let (qa, qc): (Vec<f32>, Vec<f32>) = (a.iter().map(|&v| bf16(v as f32)).collect(), c.iter().map(|&v| bf16(v as f32)).collect());
        let want: Vec<f64> = (0..p * f)
            .map(|i| {
                let s = (qa[i] + b[i] as f32) + qc[i];
                f64::from(if precision == Precision::Hardware { bf16(s) } else { s })
            })
            .collect();
        assert_close(&out, &want, 0.0, 0.0);
    }
}

/// `dst.ap(vector_offset=idx)` as both the dst and a source: rows idx[r] of
/// the table get `upd[r]` added (a scatter-add); out-of-range rows are skipped
/// under oob_mode=skip and an error otherwise.
#[test]
fn indirect_rows_read_modify_write() {
    let (rows, f) = (6usize, 4usize);
    let table: Vec<f64> = (0..rows * f).map(|i| i as f64).collect();
    let upd: Vec<f64> = (0..3 * f).map(|i| 100.0 + i as f64).collect();
    let run = |offsets: [f64; 3], oob: Option<OobMode>| {
        launch(Precision::Hardware).run(|ctx| {
            let t = hbm(&[rows, f], &table, Dtype::F32);
            let idx = sbuf_with(ctx, &[3, 1], Dtype::I32, &offsets)?;
            let u = sbuf_with(ctx, &[3, f as i64], Dtype::F32, &upd)?;
            let v = t.ap_vector_offset(&[[f as i64, 3], [1, f as i64]], None, &idx, 0)?;
            dma_compute(ctx, &v, &[v.clone(), u], NlOp::Add, DmaComputeOpts { oob_mode: oob, ..Default::default() })?;
            Ok(t.to_f32_vec())
        })
    };
    let got = run([4.0, 1.0, 9.0], Some(OobMode::Skip)).unwrap();
    let mut want = table.clone();
    for (r, row) in [(0usize, 4usize), (1, 1)] {
        for j in 0..f {
            want[row * f + j] += upd[r * f + j];
        }
    }
    assert_close(&got, &want, 0.0, 0.0);
    let e = expect_err(run([4.0, 1.0, 9.0], None));
    assert_err(&e, ErrorKind::Bounds, &["nisa.dma_compute", "vector_offset 9"]);
}

#[test]
fn refuses_what_the_docs_rule_out() {
    let err = |reduce: NlOp, n: usize, opts: DmaComputeOpts<'static>, psum: bool| {
        expect_err(launch(Precision::Hardware).run(move |ctx| {
            let srcs: Vec<_> = (0..n).map(|_| alloc(ctx, &[2, 4], Dtype::F32, Buffer::Sbuf)).collect::<nki_core::Result<_>>()?;
            let dst = alloc(ctx, &[2, 4], Dtype::F32, if psum { Buffer::Psum } else { Buffer::Sbuf })?;
            dma_compute(ctx, &dst, &srcs, reduce, opts)
        }))
    };
    let none = DmaComputeOpts::default();
    assert_err(&err(NlOp::Maximum, 2, none, false), ErrorKind::Constraint, &["reduce_op must be nl.add"]);
    assert_err(&err(NlOp::Add, 17, none, false), ErrorKind::Constraint, &["17 tensors", "1 to 16"]);
    assert_err(&err(NlOp::Add, 0, none, false), ErrorKind::Constraint, &["0 tensors"]);
    let half = DmaComputeOpts { scales: Some(&[1.0, 0.5]), ..Default::default() };
    assert_err(&err(NlOp::Add, 2, half, false), ErrorKind::Constraint, &["scales must be one 1.0 per source"]);
    let dup = DmaComputeOpts { unique_indices: Some(false), ..Default::default() };
    assert_err(&err(NlOp::Add, 1, dup, false), ErrorKind::Constraint, &["unique_indices"]);
    assert_err(&err(NlOp::Add, 1, none, true), ErrorKind::Constraint, &["dst", "PSUM"]);
    let sizes = expect_err(launch(Precision::Hardware).run(|ctx| {
        let s = alloc(ctx, &[2, 3], Dtype::F32, Buffer::Sbuf)?;
        let dst = alloc(ctx, &[2, 4], Dtype::F32, Buffer::Sbuf)?;
        dma_compute(ctx, &dst, &[s], NlOp::Add, DmaComputeOpts::default())
    }));
    assert_err(&sizes, ErrorKind::Shape, &["srcs[0]", "6 elements", "8"]);
}
