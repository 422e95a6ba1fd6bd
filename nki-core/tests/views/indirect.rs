//! `NkiTensor.indirect` (tensor indirection, trn3): column i of the view is
//! free element `index[i % 16, i // 16]` of every partition. Read by a compute
//! engine (a gather) and written (a scatter), against index arithmetic on the
//! source; the documented constraints as errors.

use crate::common::{alloc, hbm};
use nki_core::hw::Generation;
use nki_core::isa::{self as nisa, EngineOpts};
use nki_core::{Buffer, Ctx, Dtype, Launch, Result, Tensor};

const P: usize = 16;
const F: usize = 8;

/// The `(P, 2)` offsets, row-major: distinct in the first four of column 0.
fn offsets() -> Vec<i64> {
    (0..2 * P as i64).map(|k| (k * 5 + 3) % F as i64).collect()
}

fn tiles(ctx: &Ctx) -> Result<(Tensor, Tensor, Vec<f32>)> {
    let x: Vec<f32> = (0..P * F).map(|k| k as f32 * 0.5 - 3.0).collect();
    let t = alloc(ctx, &[P as i64, F as i64], Dtype::F32, Buffer::Sbuf)?;
    t.fill_from_f32(&x)?;
    let ix = alloc(ctx, &[P as i64, 2], Dtype::I32, Buffer::Sbuf)?;
    nisa::dma_copy(ctx, &ix, &Tensor::from_i64(&[P, 2], &offsets(), Dtype::I32)?, Default::default())?;
    Ok((t, ix, x))
}

#[test]
fn a_gather_and_a_scatter_address_the_snake_offsets() {
    let trn3 = Launch::new().generation(Generation::Trn3);
    let (gathered, scattered, x) = trn3
        .run(|ctx| {
            let (t, ix, x) = tiles(ctx)?;
            let g = alloc(ctx, &[P as i64, 20], Dtype::F32, Buffer::Sbuf)?;
            nisa::tensor_copy(ctx, &g, &t.indirect(&ix, Some(20))?, EngineOpts::default())?;
            let u = alloc(ctx, &[P as i64, F as i64], Dtype::F32, Buffer::Sbuf)?;
            nisa::memset(ctx, &u, 0.0, EngineOpts::default())?;
            nisa::tensor_copy(ctx, &u.indirect(&ix, Some(4))?, &g.index(&nki_core::s![.., 0..4])?, EngineOpts::default())?;
            Ok((g.to_f32_vec(), u.to_f32_vec(), x))
        })
        .unwrap();
    let off = offsets();
    let col = |i: usize| off[(i % 16) * 2 + i / 16] as usize;
    let want_g: Vec<f32> = (0..P).flat_map(|p| (0..20).map(move |i| (p, i))).map(|(p, i)| x[p * F + col(i)]).collect();
    assert_eq!(gathered, want_g);
    let mut want_u = vec![0f32; P * F];
    for p in 0..P {
        for i in 0..4 {
            want_u[p * F + col(i)] = x[p * F + col(i)];
        }
    }
    assert_eq!(scattered, want_u);
}

#[test]
fn the_documented_constraints_are_errors() {
    let trn2 = Launch::new().run(|ctx| {
        let (t, ix, _) = tiles(ctx)?;
        Ok(nki_core::__rt::indirect(ctx, &t, &ix, None).unwrap_err().to_string())
    });
    let e = trn2.unwrap();
    assert!(e.contains("trn3") && e.contains("trn2"), "{e}");
    let errs = Launch::new()
        .generation(Generation::Trn3)
        .run(|ctx| {
            let (t, ix, _) = tiles(ctx)?;
            let too_many = t.indirect(&ix, Some(33)).unwrap_err().to_string();
            let h = hbm(&[P, F], &[0.0; P * F], Dtype::F32).indirect(&ix, None).unwrap_err().to_string();
            // An offset past the row, written after the view was made: the instruction fails.
            let v = t.indirect(&ix, Some(2))?;
            nisa::memset(ctx, &ix, 9.0, EngineOpts::default())?;
            let g = alloc(ctx, &[P as i64, 2], Dtype::F32, Buffer::Sbuf)?;
            let late = nisa::tensor_copy(ctx, &g, &v, EngineOpts::default()).unwrap_err().to_string();
            Ok((too_many, h, late))
        })
        .unwrap();
    assert!(errs.0.contains("num_elem 33"), "{}", errs.0);
    assert!(errs.1.contains("SBUF tensor"), "{}", errs.1);
    assert!(errs.2.contains("offset 9") && errs.2.contains("8 free elements"), "{}", errs.2);
}
