//! The random-number instructions against an XORWOW written here from
//! Marsaglia's "Xorshift RNGs" (2003) and SplitMix64 from Steele, Lea and Flood
//! (2014): exact draws from a given or seeded state, the documented dtype
//! truncation, uniform and dropout statistics, and the documented refusals.

use crate::common::xorwow::*;

use crate::common::*;
use nki_core::hw::Generation;
use nki_core::isa::{self as nisa, DmaCopyOpts, EngineOpts, NameOpts, Operand};
use nki_core::{Buffer, Ctx, Dtype, ErrorKind, Launch, Precision, Result, Tensor};

fn on(generation: Generation, precision: Precision) -> Launch {
    Launch::new().generation(generation).precision(precision)
}

/// An SBUF uint32 tile holding exact `words` (through HBM and a DMA).
fn u32_tile(ctx: &Ctx, np: usize, nf: usize, words: &[u32]) -> Result<Tensor> {
    let h = Tensor::from_i64(&[np, nf], &words.iter().map(|&w| i64::from(w)).collect::<Vec<_>>(), Dtype::U32)?;
    let t = alloc(ctx, &[np as i64, nf as i64], Dtype::U32, Buffer::Sbuf)?;
    nisa::dma_copy(ctx, &t, &h, DmaCopyOpts::default())?;
    Ok(t)
}

fn vector() -> EngineOpts<'static> {
    EngineOpts { engine: Some(nisa::Engine::Vector), name: None }
}

fn gpsimd() -> EngineOpts<'static> {
    EngineOpts { engine: Some(nisa::Engine::Gpsimd), name: None }
}

#[test]
fn splitmix64_of_zero_is_the_published_first_output() {
    // Vigna's reference splitmix64.c seeded with 0 yields 0xe220a8397b1dcdaf first.
    assert_eq!(splitmix64(0), 0xe220_a839_7b1d_cdaf);
}

#[test]
fn rng_draws_marsaglias_xorwow_from_a_set_state_on_both_engines() {
    // Marsaglia's initial values, varied per lane and generator.
    let paper = [123_456_789u32, 362_436_069, 521_288_629, 88_675_123, 5_783_321, 6_615_241];
    let (np, nf) = (8usize, 37usize);
    for (engine, streams, opts) in [("vector", 4usize, vector()), ("gpsimd", 1, gpsimd())] {
        let mut gens: Vec<Vec<Xorwow>> = (0..np)
            .map(|p| (0..streams).map(|g| Xorwow(paper.map(|w| w ^ ((p * 4 + g) as u32).wrapping_mul(0x9e37_79b9)))).collect())
            .collect();
        let state: Vec<u32> = gens.iter().flat_map(|l| l.iter().flat_map(|g| g.0)).collect();
        let got = on(Generation::Trn3, Precision::Fp32)
            .run(|ctx| {
                let s = u32_tile(ctx, np, 6 * streams, &state)?;
                nisa::rand_set_state(ctx, &s, opts)?;
                let d = alloc(ctx, &[np as i64, nf as i64], Dtype::U32, Buffer::Sbuf)?;
                nisa::rng(ctx, &d, opts)?;
                // The state read back is the generators after the draws.
                let after = alloc(ctx, &[np as i64, 6 * streams as i64], Dtype::U32, Buffer::Sbuf)?;
                nisa::rand_get_state(ctx, &after, opts)?;
                Ok((d.to_i64_vec(), after.to_i64_vec()))
            })
            .unwrap();
        let want: Vec<i64> = draws(&mut gens, nf).into_iter().map(i64::from).collect();
        assert_eq!(got.0, want, "{engine} draws");
        let after: Vec<i64> = gens.iter().flat_map(|l| l.iter().flat_map(|g| g.0.map(i64::from))).collect();
        assert_eq!(got.1, after, "{engine} state after the draws");
    }
}

#[test]
fn programs_start_from_seed_zero_and_set_rng_seed_reseeds_the_vector_lanes() {
    let (np, nf) = (128usize, 10usize);
    for seed in [None, Some(0u32), Some(7), Some(0xdead_beef)] {
        let got = on(Generation::Trn2, Precision::Fp32)
            .run(|ctx| {
                if let Some(s) = seed {
                    let t = u32_tile(ctx, 1, 1, &[s])?;
                    nisa::set_rng_seed(ctx, &t, NameOpts::default())?;
                }
                let d = alloc(ctx, &[np as i64, nf as i64], Dtype::U32, Buffer::Sbuf)?;
                nisa::rng(ctx, &d, EngineOpts::default())?;
                let g = alloc(ctx, &[np as i64, 6], Dtype::U32, Buffer::Sbuf)?;
                nisa::rand_get_state(ctx, &g, EngineOpts::default())?;
                Ok((d.to_i64_vec(), g.to_i64_vec()))
            })
            .unwrap();
        let want: Vec<i64> = draws(&mut seeded_lanes(seed.unwrap_or(0), np, 4), nf).into_iter().map(i64::from).collect();
        assert_eq!(got.0, want, "vector draws after seed {seed:?}");
        // The GpSimd lanes keep their launch seed 0: set_rng_seed is the Vector engine's.
        let gp: Vec<i64> = seeded_lanes(0, np, 1).iter().flat_map(|l| l[0].0.map(i64::from)).collect();
        assert_eq!(got.1, gp);
    }
}

#[test]
fn a_float32_seed_uses_its_bit_pattern() {
    let got = on(Generation::Trn2, Precision::Fp32)
        .run(|ctx| {
            let t = sbuf_with(ctx, &[1, 1], Dtype::F32, &[1.5])?;
            nisa::set_rng_seed(ctx, &t, NameOpts::default())?;
            let d = alloc(ctx, &[2, 4], Dtype::U32, Buffer::Sbuf)?;
            nisa::rng(ctx, &d, EngineOpts::default())?;
            Ok(d.to_i64_vec())
        })
        .unwrap();
    let want: Vec<i64> = draws(&mut seeded_lanes(1.5f32.to_bits(), 2, 4), 4).into_iter().map(i64::from).collect();
    assert_eq!(got, want);
}

#[test]
fn rng_keeps_the_low_bits_its_dtype_holds() {
    let (np, nf) = (4usize, 9usize);
    let bits = draws(&mut seeded_lanes(0, np, 4), nf);
    for dtype in [Dtype::I8, Dtype::U8, Dtype::I16, Dtype::U16, Dtype::I32, Dtype::U32] {
        let got = on(Generation::Trn1, Precision::Hardware)
            .run(|ctx| {
                let d = alloc(ctx, &[np as i64, nf as i64], dtype, Buffer::Psum)?;
                nisa::rng(ctx, &d, EngineOpts::default())?;
                Ok(d.to_i64_vec())
            })
            .unwrap();
        let want: Vec<i64> = bits
            .iter()
            .map(|&b| match dtype {
                Dtype::I8 => i64::from(b as u8 as i8),
                Dtype::U8 => i64::from(b & 0xff),
                Dtype::I16 => i64::from(b as u16 as i16),
                Dtype::U16 => i64::from(b & 0xffff),
                Dtype::I32 => i64::from(b as i32),
                _ => i64::from(b),
            })
            .collect();
        assert_eq!(got, want, "{dtype}");
    }
}

#[test]
fn rng_on_a_partition_slice_draws_from_those_lanes() {
    let got = on(Generation::Trn2, Precision::Fp32)
        .run(|ctx| {
            let d = alloc(ctx, &[16, 5], Dtype::U32, Buffer::Sbuf)?;
            nisa::rng(ctx, &d.slice(0, 4, 12, 1)?, gpsimd())?;
            Ok(d.index(&[nki_core::Idx::ds(4, 8), nki_core::Idx::Full])?.to_i64_vec())
        })
        .unwrap();
    // Partition 4 + r of the slice draws from GpSimd lane 4 + r.
    let mut gens: Vec<Vec<Xorwow>> = (4..12).map(|p| vec![seeded(0, p, 0)]).collect();
    let want: Vec<i64> = draws(&mut gens, 5).into_iter().map(i64::from).collect();
    assert_eq!(got, want);
}

/// Mean and variance of `xs`.
fn moments(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    (mean, xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n)
}

#[test]
fn rand2_is_uniform_in_its_range_with_scalar_and_column_bounds() {
    // 128 x 512 = 65536 draws: the sample mean of U(lo, hi) has standard deviation
    // (hi - lo) / sqrt(12 n) ~ 0.00113 (hi - lo); allow 5 of them. The variance
    // (hi - lo)^2 / 12 is checked to 2 %.
    let (np, nf) = (128usize, 512usize);
    let (lo, hi) = (-3.0, 5.0);
    let got = on(Generation::Trn3, Precision::Fp32)
        .run(|ctx| {
            let d = alloc(ctx, &[np as i64, nf as i64], Dtype::F32, Buffer::Sbuf)?;
            nisa::rand2(ctx, &d, Operand::Scalar(lo), Operand::Scalar(hi), NameOpts::default())?;
            Ok(d.to_f32_vec())
        })
        .unwrap();
    let xs: Vec<f64> = got.iter().map(|&v| f64::from(v)).collect();
    assert!(xs.iter().all(|&x| (lo..hi).contains(&x)), "a draw outside [{lo}, {hi})");
    let (mean, var) = moments(&xs);
    let w = hi - lo;
    assert!((mean - (lo + hi) / 2.0).abs() < 5.0 * w / (12.0 * (np * nf) as f64).sqrt(), "mean {mean}");
    assert!((var / (w * w / 12.0) - 1.0).abs() < 0.02, "variance {var}");
    // Exactly min + u (max - min) of the documented draws (float32 arithmetic, within an ulp).
    let want: Vec<f64> = draws(&mut seeded_lanes(0, np, 4), nf).into_iter().map(|b| lo + uniform01(b) * w).collect();
    assert_close(&got, &want, 1e-6, 1e-6);

    // Per-partition bounds, rounded to bfloat16 in hardware precision.
    let los: Vec<f64> = (0..np).map(|p| p as f64).collect();
    let his: Vec<f64> = (0..np).map(|p| p as f64 + 1.0 + p as f64 / 4.0).collect();
    for precision in [Precision::Fp32, Precision::Hardware] {
        let got = on(Generation::Trn3, precision)
            .run(|ctx| {
                let (a, b) = (sbuf_with(ctx, &[np as i64, 1], Dtype::F32, &los)?, sbuf_with(ctx, &[np as i64, 1], Dtype::F32, &his)?);
                let d = alloc(ctx, &[np as i64, 64], Dtype::Bf16, Buffer::Psum)?;
                nisa::rand2(ctx, &d, Operand::Tensor(&a), Operand::Tensor(&b), NameOpts::default())?;
                Ok(d.to_f32_vec())
            })
            .unwrap();
        let bits = draws(&mut seeded_lanes(0, np, 4), 64);
        let want: Vec<f64> = bits
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                let p = i / 64;
                let v = los[p] + uniform01(b) * (his[p] - los[p]);
                if precision == Precision::Hardware { f64::from(bf16(v as f32)) } else { v }
            })
            .collect();
        let rtol = if precision == Precision::Hardware { 2f64.powi(-8) } else { 1e-6 };
        assert_close(&got, &want, rtol, 1e-6);
    }
}

#[test]
fn dropout_zeroes_where_the_draw_is_below_prob_and_keeps_values_unscaled() {
    // 65536 elements at keep probability 0.7: the keep-rate's standard deviation is
    // sqrt(0.21 / n) ~ 0.0018; allow 5 of them.
    let (np, nf) = (128usize, 512usize);
    let x: Vec<f64> = uniform(np * nf, 11, 0.5, 4.0);
    for (precision, dtype) in [(Precision::Fp32, Dtype::F32), (Precision::Hardware, Dtype::Bf16)] {
        let got = on(Generation::Trn2, precision)
            .run(|ctx| {
                let t = sbuf_with(ctx, &[np as i64, nf as i64], dtype, &x)?;
                let d = alloc(ctx, &[np as i64, nf as i64], dtype, Buffer::Sbuf)?;
                nisa::dropout(ctx, &d, &t, Operand::Scalar(0.3), NameOpts::default())?;
                Ok((t.to_f32_vec(), d.to_f32_vec()))
            })
            .unwrap();
        let keep: Vec<bool> = draws(&mut seeded_lanes(0, np, 4), nf).into_iter().map(|b| uniform01(b) >= f64::from(0.3f32)).collect();
        let want: Vec<f64> = got.0.iter().zip(&keep).map(|(&v, &k)| if k { f64::from(v) } else { 0.0 }).collect();
        assert_close(&got.1, &want, 0.0, 0.0);
        let rate = keep.iter().filter(|&&k| k).count() as f64 / (np * nf) as f64;
        assert!((rate - 0.7).abs() < 5.0 * (0.21 / (np * nf) as f64).sqrt(), "keep rate {rate}");
    }
}

#[test]
fn dropout_per_partition_probabilities_and_integer_data() {
    let (np, nf) = (4usize, 64usize);
    let probs = [0.0, 1.0, 0.5, 0.25];
    let x: Vec<f64> = (0..np * nf).map(|i| i as f64 - 100.0).collect();
    let got = on(Generation::Trn2, Precision::Hardware)
        .run(|ctx| {
            let t = sbuf_with(ctx, &[np as i64, nf as i64], Dtype::I32, &x)?;
            let p = sbuf_with(ctx, &[np as i64, 1], Dtype::F32, &probs)?;
            let d = alloc(ctx, &[np as i64, nf as i64], Dtype::I32, Buffer::Sbuf)?;
            nisa::dropout(ctx, &d, &t, Operand::Tensor(&p), NameOpts::default())?;
            Ok(d.to_f32_vec())
        })
        .unwrap();
    let bits = draws(&mut seeded_lanes(0, np, 4), nf);
    let want: Vec<f64> = x.iter().enumerate().map(|(i, &v)| if uniform01(bits[i]) >= probs[i / nf] { v } else { 0.0 }).collect();
    assert_close(&got, &want, 0.0, 0.0);
    // prob 0 keeps the whole row, prob 1 drops it.
    assert!(got[..nf].iter().zip(&x).all(|(&g, &v)| f64::from(g) == v));
    assert!(got[nf..2 * nf].iter().all(|&g| g == 0.0));
}

#[test]
fn consecutive_instructions_continue_the_sequence() {
    let got = on(Generation::Trn3, Precision::Fp32)
        .run(|ctx| {
            let a = alloc(ctx, &[2, 3], Dtype::U32, Buffer::Sbuf)?;
            let b = alloc(ctx, &[2, 5], Dtype::U32, Buffer::Sbuf)?;
            nisa::rng(ctx, &a, EngineOpts::default())?;
            nisa::rng(ctx, &b, EngineOpts::default())?;
            Ok([a.to_i64_vec(), b.to_i64_vec()].concat())
        })
        .unwrap();
    let mut gens = seeded_lanes(0, 2, 4);
    // Element j of each instruction's row uses generator j % 4, so the second
    // instruction starts again at generator 0.
    let (a, b) = (draws(&mut gens, 3), draws(&mut gens, 5));
    let want: Vec<i64> = a.into_iter().chain(b).map(i64::from).collect();
    assert_eq!(got, want);
}

#[test]
fn refuses_documented_violations() {
    let run = |generation: Generation, f: &(dyn Fn(&Ctx) -> Result<()> + Sync)| expect_err(on(generation, Precision::Fp32).run(f));
    let e = run(Generation::Trn2, &|ctx| nisa::rng(ctx, &alloc(ctx, &[4, 4], Dtype::F32, Buffer::Sbuf)?, EngineOpts::default()));
    assert_err(&e, ErrorKind::Dtype, &["nisa.rng", "integer dtype"]);
    let e = run(Generation::Trn1, &|ctx| nisa::rng(ctx, &alloc(ctx, &[4, 4], Dtype::U32, Buffer::Sbuf)?, gpsimd()));
    assert_err(&e, ErrorKind::Constraint, &["gpsimd", "trn2", "trn1"]);
    let e = run(Generation::Trn2, &|ctx| nisa::rng(ctx, &alloc(ctx, &[4, 4], Dtype::U32, Buffer::Psum)?, gpsimd()));
    assert_err(&e, ErrorKind::Constraint, &["PSUM", "GpSimd"]);
    let scalar = EngineOpts { engine: Some(nisa::Engine::Scalar), name: None };
    let e = run(Generation::Trn2, &|ctx| nisa::rng(ctx, &alloc(ctx, &[4, 4], Dtype::U32, Buffer::Sbuf)?, scalar));
    assert_err(&e, ErrorKind::Argument, &["engine", "scalar"]);
    let e = run(Generation::Trn2, &|ctx| {
        nisa::rand2(ctx, &alloc(ctx, &[4, 4], Dtype::F32, Buffer::Sbuf)?, 0.0.into(), 1.0.into(), NameOpts::default())
    });
    assert_err(&e, ErrorKind::Constraint, &["nisa.rand2", "trn3"]);
    let e = run(Generation::Trn3, &|ctx| {
        nisa::rand2(ctx, &alloc(ctx, &[4, 4], Dtype::F32, Buffer::Sbuf)?, 2.0.into(), 2.0.into(), NameOpts::default())
    });
    assert_err(&e, ErrorKind::Argument, &["min", "less than max"]);
    let e = run(Generation::Trn2, &|ctx| nisa::rand_get_state(ctx, &alloc(ctx, &[4, 24], Dtype::U32, Buffer::Sbuf)?, vector()));
    assert_err(&e, ErrorKind::Constraint, &["vector", "trn3"]);
    let e = run(Generation::Trn3, &|ctx| nisa::rand_get_state(ctx, &alloc(ctx, &[4, 6], Dtype::U32, Buffer::Sbuf)?, vector()));
    assert_err(&e, ErrorKind::Shape, &["24 elements", "vector"]);
    let e = run(Generation::Trn2, &|ctx| nisa::rand_get_state(ctx, &alloc(ctx, &[4, 6], Dtype::I32, Buffer::Sbuf)?, EngineOpts::default()));
    assert_err(&e, ErrorKind::Shape, &["uint32"]);
    let e = run(Generation::Trn3, &|ctx| nisa::rand_set_state(ctx, &alloc(ctx, &[4, 24], Dtype::U32, Buffer::Psum)?, vector()));
    assert_err(&e, ErrorKind::Constraint, &["src_seeds", "SBUF"]);
    let e = run(Generation::Trn2, &|ctx| nisa::set_rng_seed(ctx, &alloc(ctx, &[1, 2], Dtype::U32, Buffer::Sbuf)?, NameOpts::default()));
    assert_err(&e, ErrorKind::Shape, &["[1, 1]"]);
    let e = run(Generation::Trn2, &|ctx| nisa::set_rng_seed(ctx, &alloc(ctx, &[1, 1], Dtype::Bf16, Buffer::Sbuf)?, NameOpts::default()));
    assert_err(&e, ErrorKind::Shape, &["32-bit"]);
    let e = run(Generation::Trn2, &|ctx| {
        let x = alloc(ctx, &[4, 4], Dtype::F32, Buffer::Sbuf)?;
        nisa::dropout(ctx, &alloc(ctx, &[4, 4], Dtype::Bf16, Buffer::Sbuf)?, &x, 0.5.into(), NameOpts::default())
    });
    assert_err(&e, ErrorKind::Dtype, &["dst", "float32"]);
    let e = run(Generation::Trn2, &|ctx| {
        let x = alloc(ctx, &[4, 4], Dtype::F32, Buffer::Sbuf)?;
        let p = alloc(ctx, &[4, 2], Dtype::F32, Buffer::Sbuf)?;
        nisa::dropout(ctx, &alloc(ctx, &[4, 4], Dtype::F32, Buffer::Sbuf)?, &x, Operand::Tensor(&p), NameOpts::default())
    });
    assert_err(&e, ErrorKind::Shape, &["prob", "(4, 1) column"]);
    let e = run(Generation::Trn2, &|ctx| {
        let x = alloc(ctx, &[4, 4], Dtype::I32, Buffer::Sbuf)?;
        let p = alloc(ctx, &[4, 1], Dtype::Bf16, Buffer::Sbuf)?;
        nisa::dropout(ctx, &alloc(ctx, &[4, 4], Dtype::I32, Buffer::Sbuf)?, &x, Operand::Tensor(&p), NameOpts::default())
    });
    assert_err(&e, ErrorKind::Dtype, &["prob", "float32", "integer"]);
}

#[test]
fn every_program_of_every_rank_has_its_own_generators() {
    // Program 1 of rank 1 reseeds with 9 before drawing; the others keep seed 0,
    // whatever the order the programs run in.
    let report = on(Generation::Trn2, Precision::Fp32)
        .ranks(2)
        .lnc(2)
        .run_all(|ctx| {
            if (ctx.rank(), ctx.program_id()) == (1, 1) {
                nisa::set_rng_seed(ctx, &u32_tile(ctx, 1, 1, &[9])?, NameOpts::default())?;
            }
            let d = alloc(ctx, &[4, 6], Dtype::U32, Buffer::Sbuf)?;
            nisa::rng(ctx, &d, EngineOpts::default())?;
            Ok(d.to_i64_vec())
        })
        .unwrap();
    for (rank, programs) in report.results.iter().enumerate() {
        for (program, got) in programs.iter().enumerate() {
            let seed = if (rank, program) == (1, 1) { 9 } else { 0 };
            let want: Vec<i64> = draws(&mut seeded_lanes(seed, 4, 4), 6).into_iter().map(i64::from).collect();
            assert_eq!(got, &want, "rank {rank} program {program}");
        }
    }
}
