//! PSUM is leased by whole banks (8 banks of 2 KiB per partition on every
//! generation): a one-column tile takes a bank, a trn3 tile of 4 KiB per partition
//! takes two, a freed bank is reusable, and the ninth bank is a capacity error
//! naming the tensor, the banks in use (and by whom) and the bank count.

mod common;

use common::*;
use nki_core::emulator::memory::{MemPool, OnChip};
use nki_core::hw::Generation;
use nki_core::{Buffer, Dtype, ErrorKind, Launch, s};

#[test]
fn eight_one_column_tiles_fit_and_the_ninth_fails() {
    let pool = MemPool::new(Generation::Trn2.limits());
    // A [128, 1] fp32 tile is 4 B per partition, yet it holds a whole bank.
    let tiles: Vec<_> = (0..8).map(|i| pool.acquire(OnChip::Psum, 4, &format!("col{i}")).unwrap()).collect();
    assert_eq!(pool.in_use(), (0, 8));
    let e = pool.acquire(OnChip::Psum, 4, "col8").unwrap_err();
    assert_err(
        &e,
        ErrorKind::Capacity,
        &[
            "PSUM capacity exceeded",
            "tensor 'col8' needs 1 bank (4 B per partition",
            "8 of the 8 banks are in use",
            "'col0' (1 bank)",
            "'col7' (1 bank)",
        ],
    );
    // SBUF is accounted apart: PSUM being full does not block it.
    let _sbuf = pool.acquire(OnChip::Sbuf, 4, "s").unwrap();
    drop(tiles);
    assert_eq!(pool.in_use(), (4, 0));
    let report = pool.report();
    assert_eq!((report.psum_peak_banks, report.psum_peak_bytes, report.sbuf_peak), (8, 8 * 2048, 4));
}

#[test]
fn a_tile_of_two_banks_counts_two_on_trn3() {
    let pool = MemPool::new(Generation::Trn3.limits());
    // 1024 fp32 columns = 4096 B per partition: two 2048 B banks.
    let wide = pool.acquire(OnChip::Psum, 4096, "wide").unwrap();
    assert_eq!(pool.in_use().1, 2);
    // 2049 B spill into a second bank too.
    let odd = pool.acquire(OnChip::Psum, 2049, "odd").unwrap();
    assert_eq!(pool.in_use().1, 4);
    let rest: Vec<_> = (0..4).map(|i| pool.acquire(OnChip::Psum, 2048, &format!("b{i}")).unwrap()).collect();
    let e = pool.acquire(OnChip::Psum, 1, "extra").unwrap_err();
    assert_err(&e, ErrorKind::Capacity, &["'extra' needs 1 bank", "8 of the 8 banks", "'wide' (2 banks)", "'odd' (2 banks)"]);
    drop(wide);
    let e = pool.acquire(OnChip::Psum, 3 * 2048, "three").unwrap_err();
    assert_err(&e, ErrorKind::Capacity, &["'three' needs 3 banks", "6 of the 8 banks"]);
    let two = pool.acquire(OnChip::Psum, 2 * 2048, "two").unwrap();
    assert_eq!(pool.in_use().1, 8);
    drop((odd, rest, two));
    // The whole PSUM as one trn3 tile: 4096 fp32 columns.
    let all = pool.acquire(OnChip::Psum, 8 * 2048, "all").unwrap();
    assert!(pool.acquire(OnChip::Psum, 1, "more").is_err());
    drop(all);
    assert_eq!(pool.in_use(), (0, 0));
    assert_eq!(pool.report().psum_peak_banks, 8);
}

#[test]
fn freed_banks_are_reusable() {
    let pool = MemPool::new(Generation::Trn1.limits());
    let mut held: Vec<_> = (0..8).map(|i| pool.acquire(OnChip::Psum, 512, &format!("t{i}")).unwrap()).collect();
    for round in 0..20 {
        held.remove(round % held.len());
        held.push(pool.acquire(OnChip::Psum, 2048, &format!("r{round}")).unwrap());
        assert_eq!(pool.in_use().1, 8);
        assert!(pool.acquire(OnChip::Psum, 1, "over").is_err());
    }
    // The error lists the tensors that hold banks now, not freed ones.
    let e = pool.acquire(OnChip::Psum, 1, "over").unwrap_err();
    assert!(e.message.contains("'r19'") && !e.message.contains("'t0'"), "{e}");
}

#[test]
fn ndarray_leases_banks_until_the_last_view_drops_and_reports_the_peak() {
    let report = Launch::new()
        .lnc(2)
        .run_all(|ctx| {
            let tiles: Vec<_> = (0..7).map(|_| alloc(ctx, &[128, 1], Dtype::F32, Buffer::Psum)).collect::<nki_core::Result<_>>()?;
            let last = alloc(ctx, &[64, 3], Dtype::Bf16, Buffer::Psum)?;
            let e = expect_err(alloc(ctx, &[1, 1], Dtype::F32, Buffer::Psum));
            assert_err(&e, ErrorKind::Capacity, &["nl.ndarray", "8 of the 8 banks are in use"]);
            // A view keeps its tensor's bank.
            let view = last.index(&s![0..2, 0..1])?;
            drop(last);
            assert!(alloc(ctx, &[1, 1], Dtype::F32, Buffer::Psum).is_err());
            drop(view);
            let again = alloc(ctx, &[128, 512], Dtype::F32, Buffer::Psum)?;
            drop((tiles, again));
            Ok(())
        })
        .unwrap();
    // Each LNC program has its own PSUM.
    for m in &report.memory[0] {
        assert_eq!((m.psum_peak_banks, m.psum_peak_bytes), (8, 16 * 1024));
    }
}
