//! What a matmul may accumulate onto, per PSUM cell and per generation.
//!
//! The `nc_matmul` docs: accumulating (`accumulate=True`) onto PSUM that nothing
//! initialised is undefined behaviour on every target, and on NeuronCore-v2/-v3
//! (trn1, trn2) so is a matmul accumulating onto PSUM values a non-matmul
//! instruction such as `memset` or `tensor_copy` wrote. The emulator reports both
//! as errors naming the op, the tensor, the cells and the instruction that wrote
//! them. `accumulate=None` lets the compiler infer the flag ("first write
//! overwrites, subsequent writes accumulate"): it adds onto every cell any write
//! touched since allocation, a memset's included, on every generation — the NKI
//! library's `attention_bwd` zeroes its dQ tile that way.

use crate::common::*;
use nki_core::hw::Generation;
use nki_core::isa::{self as nisa, EngineOpts, NcMatmulOpts, NcTransposeOpts, engine};
use nki_core::nl::{self, NdarrayOpts};
use nki_core::{Buffer, Ctx, Dtype, ErrorKind, Launch, Result, Tensor, s};

const K: usize = 8;
const M: usize = 4;
const N: usize = 6;

/// `Σ_k st[k, m] · mv[k, n]` in f64, row-major `M×N`.
fn reference(st: &[f64], mv: &[f64], n: usize) -> Vec<f64> {
    (0..M * n).map(|i| (0..K).map(|p| st[p * M + i / n] * mv[p * n + i % n]).sum()).collect()
}

/// Dyadic operands, so every sum below is exact in f32.
struct Operands {
    st: Vec<f64>,
    mv: Vec<f64>,
    /// `stᵀ·mv`, `M×N`.
    product: Vec<f64>,
}

fn operands(seed: u64) -> Operands {
    let (st, mv) = (dyadic(K * M, seed, -2.0, 2.0, 3), dyadic(K * N, seed + 1, -2.0, 2.0, 3));
    let product = reference(&st, &mv, N);
    Operands { st, mv, product }
}

fn named_psum(ctx: &Ctx, name: &str, cols: usize) -> Result<Tensor> {
    nl::ndarray(
        ctx,
        &[M as i64, cols as i64],
        Dtype::F32,
        NdarrayOpts { buffer: Some(Buffer::Psum), name: Some(name), ..Default::default() },
    )
}

/// Runs `nc_matmul(dst, st, mv, accumulate)` with `st` (`K×M`) and `mv` (`K×n`) loaded into SBUF.
fn mm(ctx: &Ctx, dst: &Tensor, st: &[f64], mv: &[f64], accumulate: Option<bool>) -> Result<()> {
    let st = sbuf_with(ctx, &[K as i64, M as i64], Dtype::F32, st)?;
    let mv = sbuf_with(ctx, &[K as i64, (mv.len() / K) as i64], Dtype::F32, mv)?;
    nisa::nc_matmul(ctx, dst, &st, &mv, NcMatmulOpts { accumulate, ..Default::default() })
}

fn matmul(ctx: &Ctx, dst: &Tensor, x: &Operands, accumulate: Option<bool>) -> Result<()> {
    mm(ctx, dst, &x.st, &x.mv, accumulate)
}

fn on(g: Generation) -> Launch {
    Launch::new().generation(g)
}

/// The two ways a non-matmul value gets into PSUM in kernels: a memset (the dQ
/// partial of the library's attention backward) and a copy (a bias pre-loaded
/// into PSUM), each followed by a matmul accumulating with `accumulate`.
fn init_then_accumulate(ctx: &Ctx, x: &Operands, by_copy: bool, accumulate: Option<bool>) -> Result<Vec<f32>> {
    let ps = named_psum(ctx, "dq_psum", N)?;
    if by_copy {
        let bias = sbuf_with(ctx, &[M as i64, N as i64], Dtype::F32, &[0.25; M * N])?;
        nisa::tensor_copy(ctx, &ps, &bias, EngineOpts::default())?;
    } else {
        nisa::memset(ctx, &ps, 0.25, EngineOpts::default())?;
    }
    matmul(ctx, &ps, x, accumulate)?;
    Ok(ps.to_f32_vec())
}

#[test]
fn explicit_accumulation_onto_memset_or_copied_psum_is_an_error_on_trn1_and_trn2() {
    let x = operands(1);
    for g in [Generation::Trn1, Generation::Trn2] {
        for (by_copy, writer) in [(false, "nisa.memset"), (true, "nisa.tensor_copy")] {
            let e = expect_err(on(g).run(|ctx| init_then_accumulate(ctx, &x, by_copy, Some(true))));
            assert_err(
                &e,
                ErrorKind::Constraint,
                &[
                    "nisa.nc_matmul",
                    "accumulate=True adds onto 'dq_psum' [4, 6] float32 in PSUM",
                    &format!("{} of its {} elements (the first at [0, 0]) were last written by {writer}, not by a matmul", M * N, M * N),
                    &format!("on {g} a matmul accumulating onto PSUM that a non-matmul instruction initialised is undefined behaviour"),
                    "allowed only on trn3",
                ],
            );
        }
    }
}

#[test]
fn default_accumulation_adds_onto_a_memset_or_copy_on_every_generation() {
    let x = operands(2);
    let want: Vec<f64> = x.product.iter().map(|v| v + 0.25).collect();
    for g in Generation::ALL {
        for by_copy in [false, true] {
            let got = on(g).run(|ctx| init_then_accumulate(ctx, &x, by_copy, None)).unwrap();
            assert_close(&got, &want, 0.0, 0.0);
        }
    }
    // The library's pattern: zero the tile, then accumulate default matmuls onto it.
    let (a, b) = (operands(4), operands(6));
    let sum: Vec<f64> = a.product.iter().zip(&b.product).map(|(p, q)| p + q).collect();
    let got = on(Generation::Trn2)
        .run(|ctx| {
            let ps = named_psum(ctx, "dq_psum", N)?;
            nisa::memset(ctx, &ps, 0.0, EngineOpts::default())?;
            matmul(ctx, &ps, &a, None)?;
            matmul(ctx, &ps, &b, None)?;
            Ok(ps.to_f32_vec())
        })
        .unwrap();
    assert_close(&got, &sum, 0.0, 0.0);
}

#[test]
fn trn3_accumulates_onto_memset_and_copied_psum() {
    let x = operands(3);
    let want: Vec<f64> = x.product.iter().map(|v| v + 0.25).collect();
    for by_copy in [false, true] {
        let got = on(Generation::Trn3).run(|ctx| init_then_accumulate(ctx, &x, by_copy, Some(true))).unwrap();
        assert_close(&got, &want, 0.0, 0.0);
    }
}

#[test]
fn matmul_initialised_accumulation_is_accepted_everywhere() {
    let (a, b) = (operands(5), operands(7));
    let sum: Vec<f64> = a.product.iter().zip(&b.product).map(|(p, q)| p + q).collect();
    for g in Generation::ALL {
        let got = on(g)
            .run(|ctx| {
                let ps = named_psum(ctx, "acc", N)?;
                matmul(ctx, &ps, &a, None)?; // fresh: overwrites
                matmul(ctx, &ps, &b, None)?; // matmul-written: adds
                let none = ps.to_f32_vec();
                matmul(ctx, &ps, &a, Some(false))?;
                matmul(ctx, &ps, &b, Some(true))?;
                Ok((none, ps.to_f32_vec()))
            })
            .unwrap();
        assert_close(&got.0, &sum, 0.0, 0.0);
        assert_close(&got.1, &sum, 0.0, 0.0);
    }
}

/// The rule is per cell: a memset of some columns only matters to an explicitly
/// accumulating matmul whose destination covers them, and an overwriting matmul
/// makes them matmul-initialised.
#[test]
fn the_rule_is_per_cell() {
    let (a, b) = (operands(9), operands(11));
    // b's moving operand twice side by side (row-major K×2N).
    let wide: Vec<f64> = (0..K * 2 * N).map(|i| b.mv[(i / (2 * N)) * N + i % N]).collect();
    let got = on(Generation::Trn2)
        .run(|ctx| {
            let ps = named_psum(ctx, "part", 2 * N)?;
            nisa::memset(ctx, &ps.index(&s![.., 0..2])?, 0.0, EngineOpts::default())?;
            // Columns N..2N are untouched by the memset: accumulating there is fine.
            matmul(ctx, &ps.index(&s![.., N..2 * N])?, &a, None)?;
            matmul(ctx, &ps.index(&s![.., N..2 * N])?, &b, Some(true))?;
            // Columns 2..N get a matmul; columns 0..N and the whole tile then overlap
            // the memset in 2 columns.
            let a_right: Vec<f64> = (0..K * (N - 2)).map(|i| a.mv[(i / (N - 2)) * N + 2 + i % (N - 2)]).collect();
            mm(ctx, &ps.index(&s![.., 2..N])?, &a.st, &a_right, Some(false))?;
            let e = expect_err(matmul(ctx, &ps.index(&s![.., 0..N])?, &a, Some(true)));
            assert_err(
                &e,
                ErrorKind::Constraint,
                &["'part' [4, 6]", "8 of its 24 elements (the first at [0, 0]) were last written by nisa.memset"],
            );
            let e = expect_err(mm(ctx, &ps, &b.st, &wide, Some(true)));
            assert_err(&e, ErrorKind::Constraint, &["'part' [4, 12]", "8 of its 48 elements"]);
            // The rejected matmuls wrote nothing: columns N..2N still hold a + b.
            let right = ps.index(&s![.., N..2 * N])?.to_f32_vec();
            // accumulate=False re-initialises the memset cells by a matmul; then anything goes.
            matmul(ctx, &ps.index(&s![.., 0..N])?, &a, Some(false))?;
            matmul(ctx, &ps.index(&s![.., 0..N])?, &b, Some(true))?;
            mm(ctx, &ps, &b.st, &wide, Some(true))?;
            Ok((right, ps.to_f32_vec()))
        })
        .unwrap();
    let ab: Vec<f64> = a.product.iter().zip(&b.product).map(|(p, q)| p + q).collect();
    assert_close(&got.0, &ab, 0.0, 0.0);
    // Finally every cell holds a + b from its half plus b from the wide matmul.
    let want: Vec<f64> = (0..M * 2 * N).map(|i| ab[(i / (2 * N)) * N + i % N] + b.product[(i / (2 * N)) * N + i % N]).collect();
    assert_close(&got.1, &want, 0.0, 0.0);
}

/// A transpose is a matmul only on the Tensor Engine.
#[test]
fn a_vector_engine_transpose_into_psum_is_a_non_matmul_write() {
    let x = operands(13);
    let e = expect_err(on(Generation::Trn2).run(|ctx| {
        let src = sbuf_with(ctx, &[N as i64, M as i64], Dtype::F32, &x.product)?;
        let ps = named_psum(ctx, "flipped", N)?;
        nisa::nc_transpose(ctx, &ps, &src, NcTransposeOpts { engine: Some(engine::vector), ..Default::default() })?;
        matmul(ctx, &ps, &x, Some(true))
    }));
    assert_err(&e, ErrorKind::Constraint, &["'flipped'", "last written by nisa.nc_transpose, not by a matmul"]);
}

#[test]
fn accumulate_true_onto_unwritten_psum_is_an_error_on_every_generation() {
    let x = operands(15);
    for g in Generation::ALL {
        let e = expect_err(on(g).run(|ctx| {
            let ps = named_psum(ctx, "fresh", N)?;
            // Only the left half gets a matmul.
            let half: Vec<f64> = (0..K * N / 2).map(|i| x.mv[(i / (N / 2)) * N + i % (N / 2)]).collect();
            mm(ctx, &ps.index(&s![.., 0..N / 2])?, &x.st, &half, None)?;
            matmul(ctx, &ps, &x, Some(true))
        }));
        assert_err(
            &e,
            ErrorKind::Constraint,
            &[
                "nisa.nc_matmul",
                "accumulate=True adds onto 'fresh' [4, 6] float32 in PSUM",
                "12 of its 24 elements (the first at [0, 3]) hold nothing written since allocation",
                "undefined behaviour on every generation",
            ],
        );
    }
}
