//! The two precision models across every op that writes computed values: in
//! `Hardware` a bf16/f16 destination holds exactly what `half` rounds the fp32
//! result to (round to nearest even); in `Fp32` it keeps the fp32 result.

use crate::common::*;
use nki_core::collectives::{PermuteOpts, ReplicaGroup, collective_permute_implicit_reduce};
use nki_core::hw::Generation;
use nki_core::isa::{
    self as nisa, ActivationOpts, AffineSelectOpts, EngineOpts, IotaOpts, NcMatmulOpts, RangeSelectOpts, TensorReduceOpts,
    TensorScalarOpts, TensorScalarReduceOpts,
};
use nki_core::{Buffer, Ctx, Dtype, Launch, Precision, Result, Tensor, nl};

const P: usize = 4;
const F: usize = 8;

/// Runs every writer op into a fresh `dtype` destination; returns (op, values, exact fp32 results).
fn sweep(precision: Precision, dtype: Dtype) -> Vec<(&'static str, Vec<f32>, Vec<f64>)> {
    // 13 significant bits: exact in fp32 (and sums of eight of them), not in bf16 or f16.
    let x = dyadic(P * F, 1, -4.0, 4.0, 10);
    let y = dyadic(P * F, 2, -4.0, 4.0, 10);
    let (xs, ys) = (x.clone(), y.clone());
    let got = Launch::new()
        .precision(precision)
        .generation(Generation::Trn3)
        .run(move |ctx| {
            let (pi, fi) = (P as i64, F as i64);
            let tx = sbuf_with(ctx, &[pi, fi], Dtype::F32, &xs)?;
            let ty = sbuf_with(ctx, &[pi, fi], Dtype::F32, &ys)?;
            let mut out: Vec<(&'static str, Tensor)> = Vec::new();
            let mut dst = |name: &'static str, ctx: &Ctx, shape: &[i64], buffer: Buffer| -> Result<Tensor> {
                let t = alloc(ctx, shape, dtype, buffer)?;
                out.push((name, t.clone()));
                Ok(t)
            };
            let full = [pi, fi];
            nisa::tensor_copy(ctx, &dst("tensor_copy", ctx, &full, Buffer::Sbuf)?, &tx, EngineOpts::default())?;
            nisa::tensor_tensor(ctx, &dst("tensor_tensor", ctx, &full, Buffer::Psum)?, &tx, &ty, nl::add, EngineOpts::default())?;
            nisa::tensor_scalar(
                ctx,
                &dst("tensor_scalar", ctx, &full, Buffer::Sbuf)?,
                &tx,
                nl::multiply,
                2.0.into(),
                TensorScalarOpts { op1: Some(nl::add), operand1: Some(0.25.into()), ..Default::default() },
            )?;
            nisa::scalar_tensor_tensor(
                ctx,
                &dst("scalar_tensor_tensor", ctx, &full, Buffer::Sbuf)?,
                &tx,
                nl::multiply,
                0.5.into(),
                nl::add,
                &ty,
                Default::default(),
            )?;
            nisa::activation(
                ctx,
                &dst("activation", ctx, &full, Buffer::Sbuf)?,
                nl::copy,
                &tx,
                ActivationOpts { scale: Some(2.0.into()), bias: Some(0.25.into()), ..Default::default() },
            )?;
            nisa::tensor_reduce(ctx, &dst("tensor_reduce", ctx, &[pi, 1], Buffer::Sbuf)?, nl::add, &tx, &[1], TensorReduceOpts::default())?;
            nisa::tensor_scalar_reduce(
                ctx,
                &dst("tensor_scalar_reduce", ctx, &full, Buffer::Sbuf)?,
                &tx,
                nl::add,
                0.0.into(),
                nl::add,
                TensorScalarReduceOpts::default(),
            )?;
            let keep_all = AffineSelectOpts { cmp_op: Some(nl::greater_equal), ..Default::default() };
            nisa::affine_select(ctx, &dst("affine_select", ctx, &full, Buffer::Sbuf)?, &[[1, fi]], 1, &tx, -1.0, keep_all)?;
            let lo = sbuf_with(ctx, &[pi, 1], Dtype::F32, &[-1.0; P])?;
            let hi = sbuf_with(ctx, &[pi, 1], Dtype::F32, &[1000.0; P])?;
            nisa::range_select(
                ctx,
                &dst("range_select", ctx, &full, Buffer::Sbuf)?,
                &tx,
                nl::greater,
                nl::less,
                &lo,
                &hi,
                RangeSelectOpts::default(),
            )?;
            nisa::memset(ctx, &dst("memset", ctx, &full, Buffer::Sbuf)?, 3.0 + 2f64.powi(-11), EngineOpts::default())?;
            nisa::iota(
                ctx,
                &dst("iota", ctx, &full, Buffer::Sbuf)?,
                &[[1, fi]],
                IotaOpts { offset: Some(2049), channel_multiplier: Some(fi), ..Default::default() },
            )?;
            nisa::dma_copy(ctx, &dst("dma_copy", ctx, &full, Buffer::Sbuf)?, &tx, Default::default())?;
            let reg = nisa::register_alloc(ctx, Some(2049))?;
            nisa::register_store(ctx, &dst("register_store", ctx, &[1, 1], Buffer::Sbuf)?, &reg)?;
            // Identity · x on the PE array into a 16-bit PSUM tile (trn3).
            let eye: Vec<f64> = (0..P * P).map(|i| if i % (P + 1) == 0 { 1.0 } else { 0.0 }).collect();
            let st = sbuf_with(ctx, &[pi, pi], Dtype::F32, &eye)?;
            if dtype == Dtype::Bf16 {
                nisa::nc_matmul(ctx, &dst("nc_matmul", ctx, &full, Buffer::Psum)?, &st, &tx, NcMatmulOpts::default())?;
            }
            let g = ReplicaGroup::new(vec![vec![0]]);
            let sum = dst("permute_reduce", ctx, &full, Buffer::Sbuf)?;
            collective_permute_implicit_reduce(
                ctx,
                &[vec![tx.clone()]],
                &[vec![ty.clone()]],
                &[vec![sum]],
                &g,
                nl::add,
                PermuteOpts::default(),
            )?;
            Ok(out.into_iter().map(|(n, t)| (n, t.to_f32_vec())).collect::<Vec<_>>())
        })
        .unwrap();
    let rows = |v: &[f64]| -> Vec<f64> { v.chunks(F).map(|c| c.iter().sum()).collect() };
    let zip = |f: fn(f64, f64) -> f64| -> Vec<f64> { x.iter().zip(&y).map(|(&a, &b)| f(a, b)).collect() };
    got.into_iter()
        .map(|(name, vals)| {
            let want = match name {
                "tensor_copy" | "tensor_scalar_reduce" | "affine_select" | "range_select" | "dma_copy" | "nc_matmul" => x.clone(),
                "tensor_tensor" | "permute_reduce" => zip(|a, b| a + b),
                "tensor_scalar" | "activation" => x.iter().map(|v| v * 2.0 + 0.25).collect(),
                "scalar_tensor_tensor" => zip(|a, b| a * 0.5 + b),
                "tensor_reduce" => rows(&x),
                "memset" => vec![3.0 + 2f64.powi(-11); P * F],
                "iota" => (0..P * F).map(|i| (2049 + i) as f64).collect(),
                "register_store" => vec![2049.0],
                other => panic!("no reference for {other}"),
            };
            (name, vals, want)
        })
        .collect()
}

#[test]
fn hardware_precision_rounds_every_write_like_half() {
    for (dtype, round) in [(Dtype::Bf16, bf16 as fn(f32) -> f32), (Dtype::F16, f16)] {
        let results = sweep(Precision::Hardware, dtype);
        assert_eq!(results.len(), if dtype == Dtype::Bf16 { 15 } else { 14 });
        for (name, got, want) in results {
            let exact: Vec<f32> = want.iter().map(|&v| v as f32).collect();
            assert!(exact.iter().zip(&want).all(|(&e, &w)| f64::from(e) == w), "{name}: reference not exact in fp32");
            assert!(exact.iter().any(|&v| round(v) != v), "{name}: the data must need rounding to {dtype}");
            let rounded: Vec<f32> = exact.iter().map(|&v| round(v)).collect();
            assert_eq!(got.len(), rounded.len(), "{name}");
            for (i, (g, w)) in got.iter().zip(&rounded).enumerate() {
                assert_eq!(g.to_bits(), w.to_bits(), "{name} into {dtype}, element {i}: got {g}, want {w}");
            }
        }
    }
}

#[test]
fn fp32_precision_keeps_fp32_values_in_narrow_tiles() {
    for dtype in [Dtype::Bf16, Dtype::F16] {
        for (name, got, want) in sweep(Precision::Fp32, dtype) {
            assert_close(&got, &want, 0.0, 0.0);
            assert!(!got.is_empty(), "{name}");
        }
    }
}

#[test]
fn inputs_are_rounded_to_their_dtype_in_both_models() {
    // Host-side tensors always hold values of their dtype; precision only affects kernel writes.
    let v = [1.0f32 + 2f32.powi(-9), 1000.1, -3.3];
    for precision in [Precision::Hardware, Precision::Fp32] {
        let got = launch(precision)
            .run(|ctx| {
                let t = Tensor::from_f32(&[1, 3], &v, Dtype::Bf16)?;
                let s = sbuf_with(ctx, &[1, 3], Dtype::F16, &v.map(f64::from))?;
                Ok((t.to_f32_vec(), s.to_f32_vec()))
            })
            .unwrap();
        assert_bits(&got.0, &v.map(bf16));
        assert_bits(&got.1, &v.map(f16));
    }
}
