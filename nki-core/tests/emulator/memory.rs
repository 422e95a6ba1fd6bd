//! The on-chip memory model: a tile holds its SBUF bytes or PSUM banks from the
//! first instruction that touches it to the last; PSUM beyond its 8 banks is an
//! error naming the tiles live at once, SBUF beyond its capacity is spilled (an
//! error only when one instruction's operands do not fit); tiles placed with
//! `address=` share the bytes their placements overlap, and a read of bytes
//! another tile overwrote is a hazard naming both tiles.

use crate::common::*;
use nki_core::hw::Generation;
use nki_core::isa::{self as nisa, ActivationOpts, EngineOpts, Operand, TensorReduceOpts, TensorScalarOpts};
use nki_core::nl::{self, NdarrayOpts, NlOp};
use nki_core::{Allocator, Buffer, Ctx, Dtype, ErrorKind, Launch, Result, Tensor};

/// An on-chip tensor named `name`, placed at `address` when given.
fn tile(ctx: &Ctx, buffer: Buffer, name: &str, shape: &[i64], address: Option<(i64, i64)>) -> Result<Tensor> {
    nl::ndarray(ctx, shape, Dtype::F32, NdarrayOpts { buffer: Some(buffer), name: Some(name), address, ..Default::default() })
}

fn set(ctx: &Ctx, t: &Tensor, value: f64) -> Result<()> {
    nisa::memset(ctx, t, value, EngineOpts::default())
}

/// `acc += t` (both `[128, 1]`): a read of `t`.
fn add_into(ctx: &Ctx, acc: &Tensor, t: &Tensor) -> Result<()> {
    nisa::tensor_tensor(ctx, acc, acc, t, NlOp::Add, EngineOpts::default())
}

/// Memsets `n` one-column PSUM tiles to 0, 1, ..., then reads them all: every tile
/// is live from its memset to its read. Returns the sum.
fn live_columns(ctx: &Ctx, n: usize) -> Result<Vec<f32>> {
    let acc = tile(ctx, Buffer::Sbuf, "acc", &[128, 1], None)?;
    set(ctx, &acc, 0.0)?;
    let tiles: Vec<Tensor> = (0..n).map(|i| tile(ctx, Buffer::Psum, &format!("col{i}"), &[128, 1], None)).collect::<Result<_>>()?;
    for (i, t) in tiles.iter().enumerate() {
        set(ctx, t, i as f64)?;
    }
    for t in &tiles {
        add_into(ctx, &acc, t)?;
    }
    Ok(acc.to_f32_vec())
}

#[test]
fn eight_live_banks_fit_and_a_ninth_live_at_once_fails() {
    let report = Launch::new().lnc(2).run_all(|ctx| live_columns(ctx, 8)).unwrap();
    assert_eq!(report.results[0][0], vec![28.0; 128]);
    // Each LNC program has its own PSUM.
    for m in &report.memory[0] {
        assert_eq!((m.psum_peak_banks, m.psum_peak_bytes), (8, 8 * 2048));
    }
    let e = expect_err(Launch::new().run(|ctx| live_columns(ctx, 9)));
    assert_err(
        &e,
        ErrorKind::Capacity,
        &[
            "PSUM capacity exceeded: tensor 'col8' needs 1 bank (4 B per partition; every PSUM tensor takes whole banks of 2048 B)",
            "8 of the 8 banks are in use: 'col0' (1 bank), 'col1' (1 bank)",
            "'col7' (1 bank)",
            "'col8' is first used at nisa.memset",
        ],
    );
    // The overlap is proven when the last of the early tiles is read again.
    assert_eq!(e.op.as_deref(), Some("nisa.tensor_tensor"), "{e}");
}

#[test]
fn more_tiles_than_banks_over_a_lifetime_run_when_at_most_eight_are_live() {
    let report = Launch::new()
        .run_all(|ctx| {
            let acc = tile(ctx, Buffer::Sbuf, "acc", &[128, 1], None)?;
            set(ctx, &acc, 0.0)?;
            let held: Vec<Tensor> =
                (0..7).map(|i| tile(ctx, Buffer::Psum, &format!("held{i}"), &[128, 512], None)).collect::<Result<_>>()?;
            for t in &held {
                set(ctx, t, 1.0)?;
            }
            // Fifty more tiles, every handle kept: each is dead after its read, so
            // one bank serves them all in turn.
            let mut all = Vec::new();
            for i in 0..50 {
                let t = tile(ctx, Buffer::Psum, &format!("step{i}"), &[128, 1], None)?;
                set(ctx, &t, 2.0)?;
                add_into(ctx, &acc, &t)?;
                all.push(t);
            }
            for t in &held {
                add_into(ctx, &acc, &t.index(&nki_core::s![.., 0..1])?)?;
            }
            Ok((acc.to_f32_vec(), all.len()))
        })
        .unwrap();
    assert_eq!(report.results[0][0], (vec![107.0; 128], 50));
    assert_eq!(report.memory[0][0].psum_peak_banks, 8);
}

#[test]
fn a_tile_of_two_banks_counts_two_on_trn3() {
    let run = |n: usize| {
        Launch::new().generation(Generation::Trn3).run(|ctx| {
            // 1024 fp32 columns = 4096 B per partition: two banks.
            let wide = tile(ctx, Buffer::Psum, "wide", &[128, 1024], None)?;
            set(ctx, &wide, 1.0)?;
            let mut cols = live_columns(ctx, n)?;
            let acc = tile(ctx, Buffer::Sbuf, "acc2", &[128, 1], None)?;
            nisa::tensor_copy(ctx, &acc, &wide.index(&nki_core::s![.., 0..1])?, EngineOpts::default())?;
            cols.extend(acc.to_f32_vec());
            Ok(cols)
        })
    };
    assert!(run(6).is_ok());
    let e = expect_err(run(7));
    assert_err(&e, ErrorKind::Capacity, &["'col6' needs 1 bank", "8 of the 8 banks", "'wide' (2 banks)"]);
}

#[test]
fn placed_psum_tiles_share_their_bank_and_count_it_once() {
    let got = Launch::new()
        .run(|ctx| {
            let acc = tile(ctx, Buffer::Sbuf, "acc", &[128, 1], None)?;
            set(ctx, &acc, 0.0)?;
            // Ten tiles live at once, all in bank 3: one bank.
            let same: Vec<Tensor> =
                (0..10).map(|i| tile(ctx, Buffer::Psum, &format!("p{i}"), &[128, 1], Some((0, 3 * 2048)))).collect::<Result<_>>()?;
            set(ctx, &same[0], 5.0)?;
            // A write through one tile is read through the others.
            for t in &same[1..] {
                add_into(ctx, &acc, t)?;
            }
            // Seven auto tiles fit beside the one shared bank.
            let mut sum = live_columns(ctx, 7)?;
            add_into(ctx, &acc, &same[9])?;
            sum.extend(acc.to_f32_vec());
            Ok((sum, ctx.memory().psum_peak_banks))
        })
        .unwrap();
    assert_eq!(got.0[..128], vec![21.0; 128]);
    assert_eq!(got.0[128..], vec![50.0; 128]);
    assert_eq!(got.1, 8);
}

#[test]
fn an_alias_read_sees_the_other_tiles_bytes_through_their_dtypes() {
    let got = Launch::new()
        .run(|ctx| {
            // A bf16 tile over the first half of the bytes of an fp32 tile.
            let wide = tile(ctx, Buffer::Sbuf, "wide", &[2, 4], Some((0, 64)))?;
            let halves =
                nl::ndarray(ctx, &[2, 4], Dtype::Bf16, NdarrayOpts { name: Some("halves"), address: Some((0, 64)), ..Default::default() })?;
            set(ctx, &wide, 1.0)?;
            let out = nl::ndarray(ctx, &[2, 4], Dtype::F32, NdarrayOpts { name: Some("out"), ..Default::default() })?;
            nisa::tensor_copy(ctx, &out, &halves, EngineOpts::default())?;
            Ok(out.to_f32_vec())
        })
        .unwrap();
    // 1.0f32 is 0x3F800000: little-endian bf16 halves 0x0000 (0.0) and 0x3F80 (1.0).
    assert_eq!(got, vec![0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]);
}

#[test]
fn a_write_over_bytes_another_tile_still_reads_is_a_hazard() {
    let e = expect_err(Launch::new().run(|ctx| {
        let acc = tile(ctx, Buffer::Sbuf, "acc", &[128, 1], None)?;
        set(ctx, &acc, 0.0)?;
        let first = tile(ctx, Buffer::Psum, "first", &[128, 512], Some((0, 2048)))?;
        let second = tile(ctx, Buffer::Psum, "second", &[64, 256], Some((0, 2048)))?;
        set(ctx, &first, 1.0)?;
        set(ctx, &second, 2.0)?;
        add_into(ctx, &acc, &first.index(&nki_core::s![.., 0..1])?)
    }));
    assert_err(
        &e,
        ErrorKind::Hazard,
        &[
            "nisa.tensor_tensor (instruction",
            "reads 'first' (address (0, 2048)) [128, 512] float32, but bytes it wrote (at nisa.memset (instruction",
            "were overwritten through 'second' (address (0, 2048)) [64, 256] float32 (at nisa.memset (instruction",
            "finish reading 'first' (address (0, 2048)) before writing 'second'",
        ],
    );
    // Bytes of the first tile the second did not cover stay its own.
    Launch::new()
        .run(|ctx| {
            let acc = tile(ctx, Buffer::Sbuf, "acc", &[128, 1], None)?;
            let first = tile(ctx, Buffer::Psum, "first", &[128, 512], Some((0, 2048)))?;
            let second = tile(ctx, Buffer::Psum, "second", &[64, 256], Some((0, 2048)))?;
            set(ctx, &first, 1.0)?;
            set(ctx, &second, 2.0)?;
            nisa::tensor_copy(
                ctx,
                &acc.index(&nki_core::s![64..128, ..])?,
                &first.index(&nki_core::s![64..128, 511..512])?,
                EngineOpts::default(),
            )
        })
        .unwrap();
}

#[test]
fn placements_are_checked_against_the_memory() {
    Launch::new()
        .run(|ctx| {
            let refused = |shape: &[i64], buffer: Buffer, at: (i64, i64), parts: &[&str]| {
                let e = expect_err(tile(ctx, buffer, "t", shape, Some(at)));
                assert_err(&e, ErrorKind::Constraint, parts);
            };
            refused(
                &[128, 512],
                Buffer::Psum,
                (0, 1024),
                &["nl.ndarray", "PSUM tensor 't' [128, 512] float32 at address (0, 1024)", "beginning of a bank", "multiple of 2048 B"],
            );
            refused(&[128, 512], Buffer::Psum, (0, 8 * 2048), &["end at byte 18432, past the 16384 B of a PSUM partition"]);
            refused(&[64, 4], Buffer::Sbuf, (65, 0), &["64 partitions from partition 65 reach past the 128 partitions"]);
            refused(&[1, 4], Buffer::Sbuf, (0, 224 * 1024 - 8), &["past the 229376 B of a SBUF partition"]);
            refused(&[1, 4], Buffer::Sbuf, (-1, 0), &["must be non-negative"]);
            tile(ctx, Buffer::Sbuf, "last", &[64, 2], Some((64, 224 * 1024 - 8)))?;
            tile(ctx, Buffer::Psum, "bank7", &[128, 512], Some((0, 7 * 2048)))?;
            Ok(())
        })
        .unwrap();
}

/// `n` elements per partition of fp32 (`4n` bytes).
fn kib(k: i64) -> i64 {
    k * 1024 / 4
}

#[test]
fn sbuf_beyond_capacity_is_spilled_and_reloaded() {
    // trn1: 192 KiB per partition. Three 80 KiB tiles are written, then read in
    // order: at the third write the one read last (b) is saved, and reloaded
    // before its read.
    let report = Launch::new()
        .generation(Generation::Trn1)
        .run_all(|ctx| {
            let tiles: Vec<Tensor> =
                ["a", "b", "c"].iter().map(|n| tile(ctx, Buffer::Sbuf, n, &[128, kib(80)], None)).collect::<Result<_>>()?;
            for (i, t) in tiles.iter().enumerate() {
                set(ctx, t, i as f64 + 1.0)?;
            }
            let mut sums = Vec::new();
            for (i, t) in tiles.iter().enumerate() {
                let col = tile(ctx, Buffer::Sbuf, &format!("sum{i}"), &[128, 1], None)?;
                nisa::tensor_reduce(ctx, &col, NlOp::Add, t, &[1], TensorReduceOpts::default())?;
                sums.push(col.to_f32_vec()[0]);
            }
            Ok(sums)
        })
        .unwrap();
    assert_eq!(report.results[0][0], vec![20480.0, 40960.0, 61440.0]);
    let m = report.memory[0][0];
    assert_eq!(m.sbuf_peak, 3 * 80 * 1024 + 4, "a, b, c and the first sum are live at the first read");
    assert_eq!((m.spill_save_bytes, m.spill_reload_bytes), (128 * 80 * 1024, 128 * 80 * 1024));
    // Two 100 KiB tiles written one after the other never overlap.
    let m = Launch::new()
        .run_all(|ctx| {
            let tiles: Vec<Tensor> =
                (0..2).map(|i| tile(ctx, Buffer::Sbuf, &format!("t{i}"), &[128, kib(100)], None)).collect::<Result<_>>()?;
            for t in &tiles {
                set(ctx, t, 1.0)?;
            }
            Ok(())
        })
        .unwrap()
        .memory[0][0];
    assert_eq!((m.sbuf_peak, m.spill_save_bytes), (100 * 1024, 0), "a tile written and never read is live at its write only: {m:?}");
}

#[test]
fn one_instructions_operands_must_fit_in_sbuf_together() {
    let e = expect_err(Launch::new().run(|ctx| {
        let (x, y) = (tile(ctx, Buffer::Sbuf, "x", &[128, kib(120)], None)?, tile(ctx, Buffer::Sbuf, "y", &[128, kib(120)], None)?);
        set(ctx, &x, 1.0)?;
        nisa::tensor_copy(ctx, &y, &x, EngineOpts::default())
    }));
    assert_err(
        &e,
        ErrorKind::Capacity,
        &[
            "SBUF capacity exceeded: nisa.tensor_copy (instruction",
            "works on 245760 B per partition of SBUF at once ('x' 122880 B, 'y' 122880 B), more than the 229376 B a partition holds",
        ],
    );
}

/// An op writing `y` from `x` and a `(P, 1)` column: `op(ctx, y, x, col)`.
type ColumnOp = fn(&Ctx, &Tensor, &Tensor, &Tensor) -> Result<()>;

/// The `(P, 1)` column operands of the scalar ops (`operand0`/`operand1`, an
/// activation's `bias` and `scale`) are in SBUF with the data: two 112 KiB tiles
/// fill a trn2 partition exactly, and the column's 4 bytes are one too many (the
/// executor counts every operand it reads; so does the emulator).
#[test]
fn a_scalar_ops_column_operand_counts_toward_the_partition() {
    let half = 229_376 / 8;
    let refused = |f: ColumnOp| {
        expect_err(Launch::new().run(move |ctx| {
            let (x, y) = (tile(ctx, Buffer::Sbuf, "x", &[128, half], None)?, tile(ctx, Buffer::Sbuf, "y", &[128, half], None)?);
            let col = tile(ctx, Buffer::Sbuf, "col", &[128, 1], None)?;
            set(ctx, &x, 1.0)?;
            set(ctx, &col, 2.0)?;
            f(ctx, &y, &x, &col)
        }))
    };
    let ops: [(&str, ColumnOp); 3] = [
        ("nisa.tensor_scalar", |ctx, y, x, col| {
            nisa::tensor_scalar(ctx, y, x, NlOp::Subtract, Operand::Tensor(col), TensorScalarOpts::default())
        }),
        ("nisa.activation", |ctx, y, x, col| {
            nisa::activation(ctx, y, NlOp::Exp, x, ActivationOpts { bias: Some(Operand::Tensor(col)), ..Default::default() })
        }),
        ("nisa.activation", |ctx, y, x, col| {
            nisa::activation(ctx, y, NlOp::Exp, x, ActivationOpts { scale: Some(Operand::Tensor(col)), ..Default::default() })
        }),
    ];
    for (name, op) in ops {
        let e = refused(op);
        assert_err(
            &e,
            ErrorKind::Capacity,
            &[&format!("SBUF capacity exceeded: {name} (instruction"), "works on 229380 B per partition", "'col' 4 B"],
        );
    }
    // A scalar operand is an immediate: the two tiles alone fit.
    Launch::new()
        .run(|ctx| {
            let (x, y) = (tile(ctx, Buffer::Sbuf, "x", &[128, half], None)?, tile(ctx, Buffer::Sbuf, "y", &[128, half], None)?);
            set(ctx, &x, 1.0)?;
            nisa::tensor_scalar(ctx, &y, &x, NlOp::Subtract, Operand::Scalar(2.0), TensorScalarOpts::default())
        })
        .unwrap();
}

/// In a profile, tiles placed at shared bytes wait for each other: the load into
/// the second waits until the first is read (its buffer is reused); without
/// placements the two loads overlap.
#[test]
fn the_profile_orders_placed_tiles_that_share_bytes() {
    let second_load_start = |placed: bool| {
        let launch = Launch::new().profile(nki_core::profile::Target::Trn2);
        launch
            .run(|ctx| {
                let input = hbm(&[128, 512], &vec![1.0; 128 * 512], Dtype::F32);
                let at = placed.then_some((0, 0));
                let (a, b) = (tile(ctx, Buffer::Sbuf, "a", &[128, 512], at)?, tile(ctx, Buffer::Sbuf, "b", &[128, 512], at)?);
                let out = tile(ctx, Buffer::Sbuf, "out", &[128, 512], None)?;
                nisa::dma_copy(ctx, &a, &input, Default::default())?;
                nisa::activation(ctx, &out, NlOp::Exp, &a, Default::default())?;
                nisa::dma_copy(ctx, &b, &input, Default::default())?;
                nisa::activation(ctx, &out, NlOp::Exp, &b, Default::default())
            })
            .unwrap();
        let p = launch.profiled().unwrap();
        let s = &p.timeline.slices[0];
        (s[2].start_ns, s[1].end_ns)
    };
    let (apart, read_end) = second_load_start(false);
    assert!(apart < read_end, "unplaced tiles are separate buffers: the second load need not wait for the first read");
    let (shared, first_read_end) = second_load_start(true);
    assert!(shared >= first_read_end, "the shared buffer is reloaded at {shared} ns, before its read ends at {first_read_end} ns");
}

/// Under the stack allocator a loop's tile gets, in the next iteration, the
/// bytes the previous iteration's tile freed: the second load waits until the
/// first tile is read. A tile still alive keeps its bytes, so one allocated
/// while it lives goes elsewhere and does not wait. Under the default
/// allocator every iteration's tile is its own buffer and the loads overlap.
#[test]
fn under_the_stack_allocator_a_loop_reuses_and_waits_for_its_buffers() {
    let run = |allocator: Allocator, keep: bool| {
        let launch = Launch::new().allocator(allocator).profile(nki_core::profile::Target::Trn2);
        launch
            .run(|ctx| {
                let input = hbm(&[128, 512], &vec![1.0; 128 * 512], Dtype::F32);
                let out = tile(ctx, Buffer::Sbuf, "out", &[128, 512], None)?;
                let mut kept = Vec::new();
                for _ in 0..2 {
                    let a = tile(ctx, Buffer::Sbuf, "a", &[128, 512], None)?;
                    nisa::dma_copy(ctx, &a, &input, Default::default())?;
                    nisa::activation(ctx, &out, NlOp::Exp, &a, Default::default())?;
                    if keep {
                        kept.push(a);
                    }
                }
                Ok(())
            })
            .unwrap();
        let p = launch.profiled().unwrap();
        let s = &p.timeline.slices[0];
        (s[2].start_ns, s[1].end_ns)
    };
    let (second_load, first_read_end) = run(Allocator::Stack, false);
    assert!(
        second_load >= first_read_end,
        "the reused buffer is reloaded at {second_load} ns, before its read ends at {first_read_end} ns"
    );
    for (allocator, keep) in [(Allocator::Stack, true), (Allocator::Default, false)] {
        let (second_load, first_read_end) = run(allocator, keep);
        assert!(second_load < first_read_end, "{allocator:?}: the second tile is a buffer of its own, its load need not wait");
    }
}
