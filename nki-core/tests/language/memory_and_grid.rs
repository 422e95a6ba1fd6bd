//! `nl`: `ndarray` limits, per-program on-chip memory, shared vs private HBM across
//! LNC programs and ranks, and the SPMD grid queries.

use crate::common::*;
use nki_core::hw::Generation;
use nki_core::isa::{self as nisa, CoreBarrierOpts, EngineOpts};
use nki_core::nl::{self, NdarrayOpts};
use nki_core::{Buffer, Dtype, ErrorKind, Launch, s};

#[test]
fn partition_dim_and_psum_size_limits() {
    Launch::new()
        .run(|ctx| {
            let e = expect_err(alloc(ctx, &[129, 4], Dtype::F32, Buffer::Sbuf));
            assert_err(&e, ErrorKind::Constraint, &["nl.ndarray", "partition dim 129", "pmax 128"]);
            let e = expect_err(alloc(ctx, &[129, 4], Dtype::F32, Buffer::Psum));
            assert_err(&e, ErrorKind::Constraint, &["partition dim 129"]);
            // HBM has no partition dim.
            alloc(ctx, &[129, 4], Dtype::F32, Buffer::PrivateHbm)?;
            // A PSUM tensor may span banks, up to all 8 of 2 KiB per partition:
            // 4096 fp32 or 8192 bf16.
            drop(alloc(ctx, &[128, 4096], Dtype::F32, Buffer::Psum)?);
            drop(alloc(ctx, &[128, 8192], Dtype::Bf16, Buffer::Psum)?);
            drop(alloc(ctx, &[128, 4, 1024], Dtype::F32, Buffer::Psum)?);
            let e = expect_err(alloc(ctx, &[128, 4097], Dtype::F32, Buffer::Psum));
            assert_err(&e, ErrorKind::Constraint, &["nl.ndarray", "16388 B", "8 banks of 2048 B", "trn2"]);
            let e = expect_err(alloc(ctx, &[1, 3, 2000], Dtype::F32, Buffer::Psum));
            assert_err(&e, ErrorKind::Constraint, &["24000 B"]);
            let e = expect_err(alloc(ctx, &[4, 0], Dtype::F32, Buffer::Sbuf));
            assert_eq!(e.kind, ErrorKind::Shape);
            let e = expect_err(alloc(ctx, &[], Dtype::F32, Buffer::Sbuf));
            assert_eq!(e.kind, ErrorKind::Shape);
            Ok(())
        })
        .unwrap();
}

#[test]
fn fresh_tensors_read_as_zero_bits_and_names_show_in_errors() {
    Launch::new()
        .run(|ctx| {
            let t = alloc(ctx, &[2, 3], Dtype::Bf16, Buffer::Sbuf)?;
            assert!(t.to_f32_vec().iter().all(|v| v.to_bits() == 0));
            let named = nl::ndarray(ctx, &[200, 2], Dtype::F32, NdarrayOpts { name: Some("scores"), ..Default::default() });
            assert_err(&expect_err(named), ErrorKind::Constraint, &["'scores'"]);
            let var = nl::ndarray(ctx, &[200, 2], Dtype::F32, NdarrayOpts { var: Some("acc"), ..Default::default() });
            assert_err(&expect_err(var), ErrorKind::Constraint, &["'acc'"]);
            Ok(())
        })
        .unwrap();
}

#[test]
fn each_program_has_its_own_on_chip_capacity() {
    let report = Launch::new()
        .lnc(2)
        .run_all(|ctx| {
            // A tile takes its bytes once an instruction touches it.
            let all = alloc(ctx, &[128, 224 * 256], Dtype::F32, Buffer::Sbuf)?;
            nisa::memset(ctx, &all, 0.0, EngineOpts::default())
        })
        .unwrap();
    assert_eq!(report.memory[0].len(), 2);
    assert!(report.memory[0].iter().all(|m| m.sbuf_peak == 224 * 1024));
}

#[test]
fn shared_hbm_is_one_tensor_per_rank_private_hbm_one_per_program() {
    let report = Launch::new()
        .lnc(2)
        .ranks(2)
        .run_all(|ctx| {
            let shared = alloc(ctx, &[2, 3], Dtype::F32, Buffer::SharedHbm)?;
            let private = alloc(ctx, &[2, 3], Dtype::F32, Buffer::PrivateHbm)?;
            let p = ctx.program_id();
            let v = (10 * ctx.rank() + p) as f32;
            shared.index(&s![p])?.fill_from_f32(&[v; 3])?;
            private.fill_from_f32(&[v; 6])?;
            nisa::core_barrier(ctx, &shared, &[0, 1], CoreBarrierOpts::default())?;
            // After the barrier each program sees its partner's row.
            let rows = shared.to_f32_vec();
            let r = 10.0 * ctx.rank() as f32;
            assert_eq!(rows, vec![r, r, r, r + 1.0, r + 1.0, r + 1.0]);
            assert_eq!(private.to_f32_vec(), vec![v; 6]);
            Ok((shared, private))
        })
        .unwrap();
    let r = &report.results;
    assert!(r[0][0].0.same_storage(&r[0][1].0));
    assert!(r[1][0].0.same_storage(&r[1][1].0));
    assert!(!r[0][0].0.same_storage(&r[1][0].0));
    assert!(!r[0][0].1.same_storage(&r[0][1].1));
}

#[test]
fn programs_must_allocate_the_same_shared_tensors() {
    let e = with_timeout(30, || {
        Launch::new().lnc(2).run(|ctx| {
            let cols = 4 + ctx.program_id() as i64;
            alloc(ctx, &[2, cols], Dtype::F32, Buffer::SharedHbm)?;
            Ok(())
        })
    });
    let e = expect_err(e);
    assert_err(&e, ErrorKind::Collective, &["nl.ndarray", "different shared_hbm tensors"]);
}

#[test]
fn grid_queries() {
    let none = Launch::new().run(|ctx| Ok((nl::program_id(ctx, 0)?, nl::num_programs(ctx, 0)?, nl::program_ndim(ctx)))).unwrap();
    assert_eq!(none, (0, 1, 0));
    // `kernel[1]` has a one-program grid: ndim 1.
    let one = Launch::new().grid(Some(1)).run(|ctx| Ok((nl::num_programs(ctx, 0)?, nl::program_ndim(ctx)))).unwrap();
    assert_eq!(one, (1, 1));
    let two = Launch::new().lnc(2).run_all(|ctx| Ok((nl::program_id(ctx, 0)?, nl::num_programs(ctx, 0)?, nl::program_ndim(ctx)))).unwrap();
    assert_eq!(two.results, vec![vec![(0, 2, 1), (1, 2, 1)]]);
    let e = expect_err(Launch::new().lnc(2).run(|ctx| nl::program_id(ctx, 1)));
    assert_err(&e, ErrorKind::Constraint, &["nl.program_id", "axis 1"]);
    let e = expect_err(Launch::new().run(|ctx| nl::num_programs(ctx, -1)));
    assert_err(&e, ErrorKind::Constraint, &["nl.num_programs"]);
}

#[test]
fn tile_size_constants_and_nc_version() {
    // Published values of nl.tile_size.
    assert_eq!(nl::tile_size::pmax, 128);
    assert_eq!(nl::tile_size::psum_fmax, 512);
    assert_eq!(nl::tile_size::psum_bank_fmax_bytes, 2048);
    assert_eq!(nl::tile_size::gemm_stationary_fmax, 128);
    assert_eq!(nl::tile_size::gemm_moving_fmax, 512);
    let versions: Vec<i64> =
        Generation::ALL.iter().map(|&g| Launch::new().generation(g).run(|ctx| Ok(nisa::get_nc_version(ctx))).unwrap()).collect();
    assert_eq!(versions, vec![nisa::nc_version::gen2, nisa::nc_version::gen3, nisa::nc_version::gen4]);
    assert_eq!(versions, vec![2, 3, 4]);
}

#[test]
fn op_counts_per_program() {
    let report = Launch::new()
        .lnc(2)
        .run_all(|ctx| {
            let t = alloc(ctx, &[4, 4], Dtype::F32, Buffer::Sbuf)?;
            for _ in 0..=ctx.program_id() {
                nisa::memset(ctx, &t, 1.0, EngineOpts::default())?;
            }
            Ok(())
        })
        .unwrap();
    // nl.ndarray counts as an op, then one or two memsets.
    assert_eq!(report.ops, vec![vec![2, 3]]);
}
