//! Races on shared HBM: two programs of a launch that write one element (or one
//! reads what the other wrote) with no rendezvous between are an error naming
//! the element and the programs; a barrier or a collective between orders them.

use crate::common::*;
use nki_core::collectives::{self as ncc, CollectiveOpts, ReplicaGroup};
use nki_core::isa::{self as nisa, CoreBarrierOpts, DmaCopyOpts};
use nki_core::{Buffer, Ctx, Dtype, ErrorKind, Launch, Result, Tensor, nl};

/// Stores a `[1, 4]` tile of `value` into `dst`.
fn store(ctx: &Ctx, dst: &Tensor, value: f64) -> Result<()> {
    nisa::dma_copy(ctx, dst, &sbuf_with(ctx, &[1, 4], Dtype::F32, &[value; 4])?, DmaCopyOpts::default())
}

/// An LNC2 launch: program 0 stores 1s into a shared `[2, 4]` tensor's row 0, then
/// program 1 `value`s into row `row` (and reads row 0 when `read`), with a barrier
/// between when `barrier`; program 1's view of the tensor at its end.
fn turns_of(row: i64, value: f64, barrier: bool, read: bool) -> Result<Vec<f32>> {
    with_timeout(30, move || {
        let report = Launch::new().lnc(2).run_all(move |ctx| {
            let out = alloc(ctx, &[2, 4], Dtype::F32, Buffer::SharedHbm)?;
            if ctx.program_id() == 0 {
                store(ctx, &out.slice(0, 0, 1, 1)?, 1.0)?;
            }
            if barrier {
                nisa::core_barrier(ctx, &out, &[0, 1], CoreBarrierOpts::default())?;
            }
            if ctx.program_id() == 1 {
                store(ctx, &out.slice(0, row, row + 1, 1)?, value)?;
                if read {
                    let seen = alloc(ctx, &[1, 4], Dtype::F32, Buffer::Sbuf)?;
                    nisa::dma_copy(ctx, &seen, &out.slice(0, 0, 1, 1)?, DmaCopyOpts::default())?;
                }
            }
            Ok(out.to_f32_vec())
        })?;
        Ok(report.results[0][1].clone())
    })
}

/// [`turns_of`] with program 1 storing 2s.
fn turns(row: i64, barrier: bool, read: bool) -> Result<Vec<f32>> {
    turns_of(row, 2.0, barrier, read)
}

#[test]
fn two_programs_writing_one_element_without_a_barrier_race() {
    let e = expect_err(turns(0, false, false));
    let first = "element [0, 0] of 'tensor' [2, 4] float32 in shared HBM is written by program";
    assert_err(&e, ErrorKind::Race, &["nisa.dma_copy", first, "without a synchronisation between"]);
    assert_eq!(turns(0, true, false).unwrap(), [[2.0; 4], [0.0; 4]].concat());
    assert!(turns(1, false, false).is_ok(), "disjoint rows do not race");
}

#[test]
fn two_programs_writing_the_same_values_unordered_leave_them_whichever_lands_last() {
    for _ in 0..20 {
        assert_eq!(turns_of(0, 1.0, false, false).unwrap(), [[1.0; 4], [0.0; 4]].concat());
    }
}

/// An LNC2 launch on a fresh shared `[1, 4]` tensor: program 0 stores `first`
/// before a barrier and `value` after it; program 1 reads the tensor after the
/// barrier, unordered with program 0's second store.
fn store_while_the_other_reads(first: f64, value: f64) -> Result<()> {
    with_timeout(30, move || {
        Launch::new().lnc(2).run(move |ctx| {
            let out = alloc(ctx, &[1, 4], Dtype::F32, Buffer::SharedHbm)?;
            if ctx.program_id() == 0 {
                store(ctx, &out, first)?;
            }
            nisa::core_barrier(ctx, &out, &[0, 1], CoreBarrierOpts::default())?;
            if ctx.program_id() == 0 {
                store(ctx, &out, value)
            } else {
                let seen = alloc(ctx, &[1, 4], Dtype::F32, Buffer::Sbuf)?;
                nisa::dma_copy(ctx, &seen, &out, DmaCopyOpts::default())
            }
        })
    })
}

#[test]
fn a_write_that_leaves_the_elements_as_they_were_is_no_access() {
    // Program 1 reads 3s either way: program 0's second store changes nothing.
    for _ in 0..20 {
        store_while_the_other_reads(3.0, 3.0).unwrap();
    }
    // A store that changes them races with the read.
    let e = expect_err(store_while_the_other_reads(3.0, 4.0));
    assert_err(&e, ErrorKind::Race, &["element [0, 0] of 'tensor' [1, 4] float32 in shared HBM"]);
}

#[test]
fn reading_what_the_other_program_wrote_needs_a_barrier() {
    // Program 1 writes row 1 first, then reads row 0.
    let e = expect_err(turns(1, false, true));
    assert_err(&e, ErrorKind::Race, &["element [0, 0] of 'tensor' [2, 4] float32 in shared HBM is"]);
    let text = e.to_string();
    assert!(
        text.contains("written by program 0 and read by program 1") || text.contains("read by program 1 and written by program 0"),
        "{text}"
    );
    assert!(turns(1, true, true).is_ok());
}

/// An LNC2 launch on a fresh shared `[1, 4]` tensor: program 0 stores 1s into
/// it while program 1 only reads it, with a barrier between when `barrier`;
/// program `late` sleeps before its access, so that the other's comes first.
fn read_while_the_other_stores(barrier: bool, late: usize) -> Result<()> {
    with_timeout(30, move || {
        Launch::new().lnc(2).run(move |ctx| {
            let out = alloc(ctx, &[1, 4], Dtype::F32, Buffer::SharedHbm)?;
            if ctx.program_id() == late {
                // Long enough for the other program to get there first on a loaded machine.
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            if ctx.program_id() == 0 {
                store(ctx, &out, 1.0)?;
            }
            if barrier {
                nisa::core_barrier(ctx, &out, &[0, 1], CoreBarrierOpts::default())?;
            }
            if ctx.program_id() == 1 {
                let seen = alloc(ctx, &[1, 4], Dtype::F32, Buffer::Sbuf)?;
                nisa::dma_copy(ctx, &seen, &out, DmaCopyOpts::default())?;
            }
            Ok(())
        })
    })
}

#[test]
fn a_read_of_a_fresh_tensor_races_with_the_other_programs_first_write_in_either_order() {
    // Program 0 late: the read of cells nothing wrote comes first, then the
    // store changes them. Program 1 late: the store comes first.
    for late in [0, 1] {
        let e = expect_err(read_while_the_other_stores(false, late));
        assert_err(&e, ErrorKind::Race, &["element [0, 0] of 'tensor' [1, 4] float32 in shared HBM is"]);
        let text = e.to_string();
        let order = ["read by program 1 and written by program 0", "written by program 0 and read by program 1"][late];
        assert!(text.contains(order), "program {late} late: {text}");
        read_while_the_other_stores(true, late).unwrap();
    }
}

#[test]
fn ranks_sharing_a_tensor_are_ordered_by_the_collectives_they_join() {
    let shared = hbm(&[1, 4], &[0.0; 4], Dtype::F32);
    let run = |collective: bool| {
        let shared = shared.clone();
        with_timeout(30, move || {
            Launch::new().ranks(2).run(move |ctx| {
                if ctx.rank() == 0 {
                    store(ctx, &shared, 1.0)?;
                }
                if collective {
                    let x = sbuf_with(ctx, &[1, 4], Dtype::F32, &[1.0; 4])?;
                    let (src, dst) =
                        (alloc(ctx, &[1, 4], Dtype::F32, Buffer::SharedHbm)?, alloc(ctx, &[1, 4], Dtype::F32, Buffer::SharedHbm)?);
                    nisa::dma_copy(ctx, &src, &x, DmaCopyOpts::default())?;
                    ncc::all_reduce(ctx, &[src], &[dst], &ReplicaGroup::new(vec![vec![0, 1]]), nl::add, CollectiveOpts::default())?;
                }
                if ctx.rank() == 1 {
                    store(ctx, &shared, 2.0)?;
                }
                Ok(())
            })
        })
    };
    let e = expect_err(run(false));
    assert_err(&e, ErrorKind::Race, &["is written by rank ", "rank 0 program 0", "rank 1 program 0"]);
    run(true).unwrap();
    assert_eq!(shared.to_f32_vec(), [2.0; 4]);
}

/// An LNC2 launch: program `p` writes `p + 1` into the columns `c ≡ p (mod 2)`
/// of a shared `[64, 96]` tensor a column at a time (so no two neighbouring
/// elements share a writer and the record keeps a stamp per element), then
/// program 1 writes 3s into column `last`, after a barrier when `barrier`.
fn columns(last: i64, barrier: bool) -> Result<()> {
    with_timeout(30, move || {
        Launch::new().lnc(2).run_all(move |ctx| {
            let out = alloc(ctx, &[64, 96], Dtype::F32, Buffer::SharedHbm)?;
            let p = ctx.program_id();
            let column = sbuf_with(ctx, &[64, 1], Dtype::F32, &[p as f64 + 1.0; 64])?;
            for c in (p as i64..96).step_by(2) {
                nisa::dma_copy(ctx, &out.slice(1, c, c + 1, 1)?, &column, DmaCopyOpts::default())?;
            }
            if barrier {
                nisa::core_barrier(ctx, &out, &[0, 1], CoreBarrierOpts::default())?;
            }
            if p == 1 {
                let threes = sbuf_with(ctx, &[64, 1], Dtype::F32, &[3.0; 64])?;
                nisa::dma_copy(ctx, &out.slice(1, last, last + 1, 1)?, &threes, DmaCopyOpts::default())?;
            }
            Ok(())
        })?;
        Ok(())
    })
}

#[test]
fn element_by_element_writes_race_where_they_meet() {
    let e = expect_err(columns(2, false));
    // Which program's write lands first depends on scheduling, so either order names the pair.
    let element = "element [0, 2] of 'tensor' [64, 96] float32 in shared HBM is written by program ";
    assert_err(&e, ErrorKind::Race, &["nisa.dma_copy", element, "without a synchronisation between"]);
    let text = e.to_string();
    assert!(text.contains("by program 0 and by program 1") || text.contains("by program 1 and by program 0"), "both writers named: {text}");
    assert!(columns(3, false).is_ok(), "a column of its own");
    assert!(columns(2, true).is_ok(), "ordered by the barrier");
}
