//! Index-driven ops: `iota`, `affine_select` (causal / sliding-window masks),
//! `range_select` (fill, fp32 reduction, generation rule) and `nc_stream_shuffle`.

use crate::common::*;
use nki_core::hw::Generation;
use nki_core::isa::{self as nisa, AffineSelectOpts, FLOAT32_MIN, IotaOpts, RangeSelectOpts, ShuffleOpts, reduce_cmd};
use nki_core::nl::{self, NlOp};
use nki_core::{Buffer, Ctx, Dtype, ErrorKind, Launch, Precision, Result, Tensor, s};

fn iota(ctx: &Ctx, dst: &Tensor, pattern: &[[i64; 2]], offset: i64, cm: i64) -> Result<()> {
    nisa::iota(ctx, dst, pattern, IotaOpts { offset: Some(offset), channel_multiplier: Some(cm), ..Default::default() })
}

#[test]
fn iota_affine_values_in_row_major_order() {
    let got = Launch::new()
        .run(|ctx| {
            let a = alloc(ctx, &[4, 2, 3], Dtype::I32, Buffer::Sbuf)?;
            iota(ctx, &a, &[[10, 2], [1, 3]], 5, 100)?;
            // Negative steps and channel multiplier, four pattern dims, fp32 dst.
            let b = alloc(ctx, &[3, 12], Dtype::F32, Buffer::Sbuf)?;
            iota(ctx, &b, &[[-1, 2], [7, 1], [3, 2], [-20, 3]], 3, -2)?;
            // The query-position idiom: g * 128 + p.
            let c = alloc(ctx, &[8, 3], Dtype::F32, Buffer::Sbuf)?;
            iota(ctx, &c, &[[128, 3]], 0, 1)?;
            // The partition index is relative to the tile.
            let d = alloc(ctx, &[8, 2], Dtype::I32, Buffer::Sbuf)?;
            nisa::memset(ctx, &d, 0.0, Default::default())?;
            iota(ctx, &d.index(&s![4..8])?, &[[1, 2]], 0, 10)?;
            // Default offset and channel multiplier are 0.
            let e = alloc(ctx, &[2, 4], Dtype::U32, Buffer::Sbuf)?;
            nisa::iota(ctx, &e, &[[2, 4]], IotaOpts::default())?;
            Ok((a.to_i64_vec(), b.to_i64_vec(), c.to_f32_vec(), d.to_i64_vec(), e.to_i64_vec()))
        })
        .unwrap();
    let want_a: Vec<i64> = (0..4).flat_map(|p| (0..2).flat_map(move |i| (0..3).map(move |j| 5 + 100 * p + 10 * i + j))).collect();
    assert_eq!(got.0, want_a);
    let mut want_b = Vec::new();
    for p in 0..3i64 {
        for i in 0..2 {
            for k in 0..2 {
                for l in 0..3 {
                    want_b.push(3 - 2 * p - i + 3 * k - 20 * l);
                }
            }
        }
    }
    assert_eq!(got.1, want_b);
    let want_c: Vec<f32> = (0..8).flat_map(|p| (0..3).map(move |g| (g * 128 + p) as f32)).collect();
    assert_eq!(got.2, want_c);
    assert_eq!(got.3, vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 10, 11, 20, 21, 30, 31]);
    assert_eq!(got.4, vec![0, 2, 4, 6, 0, 2, 4, 6]);
}

#[test]
fn iota_casts_and_rules() {
    let run = |precision: Precision| {
        launch(precision)
            .run(|ctx| {
                let b = alloc(ctx, &[1, 4], Dtype::Bf16, Buffer::Sbuf)?;
                iota(ctx, &b, &[[1, 4]], 256, 0)?;
                Ok(b.to_f32_vec())
            })
            .unwrap()
    };
    // 257 and 259 are not bf16 values: the int32 result is rounded on the write ...
    let want: Vec<f32> = (256..260).map(|v| bf16(v as f32)).collect();
    assert_bits(&run(Precision::Hardware), &want);
    // ... except in fp32 precision, where tiles keep full fp32 values.
    assert_eq!(run(Precision::Fp32), vec![256., 257., 258., 259.]);
    Launch::new()
        .run(|ctx| {
            let ps = alloc(ctx, &[2, 4], Dtype::F32, Buffer::Psum)?;
            let e = expect_err(iota(ctx, &ps, &[[1, 4]], 0, 0));
            assert_err(&e, ErrorKind::Constraint, &["nisa.iota", "must be in SBUF"]);
            let sb = alloc(ctx, &[2, 4], Dtype::F32, Buffer::Sbuf)?;
            let e = expect_err(iota(ctx, &sb, &[[1, 5]], 0, 0));
            assert_err(&e, ErrorKind::Shape, &["covers 5 elements", "4 per partition"]);
            let e = expect_err(iota(ctx, &sb, &[[1, 1], [1, 1], [1, 1], [1, 2], [1, 2]], 0, 0));
            assert_err(&e, ErrorKind::Constraint, &["5 dims", "at most 4"]);
            Ok(())
        })
        .unwrap();
}

#[test]
fn affine_select_causal_and_sliding_window_masks() {
    let (np, nf) = (8usize, 12usize);
    let scores = f32_cells(&uniform(np * nf, 1, -5.0, 5.0));
    let (q0, k0, sw) = (4i64, 2i64, 3i64);
    let got = Launch::new()
        .run(|ctx| {
            let x = sbuf_with(ctx, &[np as i64, nf as i64], Dtype::F32, &scores)?;
            let causal = alloc(ctx, &[np as i64, nf as i64], Dtype::F32, Buffer::Sbuf)?;
            let ge = AffineSelectOpts { cmp_op: Some(nl::greater_equal), offset: Some(q0 - k0), ..Default::default() };
            nisa::affine_select(ctx, &causal, &[[-1, nf as i64]], 1, &x, FLOAT32_MIN, ge)?;
            // The SWA mask, applied in place on the causal output.
            let swa = AffineSelectOpts { cmp_op: Some(nl::greater_equal), offset: Some(k0 + sw - 1 - q0), ..Default::default() };
            let both = alloc(ctx, &[np as i64, nf as i64], Dtype::Bf16, Buffer::Sbuf)?;
            nisa::tensor_copy(ctx, &both, &causal, Default::default())?;
            nisa::affine_select(ctx, &both, &[[1, nf as i64]], -1, &both, FLOAT32_MIN, swa)?;
            Ok((causal.to_f32_vec(), both.to_f32_vec()))
        })
        .unwrap();
    for p in 0..np {
        for j in 0..nf {
            let (q, k) = (q0 + p as i64, k0 + j as i64);
            let v = scores[p * nf + j] as f32;
            let c = got.0[p * nf + j];
            if k <= q {
                assert_eq!(c, v, "({p}, {j}) kept");
            } else {
                assert_eq!(f64::from(c), FLOAT32_MIN, "({p}, {j}) masked");
            }
            let b = got.1[p * nf + j];
            if k <= q && q - k < sw {
                assert_eq!(b, bf16(v), "({p}, {j}) kept");
            } else {
                // FLOAT32_MIN is -inf once rounded to bf16.
                assert_eq!(b, f32::NEG_INFINITY, "({p}, {j}) masked");
            }
        }
    }
}

#[test]
fn affine_select_comparisons_multi_dim_patterns_and_rules() {
    let x: Vec<f64> = arange(4 * 6).iter().map(|v| v + 0.5).collect();
    let cmps = [nl::equal, nl::not_equal, nl::less, nl::less_equal, nl::greater];
    let got = Launch::new()
        .run(|ctx| {
            let t = sbuf_with(ctx, &[4, 2, 3], Dtype::F32, &x)?;
            let mut out = Vec::new();
            for cmp in cmps {
                let d = alloc(ctx, &[4, 2, 3], Dtype::F32, Buffer::Sbuf)?;
                nisa::affine_select(
                    ctx,
                    &d,
                    &[[3, 2], [1, 3]],
                    -2,
                    &t,
                    -1.0,
                    AffineSelectOpts { cmp_op: Some(cmp), offset: Some(-2), ..Default::default() },
                )?;
                out.push(d.to_f32_vec());
            }
            // Default comparison is nl.equal.
            let d = alloc(ctx, &[4, 2, 3], Dtype::F32, Buffer::Sbuf)?;
            nisa::affine_select(ctx, &d, &[[3, 2], [1, 3]], -2, &t, -1.0, AffineSelectOpts { offset: Some(-2), ..Default::default() })?;
            out.push(d.to_f32_vec());

            let ps = alloc(ctx, &[4, 6], Dtype::F32, Buffer::Psum)?;
            let e = expect_err(nisa::affine_select(ctx, &ps, &[[1, 6]], 0, &t, 0.0, Default::default()));
            assert_err(&e, ErrorKind::Constraint, &["nisa.affine_select", "dst", "SBUF"]);
            let sb = alloc(ctx, &[4, 6], Dtype::F32, Buffer::Sbuf)?;
            let e = expect_err(nisa::affine_select(ctx, &sb, &[[1, 6]], 0, &ps, 0.0, Default::default()));
            assert_err(&e, ErrorKind::Constraint, &["on_true_tile", "SBUF"]);
            let e = expect_err(nisa::affine_select(
                ctx,
                &sb,
                &[[1, 6]],
                0,
                &t,
                0.0,
                AffineSelectOpts { cmp_op: Some(nl::add), ..Default::default() },
            ));
            assert_err(&e, ErrorKind::Constraint, &["cmp_op=nl.add"]);
            let e = expect_err(nisa::affine_select(ctx, &sb, &[[1, 5]], 0, &t, 0.0, Default::default()));
            assert_eq!(e.kind, ErrorKind::Shape);
            Ok(out)
        })
        .unwrap();
    let check = |cmp: NlOp, out: &[f32]| {
        for p in 0..4i64 {
            for a in 0..2i64 {
                for b in 0..3i64 {
                    let v = -2 - 2 * p + 3 * a + b;
                    let keep = match cmp {
                        NlOp::Equal => v == 0,
                        NlOp::NotEqual => v != 0,
                        NlOp::Less => v < 0,
                        NlOp::LessEqual => v <= 0,
                        _ => v > 0,
                    };
                    let i = (p * 6 + a * 3 + b) as usize;
                    assert_eq!(out[i], if keep { x[i] as f32 } else { -1.0 }, "{cmp} at {i}");
                }
            }
        }
    };
    for (cmp, out) in cmps.iter().zip(&got) {
        check(*cmp, out);
    }
    check(nl::equal, &got[5]);
}

fn rs<'a>(ctx: &Ctx, dst: &Tensor, on_true: &Tensor, b0: &Tensor, b1: &Tensor, opts: RangeSelectOpts<'a>) -> Result<()> {
    nisa::range_select(ctx, dst, on_true, nl::greater_equal, nl::less, b0, b1, opts)
}

#[test]
fn range_select_keeps_a_window_and_reduces_the_row_max() {
    let (np, nf) = (6usize, 16usize);
    let x = f32_cells(&uniform(np * nf, 3, -4.0, 4.0));
    let y = f32_cells(&uniform(np * nf, 4, -4.0, 4.0));
    let start = 100i64;
    // Window [lo, hi) per row; row 5 keeps nothing.
    let lo: Vec<f64> = vec![100.0, 103.0, 110.0, 90.0, 104.5, 200.0];
    let hi: Vec<f64> = vec![116.0, 109.0, 111.0, 105.0, 120.0, 300.0];
    let got = Launch::new()
        .run(|ctx| {
            let t = sbuf_with(ctx, &[np as i64, nf as i64], Dtype::F32, &x)?;
            // on_true may be a PSUM tile.
            let u = alloc(ctx, &[np as i64, nf as i64], Dtype::F32, Buffer::Psum)?;
            nisa::tensor_copy(ctx, &u, &sbuf_with(ctx, &[np as i64, nf as i64], Dtype::F32, &y)?, Default::default())?;
            let b0 = sbuf_with(ctx, &[np as i64, 1], Dtype::F32, &lo)?;
            let b1 = sbuf_with(ctx, &[np as i64, 1], Dtype::F32, &hi)?;
            let d = alloc(ctx, &[np as i64, nf as i64], Dtype::F32, Buffer::Sbuf)?;
            let r = alloc(ctx, &[np as i64, 1], Dtype::F32, Buffer::Sbuf)?;
            rs(ctx, &d, &t, &b0, &b1, RangeSelectOpts { range_start: Some(start), reduce_res: Some(&r), ..Default::default() })?;
            let first = (d.to_f32_vec(), r.to_f32_vec());
            // Chain: reset_reduce without a read-out, then reduce over a second tile.
            let d2 = alloc(ctx, &[np as i64, nf as i64], Dtype::Bf16, Buffer::Sbuf)?;
            let r2 = alloc(ctx, &[np as i64, 1], Dtype::F32, Buffer::Sbuf)?;
            rs(
                ctx,
                &d2,
                &t,
                &b0,
                &b1,
                RangeSelectOpts { range_start: Some(start), reduce_cmd: Some(reduce_cmd::reset_reduce), ..Default::default() },
            )?;
            rs(
                ctx,
                &d2,
                &u,
                &b0,
                &b1,
                RangeSelectOpts {
                    range_start: Some(start),
                    reduce_cmd: Some(reduce_cmd::reduce),
                    reduce_res: Some(&r2),
                    ..Default::default()
                },
            )?;
            Ok((first, d2.to_f32_vec(), r2.to_f32_vec()))
        })
        .unwrap();
    let keep = |p: usize, j: usize| {
        let idx = (start + j as i64) as f64;
        idx >= lo[p] && idx < hi[p]
    };
    let sel = |v: &[f64]| -> Vec<f64> { (0..np * nf).map(|i| if keep(i / nf, i % nf) { v[i] } else { FLOAT32_MIN }).collect() };
    let (sx, sy) = (sel(&x), sel(&y));
    let rowmax = |v: &[f64]| -> Vec<f64> { v.chunks(nf).map(|c| c.iter().copied().fold(f64::NEG_INFINITY, f64::max)).collect() };
    assert_close(&(got.0).0, &sx, 0.0, 0.0);
    let m1 = rowmax(&sx);
    assert_close(&(got.0).1, &m1, 0.0, 0.0);
    assert_eq!(m1[5], FLOAT32_MIN, "an all-masked row reduces to FLOAT32_MIN in fp32");
    // bf16 dst: kept values rounded, the fill is -inf; the reduction still sees fp32.
    let want_d2: Vec<f32> = sy.iter().map(|&v| bf16(v as f32)).collect();
    assert_bits(&got.1, &want_d2);
    let m2: Vec<f64> = rowmax(&sy).iter().zip(&m1).map(|(a, b)| a.max(*b)).collect();
    assert_close(&got.2, &m2, 0.0, 0.0);
}

#[test]
fn range_select_reduces_pre_cast_values() {
    let v = 1.0 + 2f64.powi(-8);
    let got = Launch::new()
        .run(|ctx| {
            let t = sbuf_with(ctx, &[1, 4], Dtype::F32, &[v, 0.5, -1.0, v])?;
            let b0 = sbuf_with(ctx, &[1, 1], Dtype::F32, &[0.0])?;
            let b1 = sbuf_with(ctx, &[1, 1], Dtype::F32, &[3.0])?;
            let d = alloc(ctx, &[1, 4], Dtype::Bf16, Buffer::Sbuf)?;
            let r = alloc(ctx, &[1, 1], Dtype::F32, Buffer::Sbuf)?;
            rs(ctx, &d, &t, &b0, &b1, RangeSelectOpts { reduce_res: Some(&r), ..Default::default() })?;
            Ok((d.to_f32_vec(), r.to_f32_vec()[0]))
        })
        .unwrap();
    assert_eq!(got.0, vec![1.0, 0.5, -1.0, f32::NEG_INFINITY]);
    assert_eq!(f64::from(got.1), v);
}

#[test]
fn range_select_rules() {
    let e = expect_err(Launch::new().generation(Generation::Trn1).run(|ctx| {
        let t = sbuf_with(ctx, &[2, 4], Dtype::F32, &[0.0; 8])?;
        let b = sbuf_with(ctx, &[2, 1], Dtype::F32, &[0.0; 2])?;
        rs(ctx, &t, &t, &b, &b, Default::default())
    }));
    assert_err(&e, ErrorKind::Constraint, &["nisa.range_select", "trn1"]);
    Launch::new()
        .run(|ctx| {
            let t = sbuf_with(ctx, &[2, 4], Dtype::F32, &[0.0; 8])?;
            let b = sbuf_with(ctx, &[2, 1], Dtype::F32, &[0.0; 2])?;
            let d = alloc(ctx, &[2, 4], Dtype::F32, Buffer::Sbuf)?;
            let e = expect_err(rs(ctx, &d, &t, &b, &b, RangeSelectOpts { on_false_value: Some(0.0), ..Default::default() }));
            assert_err(&e, ErrorKind::Constraint, &["on_false_value must be FLOAT32_MIN", "got 0"]);
            // FLOAT32_MIN itself is accepted.
            rs(ctx, &d, &t, &b, &b, RangeSelectOpts { on_false_value: Some(FLOAT32_MIN), ..Default::default() })?;
            let e = expect_err(rs(ctx, &d, &t, &b, &b, RangeSelectOpts { reduce_op: Some(nl::add), ..Default::default() }));
            assert_err(&e, ErrorKind::Constraint, &["reduce_op must be nl.maximum", "nl.add"]);
            let e = expect_err(rs(ctx, &d, &t, &b, &b, RangeSelectOpts { range_start: Some(-1), ..Default::default() }));
            assert_err(&e, ErrorKind::Constraint, &["range_start -1"]);
            let e = expect_err(rs(ctx, &d, &t, &b, &b, RangeSelectOpts { range_start: Some((1 << 24) - 2), ..Default::default() }));
            assert_err(&e, ErrorKind::Constraint, &["2^24"]);
            let ints = alloc(ctx, &[2, 4], Dtype::I32, Buffer::Sbuf)?;
            let e = expect_err(rs(ctx, &ints, &ints, &b, &b, Default::default()));
            assert_err(&e, ErrorKind::Dtype, &["float tile"]);
            let e = expect_err(nisa::range_select(ctx, &d, &t, nl::add, nl::less, &b, &b, Default::default()));
            assert_err(&e, ErrorKind::Constraint, &["comp_op0=nl.add"]);
            let e = expect_err(rs(ctx, &d, &t, &t, &b, Default::default()));
            assert_err(&e, ErrorKind::Shape, &["bound0", "(2, 1) column"]);
            Ok(())
        })
        .unwrap();
}

fn shuffle(ctx: &Ctx, dst: &Tensor, src: &Tensor, mask: &[i64]) -> Result<()> {
    nisa::nc_stream_shuffle(ctx, dst, src, mask, ShuffleOpts::default())
}

#[test]
fn stream_shuffle_broadcast_idiom_across_quadrants() {
    let got = Launch::new()
        .run(|ctx| {
            let t = alloc(ctx, &[128, 3], Dtype::F32, Buffer::Sbuf)?;
            nisa::memset(ctx, &t, 0.0, Default::default())?;
            t.index(&s![0])?.fill_from_f32(&[1.5, -2.0, 7.0])?;
            for q in 0..4i64 {
                shuffle(ctx, &t.index(&s![32 * q..32 * q + 32])?, &t.index(&s![0..1])?, &[0; 32])?;
            }
            Ok(t.to_f32_vec())
        })
        .unwrap();
    assert_eq!(got, [1.5f32, -2.0, 7.0].repeat(128));
}

#[test]
fn stream_shuffle_mask_is_per_quadrant_and_255_keeps_lanes() {
    let src_vals = arange(64 * 2);
    let mut mask: Vec<i64> = (0..32).map(|i| 31 - i).collect();
    mask[3] = 255;
    mask[20] = 255;
    mask[7] = 7;
    let got = Launch::new()
        .run(|ctx| {
            let src = sbuf_with(ctx, &[64, 2], Dtype::Bf16, &src_vals)?;
            let dst = alloc(ctx, &[64, 2], Dtype::Bf16, Buffer::Psum)?;
            nisa::memset(ctx, &dst, -1.0, Default::default())?;
            shuffle(ctx, &dst, &src, &mask)?;
            Ok(dst.to_f32_vec())
        })
        .unwrap();
    for r in 0..64 {
        let m = mask[r % 32];
        let want = if m == 255 {
            [-1.0, -1.0]
        } else {
            let from = (r / 32 * 32) as i64 + m;
            [(2 * from) as f32, (2 * from + 1) as f32]
        };
        assert_eq!(got[2 * r..2 * r + 2], want, "lane {r}");
    }
}

#[test]
fn stream_shuffle_start_partition_rule_and_errors() {
    Launch::new()
        .run(|ctx| {
            let t = sbuf_with(ctx, &[128, 2], Dtype::F32, &arange(256))?;
            let u = alloc(ctx, &[128, 2], Dtype::F32, Buffer::Sbuf)?;
            let id: Vec<i64> = (0..32).collect();
            // 32 active partitions may start at any quadrant, 64 only at 0 or 64.
            shuffle(ctx, &u.index(&s![96..128])?, &t.index(&s![32..64])?, &id)?;
            assert_eq!(u.index(&s![96..128])?.to_f32_vec(), t.index(&s![32..64])?.to_f32_vec());
            shuffle(ctx, &u.index(&s![64..128])?, &t.index(&s![0..64])?, &id)?;
            let e = expect_err(shuffle(ctx, &u.index(&s![32..96])?, &t.index(&s![0..64])?, &id));
            assert_err(&e, ErrorKind::Constraint, &["nisa.nc_stream_shuffle", "dst starts at partition 32", "64 active"]);
            let e = expect_err(shuffle(ctx, &u.index(&s![0..96])?, &t.index(&s![32..128])?, &id));
            assert_err(&e, ErrorKind::Constraint, &["src starts at partition 32", "96 active"]);
            let e = expect_err(shuffle(ctx, &u, &t, &id[..31]));
            assert_err(&e, ErrorKind::Constraint, &["32 lane indices"]);
            let mut bad = id.clone();
            bad[0] = 40;
            let e = expect_err(shuffle(ctx, &u, &t, &bad));
            assert_err(&e, ErrorKind::Constraint, &["40"]);
            // A lane that reads past the end of a short source.
            let e = expect_err(shuffle(ctx, &u.index(&s![0..32])?, &t.index(&s![0..8])?, &id));
            assert_err(&e, ErrorKind::Shape, &["src lane 8"]);
            let bf = alloc(ctx, &[128, 2], Dtype::Bf16, Buffer::Sbuf)?;
            let e = expect_err(shuffle(ctx, &bf, &t, &id));
            assert_err(&e, ErrorKind::Shape, &["same dtype"]);
            let e = expect_err(shuffle(ctx, &u.index(&s![.., 0..1])?, &t, &id));
            assert_eq!(e.kind, ErrorKind::Shape);
            Ok(())
        })
        .unwrap();
}
