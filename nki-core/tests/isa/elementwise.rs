//! Element-wise engine ops: `tensor_tensor`, `tensor_scalar`,
//! `scalar_tensor_tensor`, `tensor_copy`, `memset`, `reciprocal`, including the
//! integer path, memory rules and in-place use (dst aliasing an input).

use crate::common::*;
use nki_core::hw::Generation;
use nki_core::isa::{self as nisa, EngineOpts, FLOAT32_MIN, NameOpts, Operand, ScalarTensorTensorOpts, TensorScalarOpts, engine};
use nki_core::nl::{self, NlOp};
use nki_core::{Buffer, Ctx, Dtype, ErrorKind, Launch, Precision, Result, Tensor, s};

fn tt(ctx: &Ctx, dst: &Tensor, a: &Tensor, b: &Tensor, op: NlOp) -> Result<()> {
    nisa::tensor_tensor(ctx, dst, a, b, op, EngineOpts::default())
}

/// 1.0 where `c` holds, else 0.0: what `nl` comparisons and logical ops write.
fn truth(c: bool) -> f64 {
    f64::from(u8::from(c))
}

/// A binary token's float64 meaning.
type Meaning2 = fn(f64, f64) -> f64;

/// The binary ALU tokens, each with its float64 meaning written from its
/// `nki.language` docstring (`x + y`, `x ** y`, `x < y`, `x and y`, ...).
const BINARY: [(NlOp, Meaning2); 15] = [
    (nl::add, |x, y| x + y),
    (nl::subtract, |x, y| x - y),
    (nl::multiply, |x, y| x * y),
    (nl::divide, |x, y| x / y),
    (nl::maximum, f64::max),
    (nl::minimum, f64::min),
    (nl::power, f64::powf),
    (nl::less, |x, y| truth(x < y)),
    (nl::less_equal, |x, y| truth(x <= y)),
    (nl::greater, |x, y| truth(x > y)),
    (nl::greater_equal, |x, y| truth(x >= y)),
    (nl::equal, |x, y| truth(x == y)),
    (nl::not_equal, |x, y| truth(x != y)),
    (nl::logical_and, |x, y| truth(x != 0.0 && y != 0.0)),
    (nl::logical_or, |x, y| truth(x != 0.0 || y != 0.0)),
];

#[test]
fn tensor_tensor_every_binary_op_in_fp32() {
    let (p, f) = (16usize, 24usize);
    let a = f32_cells(&uniform(p * f, 1, 0.1, 4.0));
    // Every third element equal to `a`, some zeros, the rest random.
    let b: Vec<f64> = uniform(p * f, 2, 0.1, 4.0)
        .iter()
        .enumerate()
        .map(|(i, &v)| match i % 6 {
            0 | 3 => a[i],
            5 => 0.0,
            _ => f64::from(v as f32),
        })
        .collect();
    let got = launch(Precision::Fp32)
        .run(|ctx| {
            let x = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &a)?;
            let y = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &b)?;
            let mut all = Vec::new();
            for (op, _) in BINARY {
                let d = alloc(ctx, &[p as i64, f as i64], Dtype::F32, Buffer::Sbuf)?;
                tt(ctx, &d, &x, &y, op)?;
                all.push(d.to_f32_vec());
            }
            Ok(all)
        })
        .unwrap();
    for ((op, meaning), g) in BINARY.iter().zip(&got) {
        let want: Vec<f64> = a.iter().zip(&b).map(|(&x, &y)| meaning(x, y)).collect();
        // One fp32 rounding (power: a few ulp).
        let finite: Vec<(f32, f64)> = g.iter().copied().zip(want.iter().copied()).filter(|(_, w)| w.is_finite()).collect();
        let (gf, wf): (Vec<f32>, Vec<f64>) = finite.into_iter().unzip();
        assert_close(&gf, &wf, 1e-6, 0.0);
        if *op == nl::divide {
            assert!(g.iter().skip(5).step_by(6).all(|v| *v == f32::INFINITY), "x / 0 is +inf");
        }
    }
}

#[test]
fn hardware_precision_rounds_once_to_the_destination_dtype() {
    // Dyadic inputs: the fp32 results are exact, so the only rounding is the write.
    let (p, f) = (8usize, 32usize);
    let a = dyadic(p * f, 3, -8.0, 8.0, 8);
    let b = dyadic(p * f, 4, -8.0, 8.0, 8);
    let got = Launch::new()
        .run(|ctx| {
            let x = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &a)?;
            let y = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &b)?;
            let mut all = Vec::new();
            for d in [Dtype::Bf16, Dtype::F16, Dtype::F32] {
                let out = alloc(ctx, &[p as i64, f as i64], d, Buffer::Sbuf)?;
                tt(ctx, &out, &x, &y, nl::add)?;
                let prod = alloc(ctx, &[p as i64, f as i64], d, Buffer::Psum)?;
                tt(ctx, &prod, &x, &y, nl::multiply)?;
                all.push((out.to_f32_vec(), prod.to_f32_vec()));
            }
            Ok(all)
        })
        .unwrap();
    let sum: Vec<f32> = a.iter().zip(&b).map(|(x, y)| (x + y) as f32).collect();
    let prod: Vec<f32> = a.iter().zip(&b).map(|(x, y)| (x * y) as f32).collect();
    let round = [bf16 as fn(f32) -> f32, f16, |v| v];
    for (r, (gs, gp)) in round.iter().zip(&got) {
        assert_bits(gs, &sum.iter().map(|&v| r(v)).collect::<Vec<_>>());
        assert_bits(gp, &prod.iter().map(|&v| r(v)).collect::<Vec<_>>());
    }
    assert!(sum.iter().any(|&v| bf16(v) != v), "the data must need rounding");
    // fp32 precision keeps the unrounded values in a bf16 tile.
    let kept = launch(Precision::Fp32)
        .run(|ctx| {
            let x = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &a)?;
            let y = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &b)?;
            let out = alloc(ctx, &[p as i64, f as i64], Dtype::Bf16, Buffer::Sbuf)?;
            tt(ctx, &out, &x, &y, nl::add)?;
            Ok(out.to_f32_vec())
        })
        .unwrap();
    assert_bits(&kept, &sum);
}

#[test]
fn int32_operands_use_exact_integer_math() {
    // Results beyond 2^24 (not exact in fp32) but within int32.
    let a: Vec<i64> = vec![16_777_217, -16_777_219, 123_456, 7, -3, 0];
    let b: Vec<i64> = vec![2, 1, -9_876, 7, 5, -1];
    let got = Launch::new()
        .run(|ctx| {
            let x = alloc(ctx, &[2, 3], Dtype::I32, Buffer::Sbuf)?;
            let y = alloc(ctx, &[2, 3], Dtype::I32, Buffer::Sbuf)?;
            nisa::dma_copy(ctx, &x, &Tensor::from_i64(&[2, 3], &a, Dtype::I32)?, Default::default())?;
            nisa::dma_copy(ctx, &y, &Tensor::from_i64(&[2, 3], &b, Dtype::I32)?, Default::default())?;
            let mut all = Vec::new();
            for op in [nl::add, nl::subtract, nl::multiply, nl::maximum, nl::less, nl::equal] {
                let d = alloc(ctx, &[2, 3], Dtype::I32, Buffer::Sbuf)?;
                tt(ctx, &d, &x, &y, op)?;
                all.push(d.to_i64_vec());
            }
            // With a float destination the op runs in fp32 and loses the low bits.
            let f = alloc(ctx, &[2, 3], Dtype::F32, Buffer::Sbuf)?;
            tt(ctx, &f, &x, &y, nl::add)?;
            all.push(f.to_f32_vec().iter().map(|&v| v as i64).collect());
            Ok(all)
        })
        .unwrap();
    let zip = |f: fn(i64, i64) -> i64| a.iter().zip(&b).map(|(&x, &y)| f(x, y)).collect::<Vec<_>>();
    assert_eq!(got[0], zip(|x, y| x + y));
    assert_eq!(got[1], zip(|x, y| x - y));
    assert_eq!(got[2], zip(|x, y| x * y));
    assert_eq!(got[2][2], -1_219_251_456);
    assert_eq!(got[3], zip(|x, y| x.max(y)));
    assert_eq!(got[4], zip(|x, y| i64::from(x < y)));
    assert_eq!(got[5], zip(|x, y| i64::from(x == y)));
    assert_eq!(got[6][0], 16_777_216 + 2);
}

#[test]
fn tensor_tensor_rules() {
    Launch::new()
        .run(|ctx| {
            let x = sbuf_with(ctx, &[4, 6], Dtype::F32, &arange(24))?;
            let px = alloc(ctx, &[4, 6], Dtype::F32, Buffer::Psum)?;
            nisa::tensor_copy(ctx, &px, &x, EngineOpts::default())?;
            let d = alloc(ctx, &[4, 6], Dtype::F32, Buffer::Sbuf)?;
            let e = expect_err(tt(ctx, &d, &px, &px, nl::add));
            assert_err(&e, ErrorKind::Constraint, &["nisa.tensor_tensor", "both in PSUM"]);
            // One PSUM input and a PSUM destination are fine.
            tt(ctx, &px, &px, &x, nl::add)?;
            assert_eq!(px.to_f32_vec(), (0..24).map(|v| 2.0 * v as f32).collect::<Vec<_>>());
            let gp = EngineOpts { engine: Some(engine::gpsimd), ..Default::default() };
            let e = expect_err(nisa::tensor_tensor(ctx, &d, &x, &px, nl::add, gp));
            assert_err(&e, ErrorKind::Constraint, &["GpSimd", "PSUM"]);
            let e = expect_err(tt(ctx, &d, &x, &x, nl::exp));
            assert_err(&e, ErrorKind::Constraint, &["nl.exp", "activation function"]);
            let e = expect_err(tt(ctx, &d, &x.index(&s![0..3])?, &x.index(&s![0..3])?, nl::add));
            assert_err(&e, ErrorKind::Shape, &["4 partitions x 6 elements", "is 3 x 6"]);
            let e = expect_err(tt(ctx, &d, &x, &x.index(&s![.., 0..5])?, nl::add));
            assert_err(&e, ErrorKind::Shape, &["4 x 5"]);
            let h = hbm(&[4, 6], &arange(24), Dtype::F32);
            let e = expect_err(tt(ctx, &d, &x, &h, nl::add));
            assert_err(&e, ErrorKind::Constraint, &["data2", "HBM"]);
            // Free shapes may differ as long as the element counts per partition agree.
            let d3 = alloc(ctx, &[4, 2, 3], Dtype::F32, Buffer::Sbuf)?;
            tt(ctx, &d3, &x, &x, nl::multiply)?;
            assert_eq!(d3.to_f32_vec(), (0..24).map(|v| (v * v) as f32).collect::<Vec<_>>());
            // A stride-0 broadcast operand.
            let col = x.index(&s![.., 0..1])?.broadcast(1, 6)?;
            tt(ctx, &d, &x, &col, nl::subtract)?;
            let want: Vec<f32> = (0..24).map(|v| (v % 6) as f32).collect();
            assert_eq!(d.to_f32_vec(), want);
            Ok(())
        })
        .unwrap();
}

fn ts<'a>(ctx: &Ctx, dst: &Tensor, data: &Tensor, op0: NlOp, o0: Operand<'a>, opts: TensorScalarOpts<'a>) -> Result<()> {
    nisa::tensor_scalar(ctx, dst, data, op0, o0, opts)
}

#[test]
fn tensor_scalar_operands_stages_and_reverse() {
    let (p, f) = (6usize, 10usize);
    let a = f32_cells(&uniform(p * f, 21, -3.0, 3.0));
    let col = f32_cells(&uniform(p, 22, 0.5, 2.0));
    let col2 = f32_cells(&uniform(p, 23, -1.0, 1.0));
    let got = launch(Precision::Fp32)
        .run(|ctx| {
            let x = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &a)?;
            let c = sbuf_with(ctx, &[p as i64, 1], Dtype::F32, &col)?;
            // The second column lives in PSUM: operands may.
            let c2 = alloc(ctx, &[p as i64, 1], Dtype::F32, Buffer::Psum)?;
            nisa::tensor_copy(ctx, &c2, &sbuf_with(ctx, &[p as i64, 1], Dtype::F32, &col2)?, EngineOpts::default())?;
            let d = || alloc(ctx, &[p as i64, f as i64], Dtype::F32, Buffer::Sbuf);
            let (d0, d1, d2, d3, d4) = (d()?, d()?, d()?, d()?, d()?);
            ts(ctx, &d0, &x, nl::multiply, 2.5.into(), Default::default())?;
            ts(ctx, &d1, &x, nl::subtract, (&c).into(), TensorScalarOpts { reverse0: Some(true), ..Default::default() })?;
            ts(
                ctx,
                &d2,
                &x,
                nl::multiply,
                (&c).into(),
                TensorScalarOpts { op1: Some(nl::add), operand1: Some((&c2).into()), ..Default::default() },
            )?;
            ts(
                ctx,
                &d3,
                &x,
                nl::add,
                1.0.into(),
                TensorScalarOpts { op1: Some(nl::divide), operand1: Some(3.0.into()), reverse1: Some(true), ..Default::default() },
            )?;
            // A unary op0 ignores its operand.
            ts(
                ctx,
                &d4,
                &x,
                nl::abs,
                0.0.into(),
                TensorScalarOpts { op1: Some(nl::maximum), operand1: Some((&c).into()), ..Default::default() },
            )?;
            Ok([d0, d1, d2, d3, d4].map(|t| t.to_f32_vec()))
        })
        .unwrap();
    let want = |g: &dyn Fn(f64, f64, f64) -> f64| -> Vec<f64> { (0..p * f).map(|i| g(a[i], col[i / f], col2[i / f])).collect() };
    assert_close(&got[0], &want(&|x, _, _| x * 2.5), 1e-6, 0.0);
    assert_close(&got[1], &want(&|x, c, _| c - x), 1e-6, 1e-7);
    assert_close(&got[2], &want(&|x, c, c2| x * c + c2), 1e-6, 1e-6);
    assert_close(&got[3], &want(&|x, _, _| 3.0 / (x + 1.0)), 1e-6, 0.0);
    assert_close(&got[4], &want(&|x, c, _| x.abs().max(c)), 0.0, 0.0);
}

#[test]
fn tensor_scalar_rules() {
    Launch::new()
        .run(|ctx| {
            let x = sbuf_with(ctx, &[4, 6], Dtype::F32, &arange(24))?;
            let d = alloc(ctx, &[4, 6], Dtype::F32, Buffer::Sbuf)?;
            let e = expect_err(ts(ctx, &d, &x, nl::add, 1.0.into(), TensorScalarOpts { op1: Some(nl::add), ..Default::default() }));
            assert_err(&e, ErrorKind::Constraint, &["nisa.tensor_scalar", "op1 and operand1"]);
            let wide = sbuf_with(ctx, &[4, 2], Dtype::F32, &arange(8))?;
            let e = expect_err(ts(ctx, &d, &x, nl::add, (&wide).into(), Default::default()));
            assert_err(&e, ErrorKind::Shape, &["operand0", "(4, 1) column", "4 partitions x 2 elements"]);
            let short = sbuf_with(ctx, &[3, 1], Dtype::F32, &arange(3))?;
            let e = expect_err(ts(ctx, &d, &x, nl::add, (&short).into(), Default::default()));
            assert_err(&e, ErrorKind::Shape, &["(4, 1) column"]);
            let e = expect_err(ts(ctx, &d.index(&s![.., 0..5])?, &x, nl::add, 1.0.into(), Default::default()));
            assert_eq!(e.kind, ErrorKind::Shape);
            // Comparisons produce 1.0 / 0.0, then cast to the destination dtype.
            let m = alloc(ctx, &[4, 6], Dtype::U8, Buffer::Sbuf)?;
            ts(ctx, &m, &x, nl::greater_equal, 10.0.into(), Default::default())?;
            assert_eq!(m.to_i64_vec(), (0..24).map(|v| i64::from(v >= 10)).collect::<Vec<_>>());
            Ok(())
        })
        .unwrap();
}

#[test]
fn scalar_tensor_tensor_formula_and_rules() {
    let (p, f) = (5usize, 7usize);
    let a = f32_cells(&uniform(p * f, 31, -2.0, 2.0));
    let b = f32_cells(&uniform(p * f, 32, -2.0, 2.0));
    let col = f32_cells(&uniform(p, 33, 0.5, 1.5));
    let got = launch(Precision::Fp32)
        .run(|ctx| {
            let x = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &a)?;
            let y = alloc(ctx, &[p as i64, f as i64], Dtype::F32, Buffer::Psum)?;
            nisa::tensor_copy(ctx, &y, &sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &b)?, EngineOpts::default())?;
            let c = sbuf_with(ctx, &[p as i64, 1], Dtype::F32, &col)?;
            let d0 = alloc(ctx, &[p as i64, f as i64], Dtype::F32, Buffer::Sbuf)?;
            let d1 = alloc(ctx, &[p as i64, f as i64], Dtype::F32, Buffer::Psum)?;
            // mm2_prev * corr + mm2_cur, operand1 in PSUM.
            nisa::scalar_tensor_tensor(ctx, &d0, &x, nl::multiply, (&c).into(), nl::add, &y, Default::default())?;
            // (c - x) then y - that.
            nisa::scalar_tensor_tensor(
                ctx,
                &d1,
                &x,
                nl::subtract,
                (&c).into(),
                nl::subtract,
                &y,
                ScalarTensorTensorOpts { reverse0: Some(true), reverse1: Some(true), ..Default::default() },
            )?;
            let e = expect_err(nisa::scalar_tensor_tensor(ctx, &d0, &y, nl::add, 1.0.into(), nl::add, &y, Default::default()));
            assert_err(&e, ErrorKind::Constraint, &["nisa.scalar_tensor_tensor", "both in PSUM"]);
            let e = expect_err(nisa::scalar_tensor_tensor(ctx, &d0, &x, nl::exp, 1.0.into(), nl::add, &y, Default::default()));
            assert_err(&e, ErrorKind::Constraint, &["op0=nl.exp"]);
            let e = expect_err(nisa::scalar_tensor_tensor(
                ctx,
                &d0,
                &x,
                nl::add,
                1.0.into(),
                nl::add,
                &x.index(&s![.., 0..6])?,
                Default::default(),
            ));
            assert_eq!(e.kind, ErrorKind::Shape);
            Ok((d0.to_f32_vec(), d1.to_f32_vec()))
        })
        .unwrap();
    let w0: Vec<f64> = (0..p * f).map(|i| a[i] * col[i / f] + b[i]).collect();
    let w1: Vec<f64> = (0..p * f).map(|i| b[i] - (col[i / f] - a[i])).collect();
    assert_close(&got.0, &w0, 1e-6, 1e-6);
    assert_close(&got.1, &w1, 1e-6, 1e-6);
}

#[test]
fn tensor_copy_casts_and_engine_rules() {
    let vals: Vec<f64> = vec![1.0 + 2f64.powi(-8), 1.0 + 3.0 * 2f64.powi(-8), -2.5, 3.5, 65520.0, 1e-3, -0.0, 1e30];
    let got = Launch::new()
        .run(|ctx| {
            let x = sbuf_with(ctx, &[2, 4], Dtype::F32, &vals)?;
            let b = alloc(ctx, &[2, 4], Dtype::Bf16, Buffer::Psum)?;
            nisa::tensor_copy(ctx, &b, &x, EngineOpts::default())?;
            let h = alloc(ctx, &[2, 2, 2], Dtype::F16, Buffer::Sbuf)?;
            nisa::tensor_copy(ctx, &h, &x, EngineOpts::default())?;
            let i = alloc(ctx, &[2, 4], Dtype::I32, Buffer::Sbuf)?;
            nisa::tensor_copy(ctx, &i, &x, EngineOpts { engine: Some(engine::vector), ..Default::default() })?;
            // Same dtype: bit-exact, even for integers beyond 2^24.
            let big = alloc(ctx, &[1, 2], Dtype::I32, Buffer::Sbuf)?;
            nisa::dma_copy(ctx, &big, &Tensor::from_i64(&[1, 2], &[16_777_217, -2_000_000_001], Dtype::I32)?, Default::default())?;
            let big2 = alloc(ctx, &[1, 2], Dtype::I32, Buffer::Psum)?;
            nisa::tensor_copy(ctx, &big2, &big, EngineOpts::default())?;
            Ok((b.to_f32_vec(), h.to_f32_vec(), i.to_i64_vec(), big2.to_i64_vec()))
        })
        .unwrap();
    let f: Vec<f32> = vals.iter().map(|&v| v as f32).collect();
    assert_bits(&got.0, &f.iter().map(|&v| bf16(v)).collect::<Vec<_>>());
    assert_bits(&got.1, &f.iter().map(|&v| f16(v)).collect::<Vec<_>>());
    assert_eq!(got.2, vec![1, 1, -2, 4, 65520, 0, 0, i32::MAX as i64]);
    assert_eq!(got.3, vec![16_777_217, -2_000_000_001]);

    let e = expect_err(Launch::new().generation(Generation::Trn1).run(|ctx| {
        let x = sbuf_with(ctx, &[2, 2], Dtype::F32, &[1.0; 4])?;
        nisa::tensor_copy(ctx, &x, &x, EngineOpts { engine: Some(engine::scalar), ..Default::default() })
    }));
    assert_err(&e, ErrorKind::Constraint, &["nisa.tensor_copy", "trn1", "activation"]);
    Launch::new()
        .run(|ctx| {
            let x = sbuf_with(ctx, &[2, 2], Dtype::F32, &[1.0; 4])?;
            let p = alloc(ctx, &[2, 2], Dtype::F32, Buffer::Psum)?;
            let e = expect_err(nisa::tensor_copy(ctx, &p, &x, EngineOpts { engine: Some(engine::gpsimd), ..Default::default() }));
            assert_err(&e, ErrorKind::Constraint, &["dst", "PSUM", "GpSimd"]);
            let e = expect_err(nisa::tensor_copy(ctx, &p, &hbm(&[2, 2], &[0.0; 4], Dtype::F32), EngineOpts::default()));
            assert_err(&e, ErrorKind::Constraint, &["src", "HBM"]);
            let e = expect_err(nisa::tensor_copy(ctx, &p, &x.index(&s![0..1])?, EngineOpts::default()));
            assert_eq!(e.kind, ErrorKind::Shape);
            Ok(())
        })
        .unwrap();
}

#[test]
fn memset_float_and_integer_rules() {
    let got = Launch::new()
        .run(|ctx| {
            let f = alloc(ctx, &[3, 4], Dtype::F32, Buffer::Sbuf)?;
            nisa::memset(ctx, &f, 0.0, EngineOpts::default())?;
            // Only the view is written.
            nisa::memset(ctx, &f.index(&s![1..3, 1..4;2])?, 0.1, EngineOpts::default())?;
            let b = alloc(ctx, &[2, 3], Dtype::Bf16, Buffer::Psum)?;
            nisa::memset(ctx, &b.index(&s![0])?, FLOAT32_MIN, EngineOpts::default())?;
            nisa::memset(ctx, &b.index(&s![1])?, 1.0 + 2f64.powi(-8), EngineOpts::default())?;
            let i = alloc(ctx, &[2, 2], Dtype::I32, Buffer::Sbuf)?;
            nisa::memset(ctx, &i, -7.0, EngineOpts::default())?;
            let e = expect_err(nisa::memset(ctx, &i, 2.5, EngineOpts::default()));
            assert_err(&e, ErrorKind::Dtype, &["nisa.memset", "2.5", "integer"]);
            let e = expect_err(nisa::memset(ctx, &b, 0.0, EngineOpts { engine: Some(engine::gpsimd), ..Default::default() }));
            assert_err(&e, ErrorKind::Constraint, &["PSUM"]);
            Ok((f.to_f32_vec(), b.to_f32_vec(), i.to_i64_vec()))
        })
        .unwrap();
    let t = 0.1f32;
    assert_eq!(got.0, vec![0., 0., 0., 0., 0., t, 0., t, 0., t, 0., t]);
    // FP32_MIN rounds to -inf in bf16; the tie 1 + 2^-8 rounds to even.
    assert_bits(&got.1, &[f32::NEG_INFINITY, f32::NEG_INFINITY, f32::NEG_INFINITY, 1.0, 1.0, 1.0]);
    assert_eq!(got.2, vec![-7; 4]);
    // In fp32 precision a bf16 tile keeps FP32_MIN.
    let kept = launch(Precision::Fp32)
        .run(|ctx| {
            let b = alloc(ctx, &[1, 1], Dtype::Bf16, Buffer::Sbuf)?;
            nisa::memset(ctx, &b, FLOAT32_MIN, EngineOpts::default())?;
            Ok(b.to_f32_vec()[0])
        })
        .unwrap();
    assert_eq!(f64::from(kept), FLOAT32_MIN);
}

#[test]
fn reciprocal_in_fp32() {
    let vals = [4.0, -0.5, 3.0, 0.0, -0.0, 1e-3, f64::INFINITY, 7.0];
    let got = Launch::new()
        .run(|ctx| {
            let x = sbuf_with(ctx, &[2, 4], Dtype::F32, &vals)?;
            let d = alloc(ctx, &[2, 4], Dtype::F32, Buffer::Psum)?;
            nisa::reciprocal(ctx, &d, &x, NameOpts::default())?;
            let e = expect_err(nisa::reciprocal(ctx, &d, &x.index(&s![.., 0..3])?, NameOpts::default()));
            assert_err(&e, ErrorKind::Shape, &["nisa.reciprocal"]);
            Ok(d.to_f32_vec())
        })
        .unwrap();
    let want: Vec<f32> = vals.iter().map(|&v| 1.0 / (v as f32)).collect();
    assert_bits(&got, &want);
}

#[test]
fn in_place_ops_with_the_same_or_an_overlapping_view() {
    let (p, f) = (4usize, 8usize);
    let a = dyadic(p * f, 41, -4.0, 4.0, 4);
    let b = dyadic(p * f, 42, -4.0, 4.0, 4);
    let got = Launch::new()
        .run(|ctx| {
            // Same view as data1, and as data2.
            let x = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &a)?;
            let y = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &b)?;
            tt(ctx, &x, &x, &y, nl::subtract)?;
            let r1 = x.to_f32_vec();
            tt(ctx, &y, &x, &y, nl::multiply)?;
            let r2 = y.to_f32_vec();
            // dst shifted by one column from the data view: as if every input were
            // read before any output is written.
            let z = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &a)?;
            ts(ctx, &z.index(&s![.., 1..f as i64])?, &z.index(&s![.., 0..f as i64 - 1])?, nl::add, 100.0.into(), Default::default())?;
            let r3 = z.to_f32_vec();
            // dst = reversed view of itself.
            let w = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &a)?;
            let rev = w.ap(&[[f as i64, p as i64], [-1, f as i64]], Some(f as i64 - 1), None, 0)?;
            tt(ctx, &w, &rev, &w, nl::subtract)?;
            let r4 = w.to_f32_vec();
            // A non-contiguous (strided) dst aliasing its input.
            let v = sbuf_with(ctx, &[p as i64, f as i64], Dtype::F32, &a)?;
            let even = v.index(&s![.., 0..f as i64;2])?;
            ts(ctx, &even, &even, nl::multiply, (-1.0).into(), Default::default())?;
            let r5 = v.to_f32_vec();
            Ok((r1, r2, r3, r4, r5))
        })
        .unwrap();
    let n = p * f;
    let d: Vec<f64> = (0..n).map(|i| a[i] - b[i]).collect();
    assert_close(&got.0, &d, 0.0, 0.0);
    assert_close(&got.1, &(0..n).map(|i| d[i] * b[i]).collect::<Vec<_>>(), 0.0, 0.0);
    let shifted: Vec<f64> = (0..n).map(|i| if i % f == 0 { a[i] } else { a[i - 1] + 100.0 }).collect();
    assert_close(&got.2, &shifted, 0.0, 0.0);
    let rev: Vec<f64> = (0..n).map(|i| a[i - i % f + (f - 1 - i % f)] - a[i]).collect();
    assert_close(&got.3, &rev, 0.0, 0.0);
    let neg: Vec<f64> = (0..n).map(|i| if i % 2 == 0 { -a[i] } else { a[i] }).collect();
    assert_close(&got.4, &neg, 0.0, 0.0);
}
