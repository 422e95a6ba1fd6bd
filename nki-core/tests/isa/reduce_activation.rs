//! `tensor_reduce`, `tensor_scalar_reduce`, `activation` / `activation_reduce`
//! and the Vector / Scalar engine accumulator registers that `reduce_cmd` drives.

use crate::common::*;
use nki_core::hw::Generation;
use nki_core::isa::{
    self as nisa, ActivationOpts, ActivationReduceOpts, FLOAT32_MIN, Operand, RangeSelectOpts, ReduceCmd, TensorReduceOpts,
    TensorScalarReduceOpts, reduce_cmd,
};
use nki_core::nl::{self, NlOp};
use nki_core::{Buffer, Ctx, Dtype, ErrorKind, Launch, Precision, Result, Tensor, s};

fn reduce(ctx: &Ctx, dst: &Tensor, op: NlOp, data: &Tensor, axis: &[i64]) -> Result<()> {
    nisa::tensor_reduce(ctx, dst, op, data, axis, TensorReduceOpts::default())
}

fn fold(op: NlOp, xs: &[f64]) -> f64 {
    match op {
        NlOp::Add => xs.iter().sum(),
        NlOp::Multiply => xs.iter().product(),
        NlOp::Maximum => xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        NlOp::Minimum => xs.iter().copied().fold(f64::INFINITY, f64::min),
        other => panic!("{other} does not reduce"),
    }
}

#[test]
fn tensor_reduce_trailing_axes_every_op_and_negate() {
    let (p, a, b) = (6usize, 3usize, 5usize);
    let x = f32_cells(&uniform(p * a * b, 1, 0.5, 1.5));
    let got = launch(Precision::Fp32)
        .run(|ctx| {
            let data = sbuf_with(ctx, &[p as i64, a as i64, b as i64], Dtype::F32, &x)?;
            let mut out = Vec::new();
            for op in [nl::add, nl::multiply, nl::maximum, nl::minimum] {
                let last = alloc(ctx, &[p as i64, a as i64], Dtype::F32, Buffer::Sbuf)?;
                reduce(ctx, &last, op, &data, &[2])?;
                // keepdims-shaped destination, negative axis.
                let last_k = alloc(ctx, &[p as i64, a as i64, 1], Dtype::F32, Buffer::Psum)?;
                reduce(ctx, &last_k, op, &data, &[-1])?;
                let both = alloc(ctx, &[p as i64, 1], Dtype::F32, Buffer::Sbuf)?;
                nisa::tensor_reduce(ctx, &both, op, &data, &[2, 1], TensorReduceOpts { negate: Some(true), ..Default::default() })?;
                out.push((last.to_f32_vec(), last_k.to_f32_vec(), both.to_f32_vec()));
            }
            Ok(out)
        })
        .unwrap();
    for (op, (last, last_k, both)) in [nl::add, nl::multiply, nl::maximum, nl::minimum].into_iter().zip(got) {
        let w_last: Vec<f64> = x.chunks(b).map(|c| fold(op, c)).collect();
        let w_both: Vec<f64> = x.chunks(a * b).map(|c| -fold(op, c)).collect();
        assert_close(&last, &w_last, 1e-6, 0.0);
        assert_close(&last_k, &w_last, 1e-6, 0.0);
        assert_close(&both, &w_both, 1e-6, 0.0);
    }
}

#[test]
fn tensor_reduce_rounds_once_and_reads_before_writing() {
    // Sums of dyadic values are exact in fp32; only the bf16 write rounds.
    let x = dyadic(4 * 16, 2, -4.0, 4.0, 8);
    let got = on_tile(&[4, 16], &x, |ctx, data| {
        let bf = alloc(ctx, &[4, 1], Dtype::Bf16, Buffer::Sbuf)?;
        reduce(ctx, &bf, nl::add, data, &[1])?;
        // The destination overlaps the data (its first column).
        reduce(ctx, &data.index(&s![.., 0..1])?, nl::add, data, &[1])?;
        Ok((bf.to_f32_vec(), data.index(&s![.., 0])?.to_f32_vec()))
    });
    let sums: Vec<f64> = x.chunks(16).map(|c| c.iter().sum()).collect();
    assert_bits(&got.0, &sums.iter().map(|&v| bf16(v as f32)).collect::<Vec<_>>());
    assert_close(&got.1, &sums, 0.0, 0.0);
}

#[test]
fn tensor_reduce_axis_rules() {
    on_tile(&[4, 3, 5], &arange(60), |ctx, data| {
        let d = alloc(ctx, &[4, 3], Dtype::F32, Buffer::Sbuf)?;
        let e = expect_err(reduce(ctx, &d, nl::add, data, &[0]));
        assert_err(&e, ErrorKind::Constraint, &["nisa.tensor_reduce", "axis [0]", "partition dim"]);
        let e = expect_err(reduce(ctx, &d, nl::add, data, &[1]));
        assert_err(&e, ErrorKind::Constraint, &["axis [1]", "ending at dim 2"]);
        let e = expect_err(reduce(ctx, &d, nl::add, data, &[]));
        assert_eq!(e.kind, ErrorKind::Constraint);
        let e = expect_err(reduce(ctx, &d, nl::add, data, &[2, 2]));
        assert_eq!(e.kind, ErrorKind::Constraint);
        let e = expect_err(reduce(ctx, &d, nl::subtract, data, &[2]));
        assert_err(&e, ErrorKind::Constraint, &["nl.subtract cannot reduce"]);
        let e = expect_err(reduce(ctx, &d, nl::add, data, &[1, 2]));
        assert_err(&e, ErrorKind::Shape, &["4 partitions x 1 elements", "holds 4 x 3"]);
        // Reducing axis 1 of a 2-d tile is the whole row.
        let two = data.reshape(&[4, 15])?;
        let col = alloc(ctx, &[4, 1], Dtype::F32, Buffer::Sbuf)?;
        reduce(ctx, &col, nl::maximum, &two, &[1])?;
        assert_eq!(col.to_f32_vec(), vec![14., 29., 44., 59.]);
        Ok(())
    });
}

fn tsr<'a>(ctx: &Ctx, dst: &Tensor, data: &Tensor, op0: NlOp, o0: Operand<'a>, rop: NlOp, opts: TensorScalarReduceOpts<'a>) -> Result<()> {
    nisa::tensor_scalar_reduce(ctx, dst, data, op0, o0, rop, opts)
}

#[test]
fn tensor_scalar_reduce_result_and_register_chain() {
    let (p, f) = (5usize, 9usize);
    let xs: Vec<Vec<f64>> = (0..3).map(|i| f32_cells(&uniform(p * f, 10 + i, -2.0, 2.0))).collect();
    let col = f32_cells(&uniform(p, 20, 0.5, 1.5));
    let got = launch(Precision::Fp32)
        .run(|ctx| {
            let t: Vec<Tensor> = xs.iter().map(|x| sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, x)).collect::<Result<_>>()?;
            let c = sbuf_with(ctx, &[p as i64, 1], Dtype::F32, &col)?;
            let d = alloc(ctx, &[p as i64, f as i64], Dtype::F32, Buffer::Sbuf)?;
            let res = || alloc(ctx, &[p as i64, 1], Dtype::F32, Buffer::Sbuf);
            let (r0, r1, r2, r3, r4) = (res()?, res()?, res()?, res()?, res()?);
            // Default reset_reduce, with a column operand.
            tsr(
                ctx,
                &d,
                &t[0],
                nl::multiply,
                (&c).into(),
                nl::add,
                TensorScalarReduceOpts { reduce_res: Some(&r0), ..Default::default() },
            )?;
            let d0 = d.to_f32_vec();
            // Chain: reduce adds this row's sum to the registers.
            let chain = TensorScalarReduceOpts { reduce_cmd: Some(reduce_cmd::reduce), reduce_res: Some(&r1), ..Default::default() };
            tsr(ctx, &d, &t[1], nl::add, 1.0.into(), nl::add, chain)?;
            // Negated read-out; the registers themselves stay positive.
            let neg = TensorScalarReduceOpts {
                reduce_cmd: Some(reduce_cmd::reduce),
                reduce_res: Some(&r2),
                reduce_res_negate: Some(true),
                ..Default::default()
            };
            tsr(ctx, &d, &t[2], nl::multiply, 1.0.into(), nl::add, neg)?;
            let more = TensorScalarReduceOpts { reduce_cmd: Some(reduce_cmd::reduce), reduce_res: Some(&r3), ..Default::default() };
            tsr(ctx, &d, &t[2], nl::multiply, 0.0.into(), nl::add, more)?;
            // load_reduce starts from reduce_init (a column here).
            let load = TensorScalarReduceOpts {
                reduce_cmd: Some(reduce_cmd::load_reduce),
                reduce_init: Some((&c).into()),
                reduce_res: Some(&r4),
                ..Default::default()
            };
            tsr(ctx, &d, &t[0], nl::maximum, 0.0.into(), nl::maximum, load)?;
            Ok((d0, [r0, r1, r2, r3, r4].map(|r| r.to_f32_vec())))
        })
        .unwrap();
    let rows = |x: &[f64], g: &dyn Fn(usize, f64) -> f64| -> Vec<Vec<f64>> {
        x.chunks(f).enumerate().map(|(r, c)| c.iter().map(|&v| g(r, v)).collect()).collect()
    };
    let y0 = rows(&xs[0], &|r, v| v * col[r]);
    assert_close(&got.0, &y0.concat(), 1e-6, 0.0);
    let s0: Vec<f64> = y0.iter().map(|r| r.iter().sum()).collect();
    let s1: Vec<f64> = rows(&xs[1], &|_, v| v + 1.0).iter().map(|r| r.iter().sum()).collect();
    let s2: Vec<f64> = rows(&xs[2], &|_, v| v).iter().map(|r| r.iter().sum()).collect();
    let acc1: Vec<f64> = (0..p).map(|r| s0[r] + s1[r]).collect();
    let acc2: Vec<f64> = (0..p).map(|r| acc1[r] + s2[r]).collect();
    assert_close(&got.1[0], &s0, 1e-5, 1e-5);
    assert_close(&got.1[1], &acc1, 1e-5, 1e-5);
    assert_close(&got.1[2], &acc2.iter().map(|v| -v).collect::<Vec<_>>(), 1e-5, 1e-5);
    assert_close(&got.1[3], &acc2, 1e-5, 1e-5);
    let m: Vec<f64> = (0..p).map(|r| xs[0][r * f..(r + 1) * f].iter().fold(col[r], |a, &b| a.max(b.max(0.0)))).collect();
    assert_close(&got.1[4], &m, 0.0, 0.0);
}

/// An element-wise float64 reference.
type Unary = fn(f64) -> f64;

/// The docs' ALU table lists abs, square, relu, rsqrt and reciprocal as unary ALU
/// ops: tensor_scalar_reduce takes them as `op0` (operand 0) and maps each element;
/// a nonzero operand, and an activation function outside the table, are refused.
#[test]
fn tensor_scalar_reduce_takes_the_unary_alu_ops() {
    let x = [-2.0, 0.25, 4.0, -0.5, 1.0, 9.0, -3.0, 0.0];
    let run = |op: NlOp, operand: f64| {
        Launch::new().run(|ctx| {
            let t = sbuf_with(ctx, &[2, 4], Dtype::F32, &x)?;
            let d = alloc(ctx, &[2, 4], Dtype::F32, Buffer::Sbuf)?;
            let r = alloc(ctx, &[2, 1], Dtype::F32, Buffer::Sbuf)?;
            tsr(ctx, &d, &t, op, operand.into(), nl::maximum, TensorScalarReduceOpts { reduce_res: Some(&r), ..Default::default() })?;
            Ok((d.to_f32_vec(), r.to_f32_vec()))
        })
    };
    let cases: [(NlOp, Unary); 3] = [(nl::abs, f64::abs), (nl::square, |v| v * v), (nl::relu, |v| v.max(0.0))];
    for (op, f) in cases {
        let (d, r) = run(op, 0.0).unwrap();
        let want: Vec<f64> = x.iter().map(|&v| f(v)).collect();
        assert_close(&d, &want, 0.0, 0.0);
        let peaks: Vec<f64> = want.chunks(4).map(|row| row.iter().copied().fold(f64::NEG_INFINITY, f64::max)).collect();
        assert_close(&r, &peaks, 0.0, 0.0);
    }
    let e = run(nl::abs, 2.0).unwrap_err();
    assert!(e.to_string().contains("operand0 must be None or 0 when op0 is the unary op nl.abs"), "{e}");
    let e = run(nl::exp, 0.0).unwrap_err();
    assert!(e.to_string().contains("op0=nl.exp is an activation function") && e.to_string().contains("nl.abs, nl.square"), "{e}");
}

#[test]
fn tensor_scalar_reduce_uses_fp32_values_before_the_cast() {
    // Each 1 + 2^-8 rounds to 1.0 in the bf16 dst, but the fp32 sum keeps it.
    let v = 1.0 + 2f64.powi(-8);
    let got = on_tile(&[2, 16], &[v; 32], |ctx, x| {
        let d = alloc(ctx, &[2, 16], Dtype::Bf16, Buffer::Sbuf)?;
        let r = alloc(ctx, &[2, 1], Dtype::F32, Buffer::Sbuf)?;
        tsr(ctx, &d, x, nl::multiply, 1.0.into(), nl::add, TensorScalarReduceOpts { reduce_res: Some(&r), ..Default::default() })?;
        Ok((d.to_f32_vec(), r.to_f32_vec()))
    });
    assert!(got.0.iter().all(|&x| x == 1.0));
    assert_eq!(got.1, vec![(16.0 * v) as f32; 2]);
}

#[test]
fn tensor_scalar_reduce_rules() {
    on_tile(&[2, 4], &arange(8), |ctx, x| {
        let d = alloc(ctx, &[2, 4], Dtype::F32, Buffer::Sbuf)?;
        // x + 1 reduced by addition, with `opts`.
        let refused = |opts| expect_err(tsr(ctx, &d, x, nl::add, 1.0.into(), nl::add, opts));
        let e = refused(TensorScalarReduceOpts { reverse0: Some(true), ..Default::default() });
        assert_err(&e, ErrorKind::Constraint, &["nisa.tensor_scalar_reduce", "reverse0"]);
        let e = refused(TensorScalarReduceOpts { reduce_init: Some(0.0.into()), ..Default::default() });
        assert_err(&e, ErrorKind::Constraint, &["reduce_init"]);
        let e = refused(TensorScalarReduceOpts { reduce_cmd: Some(reduce_cmd::load_reduce), ..Default::default() });
        assert_err(&e, ErrorKind::Constraint, &["reduce_init"]);
        let e = expect_err(tsr(ctx, &d, x, nl::add, 1.0.into(), nl::subtract, Default::default()));
        assert_err(&e, ErrorKind::Constraint, &["cannot reduce"]);
        let wide = alloc(ctx, &[2, 2], Dtype::F32, Buffer::Sbuf)?;
        let e = refused(TensorScalarReduceOpts { reduce_res: Some(&wide), ..Default::default() });
        assert_err(&e, ErrorKind::Shape, &["reduce_res", "(2, 1) column"]);
        Ok(())
    });
}

#[test]
fn vector_registers_are_shared_with_range_select_and_relative_to_the_first_partition() {
    let x = dyadic(8 * 6, 30, -4.0, 4.0, 4);
    let got = on_tile(&[8, 6], &x, |ctx, t| {
        let d = alloc(ctx, &[8, 6], Dtype::F32, Buffer::Sbuf)?;
        let r = alloc(ctx, &[4, 1], Dtype::F32, Buffer::Sbuf)?;
        // Max over partitions 0..4, then over partitions 4..8: register i sees
        // row i of the first and row 4 + i of the second.
        tsr(ctx, &d.index(&s![0..4])?, &t.index(&s![0..4])?, nl::add, 0.0.into(), nl::maximum, Default::default())?;
        // A Scalar Engine reduction in between does not touch the Vector registers.
        let act = alloc(ctx, &[4, 6], Dtype::F32, Buffer::Sbuf)?;
        let junk = alloc(ctx, &[4, 1], Dtype::F32, Buffer::Sbuf)?;
        nisa::activation_reduce(ctx, &act, nl::copy, &t.index(&s![0..4])?, nl::add, &junk, ActivationReduceOpts::default())?;
        let lo = sbuf_with(ctx, &[4, 1], Dtype::F32, &[-1.0; 4])?;
        let hi = sbuf_with(ctx, &[4, 1], Dtype::F32, &[100.0; 4])?;
        nisa::range_select(
            ctx,
            &d.index(&s![4..8])?,
            &t.index(&s![4..8])?,
            nl::greater,
            nl::less,
            &lo,
            &hi,
            RangeSelectOpts { reduce_cmd: Some(reduce_cmd::reduce), reduce_res: Some(&r), ..Default::default() },
        )?;
        Ok(r.to_f32_vec())
    });
    let want: Vec<f64> =
        (0..4).map(|i| fold(nl::maximum, &x[i * 6..i * 6 + 6]).max(fold(nl::maximum, &x[(4 + i) * 6..(4 + i) * 6 + 6]))).collect();
    assert_close(&got, &want, 0.0, 0.0);
}

fn act<'a>(ctx: &Ctx, dst: &Tensor, op: NlOp, data: &Tensor, opts: ActivationOpts<'a>) -> Result<()> {
    nisa::activation(ctx, dst, op, data, opts)
}

/// An activation token's float64 meaning.
type Meaning1 = fn(f64) -> f64;

/// The activation tokens this file checks, each with its float64 meaning
/// written from its `nki.language` docstring.
const ACTIVATIONS: [(NlOp, Meaning1); 10] = [
    (nl::exp, f64::exp),
    (nl::log, f64::ln),
    (nl::copy, |x| x),
    (nl::sqrt, f64::sqrt),
    (nl::rsqrt, |x| x.sqrt().recip()),
    (nl::reciprocal, f64::recip),
    (nl::square, |x| x.powi(2)),
    (nl::tanh, f64::tanh),
    (nl::sigmoid, |x| (1.0 + (-x).exp()).recip()),
    (nl::silu, |x| x * (1.0 + (-x).exp()).recip()),
];

#[test]
fn activation_functions_with_scalar_and_column_scale_and_bias() {
    let (p, f) = (6usize, 20usize);
    let x = f32_cells(&uniform(p * f, 40, 0.25, 4.0));
    let sc = f32_cells(&uniform(p, 41, 0.5, 2.0));
    let bi = f32_cells(&uniform(p, 42, -1.0, 1.0));
    let got = launch(Precision::Fp32)
        .run(|ctx| {
            let data = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &x)?;
            let s_col = sbuf_with(ctx, &[p as i64, 1], Dtype::F32, &sc)?;
            let b_col = sbuf_with(ctx, &[p as i64, 1], Dtype::F32, &bi)?;
            let mut out = Vec::new();
            for (op, _) in ACTIVATIONS {
                let d1 = alloc(ctx, &[p as i64, f as i64], Dtype::F32, Buffer::Sbuf)?;
                act(ctx, &d1, op, &data, ActivationOpts { scale: Some(0.5.into()), bias: Some(0.25.into()), ..Default::default() })?;
                let d2 = alloc(ctx, &[p as i64, f as i64], Dtype::F32, Buffer::Psum)?;
                act(
                    ctx,
                    &d2,
                    op,
                    &data,
                    ActivationOpts { scale: Some((&s_col).into()), bias: Some((&b_col).into()), ..Default::default() },
                )?;
                let d3 = alloc(ctx, &[p as i64, f as i64], Dtype::F32, Buffer::Sbuf)?;
                act(ctx, &d3, op, &data, ActivationOpts::default())?;
                out.push([d1, d2, d3].map(|t| t.to_f32_vec()));
            }
            Ok(out)
        })
        .unwrap();
    for ((_, meaning), [g1, g2, g3]) in ACTIVATIONS.into_iter().zip(got) {
        let w1: Vec<f64> = x.iter().map(|&v| meaning(v * 0.5 + 0.25)).collect();
        let w2: Vec<f64> = x.iter().enumerate().map(|(i, &v)| meaning(v * sc[i / f] + bi[i / f])).collect();
        let w3: Vec<f64> = x.iter().map(|&v| meaning(v)).collect();
        // Inputs are formed in fp32, so allow a couple of fp32 roundings of the argument.
        for (g, w) in [(&g1, &w1), (&g2, &w2), (&g3, &w3)] {
            assert_close(g, w, 2e-6, 1e-6);
        }
    }
}

#[test]
fn activation_rounds_once_to_the_destination_and_negation_idiom() {
    // x * 2 + 0.5 is exact in fp32 for these dyadic x; only the bf16 write rounds.
    let x = dyadic(4 * 32, 50, -8.0, 8.0, 10);
    let got = on_tile(&[4, 32], &x, |ctx, data| {
        let d = alloc(ctx, &[4, 32], Dtype::Bf16, Buffer::Sbuf)?;
        act(ctx, &d, nl::copy, data, ActivationOpts { scale: Some(2.0.into()), bias: Some(0.5.into()), ..Default::default() })?;
        let zero = sbuf_with(ctx, &[4, 1], Dtype::F32, &[0.0; 4])?;
        let neg = alloc(ctx, &[4, 32], Dtype::F32, Buffer::Sbuf)?;
        act(ctx, &neg, nl::copy, data, ActivationOpts { scale: Some((-1.0).into()), bias: Some((&zero).into()), ..Default::default() })?;
        Ok((d.to_f32_vec(), neg.to_f32_vec()))
    });
    let want: Vec<f32> = x.iter().map(|&v| bf16((v * 2.0 + 0.5) as f32)).collect();
    assert_bits(&got.0, &want);
    assert!(x.iter().any(|&v| f64::from(bf16((v * 2.0 + 0.5) as f32)) != v * 2.0 + 0.5));
    assert_close(&got.1, &x.iter().map(|v| -v).collect::<Vec<_>>(), 0.0, 0.0);
}

#[test]
fn activation_exp_saturates_and_propagates_nan() {
    let vals = [0.0, 1.0, -1.0, 100.0, -100.0, f64::NEG_INFINITY, f64::NAN, FLOAT32_MIN];
    let got = launch(Precision::Fp32)
        .run(|ctx| {
            let data = sbuf_with(ctx, &[1, 8], Dtype::F32, &vals)?;
            let d = alloc(ctx, &[1, 8], Dtype::F32, Buffer::Sbuf)?;
            act(ctx, &d, nl::exp, &data, ActivationOpts::default())?;
            Ok(d.to_f32_vec())
        })
        .unwrap();
    assert_eq!(got[0], 1.0);
    assert!((f64::from(got[1]) - std::f64::consts::E).abs() < 1e-6);
    assert!((f64::from(got[2]) - (-1f64).exp()).abs() < 1e-7);
    assert_eq!(got[3], f32::INFINITY);
    assert_eq!(got[4], 0.0);
    assert_eq!(got[5], 0.0);
    assert!(got[6].is_nan());
    // exp(x - max) of a masked score is exactly 0.
    assert_eq!(got[7], 0.0);
}

#[test]
fn activation_reduce_cmd_semantics() {
    let (p, f) = (4usize, 8usize);
    let xs: Vec<Vec<f64>> = (0..4).map(|i| dyadic(p * f, 60 + i, -2.0, 2.0, 6)).collect();
    let got = on_tiles(&[p as i64, f as i64], &xs, |ctx, t| {
        let d = alloc(ctx, &[p as i64, f as i64], Dtype::Bf16, Buffer::Sbuf)?;
        let res = || alloc(ctx, &[p as i64, 1], Dtype::F32, Buffer::Sbuf);
        let r: Vec<Tensor> = (0..6).map(|_| res()).collect::<Result<_>>()?;
        fn with(cmd: ReduceCmd, rr: &Tensor) -> ActivationOpts<'_> {
            ActivationOpts {
                scale: Some(3.0.into()),
                reduce_op: Some(nl::add),
                reduce_cmd: Some(cmd),
                reduce_res: Some(rr),
                ..Default::default()
            }
        }
        // reset_reduce: registers = this row's sum (of the fp32 outputs).
        act(ctx, &d, nl::copy, &t[0], with(reduce_cmd::reset_reduce, &r[0]))?;
        // reduce: += this row's sum.
        act(ctx, &d, nl::copy, &t[1], with(reduce_cmd::reduce, &r[1]))?;
        // idle: registers unchanged, reduce_res reads them out.
        act(ctx, &d, nl::copy, &t[2], with(reduce_cmd::idle, &r[2]))?;
        // reset: zero, without this row.
        act(ctx, &d, nl::copy, &t[2], with(reduce_cmd::reset, &r[3]))?;
        act(ctx, &d, nl::copy, &t[3], with(reduce_cmd::reduce, &r[4]))?;
        // activation_reduce is reset_reduce.
        nisa::activation_reduce(
            ctx,
            &d,
            nl::copy,
            &t[1],
            nl::add,
            &r[5],
            ActivationReduceOpts { scale: Some(3.0.into()), ..Default::default() },
        )?;
        Ok(r.iter().map(|t| t.to_f32_vec()).collect::<Vec<_>>())
    });
    let sum = |x: &[f64]| -> Vec<f64> { x.chunks(f).map(|c| c.iter().map(|v| 3.0 * v).sum()).collect() };
    let (s0, s1, s3) = (sum(&xs[0]), sum(&xs[1]), sum(&xs[3]));
    let acc: Vec<f64> = (0..p).map(|i| s0[i] + s1[i]).collect();
    assert_close(&got[0], &s0, 0.0, 0.0);
    assert_close(&got[1], &acc, 0.0, 0.0);
    assert_close(&got[2], &acc, 0.0, 0.0);
    assert_close(&got[3], &[0.0; 4], 0.0, 0.0);
    assert_close(&got[4], &s3, 0.0, 0.0);
    assert_close(&got[5], &s1, 0.0, 0.0);
}

#[test]
fn activation_reduce_sums_unrounded_fp32_outputs_over_128_partitions() {
    let x = uniform(128 * 64, 70, -3.0, 1.0);
    let got = on_tile(&[128, 64], &x, |ctx, data| {
        let d = alloc(ctx, &[128, 64], Dtype::Bf16, Buffer::Sbuf)?;
        let r = alloc(ctx, &[128, 1], Dtype::F32, Buffer::Sbuf)?;
        let bias = sbuf_with(ctx, &[128, 1], Dtype::F32, &arange(128).iter().map(|v| -v / 128.0).collect::<Vec<_>>())?;
        nisa::activation_reduce(
            ctx,
            &d,
            nl::exp,
            data,
            nl::add,
            &r,
            ActivationReduceOpts { bias: Some((&bias).into()), ..Default::default() },
        )?;
        Ok((d.to_f32_vec(), r.to_f32_vec()))
    });
    let exps: Vec<f64> = x.iter().enumerate().map(|(i, &v)| (f64::from(v as f32) - (i / 64) as f64 / 128.0).exp()).collect();
    let sums: Vec<f64> = exps.chunks(64).map(|c| c.iter().sum()).collect();
    assert_close(&got.1, &sums, 2e-6, 0.0);
    // The stored tile is bf16 while the row sums are not the sums of the bf16 values.
    let bf_sums: Vec<f64> = got.0.chunks(64).map(|c| c.iter().map(|&v| f64::from(v)).sum()).collect();
    assert!(bf_sums.iter().zip(&sums).any(|(a, b)| (a - b).abs() > 1e-4));
    assert_close(&got.0, &exps, 2f64.powi(-8), 0.0);
}

#[test]
fn activation_rules() {
    on_tile(&[4, 4], &arange(16), |ctx, x| {
        let d = alloc(ctx, &[4, 4], Dtype::F32, Buffer::Sbuf)?;
        let e = expect_err(act(ctx, &d, nl::add, x, ActivationOpts::default()));
        assert_err(&e, ErrorKind::Constraint, &["nisa.activation", "op=nl.add"]);
        let r = alloc(ctx, &[4, 1], Dtype::F32, Buffer::Sbuf)?;
        let e = expect_err(act(
            ctx,
            &d,
            nl::exp,
            x,
            ActivationOpts { reduce_op: Some(nl::maximum), reduce_res: Some(&r), ..Default::default() },
        ));
        assert_err(&e, ErrorKind::Constraint, &["reduce_op must be nl.add", "nl.maximum"]);
        let e = expect_err(act(ctx, &d, nl::exp, x, ActivationOpts { reduce_cmd: Some(reduce_cmd::load_reduce), ..Default::default() }));
        assert_err(&e, ErrorKind::Constraint, &["load_reduce"]);
        let e = expect_err(act(ctx, &d, nl::exp, x, ActivationOpts { scale: Some((&d).into()), ..Default::default() }));
        assert_err(&e, ErrorKind::Shape, &["scale", "(4, 1) column"]);
        let e = expect_err(act(ctx, &d.index(&s![0..2])?, nl::exp, x, ActivationOpts::default()));
        assert_eq!(e.kind, ErrorKind::Shape);
        let e = expect_err(nisa::activation_reduce(ctx, &d, nl::exp, x, nl::add, &d, ActivationReduceOpts::default()));
        assert_err(&e, ErrorKind::Shape, &["nisa.activation_reduce", "reduce_res"]);
        Ok(())
    });
    // trn1: the bias must be a vector.
    Launch::new()
        .generation(Generation::Trn1)
        .run(|ctx| {
            let x = sbuf_with(ctx, &[2, 2], Dtype::F32, &[1.0; 4])?;
            let d = alloc(ctx, &[2, 2], Dtype::F32, Buffer::Sbuf)?;
            let e = expect_err(act(ctx, &d, nl::copy, &x, ActivationOpts { bias: Some(1.0.into()), ..Default::default() }));
            assert_err(&e, ErrorKind::Constraint, &["scalar bias", "trn1"]);
            let b = sbuf_with(ctx, &[2, 1], Dtype::F32, &[1.0, 2.0])?;
            act(ctx, &d, nl::copy, &x, ActivationOpts { bias: Some((&b).into()), ..Default::default() })?;
            assert_eq!(d.to_f32_vec(), vec![2.0, 2.0, 3.0, 3.0]);
            Ok(())
        })
        .unwrap();
}

#[test]
fn activation_in_place() {
    let x = dyadic(3 * 5, 80, -2.0, 2.0, 6);
    let got = on_tile(&[3, 5], &x, |ctx, t| {
        let col = t.index(&s![.., 0..1])?;
        // data, dst and the bias column all alias one tile.
        act(ctx, t, nl::copy, t, ActivationOpts { scale: Some(2.0.into()), bias: Some((&col).into()), ..Default::default() })?;
        Ok(t.to_f32_vec())
    });
    let want: Vec<f64> = (0..15).map(|i| 2.0 * x[i] + x[i - i % 5]).collect();
    assert_close(&got, &want, 0.0, 0.0);
}

#[test]
fn vector_reset_and_idle_commands() {
    let (p, f) = (3usize, 5usize);
    let xs: Vec<Vec<f64>> = (0..3).map(|i| dyadic(p * f, 100 + i, -2.0, 2.0, 6)).collect();
    let got = on_tiles(&[p as i64, f as i64], &xs, |ctx, t| {
        let d = alloc(ctx, &[p as i64, f as i64], Dtype::F32, Buffer::Sbuf)?;
        let r: Vec<Tensor> = (0..5).map(|_| alloc(ctx, &[p as i64, 1], Dtype::F32, Buffer::Sbuf)).collect::<Result<_>>()?;
        fn opts(cmd: ReduceCmd, res: &Tensor) -> TensorScalarReduceOpts<'_> {
            TensorScalarReduceOpts { reduce_cmd: Some(cmd), reduce_res: Some(res), ..Default::default() }
        }
        tsr(ctx, &d, &t[0], nl::add, 0.0.into(), nl::add, opts(reduce_cmd::reset_reduce, &r[0]))?;
        // idle: the op still writes dst; the registers keep the previous sums.
        tsr(ctx, &d, &t[1], nl::add, 1.0.into(), nl::add, opts(reduce_cmd::idle, &r[1]))?;
        let idle_dst = d.to_f32_vec();
        // reset: zero, without this row.
        tsr(ctx, &d, &t[1], nl::add, 0.0.into(), nl::add, opts(reduce_cmd::reset, &r[2]))?;
        tsr(ctx, &d, &t[2], nl::add, 0.0.into(), nl::add, opts(reduce_cmd::reduce, &r[3]))?;
        // range_select shares the registers: idle reads them out unchanged.
        let lo = sbuf_with(ctx, &[p as i64, 1], Dtype::F32, &vec![-1.0; p])?;
        let hi = sbuf_with(ctx, &[p as i64, 1], Dtype::F32, &vec![100.0; p])?;
        nisa::range_select(
            ctx,
            &d,
            &t[0],
            nl::greater,
            nl::less,
            &lo,
            &hi,
            RangeSelectOpts { reduce_cmd: Some(reduce_cmd::idle), reduce_res: Some(&r[4]), ..Default::default() },
        )?;
        Ok((idle_dst, r.iter().map(|t| t.to_f32_vec()).collect::<Vec<_>>()))
    });
    let sums = |x: &[f64]| -> Vec<f64> { x.chunks(f).map(|c| c.iter().sum()).collect() };
    assert_close(&got.0, &xs[1].iter().map(|v| v + 1.0).collect::<Vec<_>>(), 0.0, 0.0);
    let r = &got.1;
    assert_close(&r[0], &sums(&xs[0]), 0.0, 0.0);
    assert_close(&r[1], &sums(&xs[0]), 0.0, 0.0);
    assert_close(&r[2], &vec![0.0; p], 0.0, 0.0);
    assert_close(&r[3], &sums(&xs[2]), 0.0, 0.0);
    assert_close(&r[4], &sums(&xs[2]), 0.0, 0.0);
}

/// The NaN choice of SEMANTICS.md: an element-wise maximum / minimum keeps the
/// non-NaN operand, a row reduction shows the row's NaN.
#[test]
fn elementwise_max_skips_nan_and_row_max_shows_it() {
    let x = [f64::NAN, 2.0, -3.0, 0.5];
    let y = [1.0, f64::NAN, -4.0, 0.25];
    let (mx, mn, rmax, rmin) = launch(Precision::Fp32)
        .run(|ctx| {
            let a = sbuf_with(ctx, &[1, 4], Dtype::F32, &x)?;
            let b = sbuf_with(ctx, &[1, 4], Dtype::F32, &y)?;
            let hi = alloc(ctx, &[1, 4], Dtype::F32, Buffer::Sbuf)?;
            let lo = alloc(ctx, &[1, 4], Dtype::F32, Buffer::Sbuf)?;
            nisa::tensor_tensor(ctx, &hi, &a, &b, nl::maximum, Default::default())?;
            nisa::tensor_tensor(ctx, &lo, &a, &b, nl::minimum, Default::default())?;
            let row_max = alloc(ctx, &[1, 1], Dtype::F32, Buffer::Sbuf)?;
            let row_min = alloc(ctx, &[1, 1], Dtype::F32, Buffer::Sbuf)?;
            reduce(ctx, &row_max, nl::maximum, &a, &[1])?;
            reduce(ctx, &row_min, nl::minimum, &a, &[1])?;
            Ok((hi.to_f32_vec(), lo.to_f32_vec(), row_max.to_f32_vec(), row_min.to_f32_vec()))
        })
        .unwrap();
    assert_eq!(mx, vec![1.0, 2.0, -3.0, 0.5]);
    assert_eq!(mn, vec![1.0, 2.0, -4.0, 0.25]);
    assert!(rmax[0].is_nan() && rmin[0].is_nan(), "a row's NaN shows in its max and min: {rmax:?} {rmin:?}");
}
