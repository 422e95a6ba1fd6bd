//! `ncc.all_to_all_v` / `ncc.all_gather_v` across emulated ranks: chunks cut by
//! each member's send counts and displacements, placed by slot or by receive
//! displacements, receive counts written back, checked against index arithmetic
//! written from the documented metadata layout.

use crate::common::*;
use nki_core::collectives::{self as ncc, ReplicaGroup, VariableOpts};
use nki_core::{Buffer, Ctx, Dtype, ErrorKind, Launch, Result, Tensor};

/// Elements of every src and dst.
const LEN: usize = 12;

/// Member `rank`'s src: `100 rank + i`.
fn src_values(rank: usize) -> Vec<f64> {
    (0..LEN).map(|i| (100 * rank + i) as f64).collect()
}

fn hbm_with(ctx: &Ctx, shape: &[i64], dtype: Dtype, values: &[f64]) -> Result<Tensor> {
    let t = alloc(ctx, shape, dtype, Buffer::PrivateHbm)?;
    t.fill_from_f32(&values.iter().map(|&v| v as f32).collect::<Vec<_>>())?;
    Ok(t)
}

/// Member `i` of 3 sends `(i + j) mod 4 + 1` elements (at most a slot of 4) starting at `2 j` to member `j`.
fn send(i: usize, j: usize) -> (usize, usize) {
    (2 * j, (i + j) % 4 + 1)
}

#[test]
fn all_to_all_v_cuts_by_send_counts_and_places_by_slot_or_receive_displacement() {
    let members = [2usize, 0, 1];
    for rdispls in [false, true] {
        let got = with_timeout(30, move || {
            Launch::new()
                .ranks(3)
                .run_ranks(move |ctx| {
                    let me = members.iter().position(|&r| r == ctx.rank()).unwrap();
                    let rows = if rdispls { 4 } else { 3 };
                    let mut meta = vec![0.0; rows * 3];
                    for j in 0..3 {
                        let (start, count) = send(me, j);
                        meta[j] = count as f64;
                        meta[3 + j] = start as f64;
                        if rdispls {
                            // Receive displacements pack the chunks from the end, member 0 last.
                            meta[9 + j] = (LEN - (0..=j).map(|i| send(i, me).1).sum::<usize>()) as f64;
                        }
                    }
                    let meta = hbm_with(ctx, &[rows as i64, 3], Dtype::U32, &meta)?;
                    let s = hbm_with(ctx, &[LEN as i64], Dtype::F32, &src_values(ctx.rank()))?;
                    let d = hbm_with(ctx, &[LEN as i64], Dtype::F32, &[-1.0; LEN])?;
                    let opts = VariableOpts { has_rdispls: Some(rdispls), ..Default::default() };
                    ncc::all_to_all_v(ctx, &[s], std::slice::from_ref(&d), &ReplicaGroup::new(vec![vec![2, 0, 1]]), &meta, opts)?;
                    Ok((d.to_f32_vec(), meta.to_i64_vec()))
                })
                .unwrap()
        });
        for (me, &rank) in members.iter().enumerate() {
            let mut want = vec![-1.0; LEN];
            for (i, &from) in members.iter().enumerate() {
                let (start, count) = send(i, me);
                let at = if rdispls { LEN - (0..=i).map(|k| send(k, me).1).sum::<usize>() } else { i * LEN / 3 };
                want[at..at + count].copy_from_slice(&src_values(from)[start..start + count]);
            }
            assert_close(&got[rank].0, &want, 0.0, 0.0);
            let counts: Vec<i64> = (0..3).map(|i| send(i, me).1 as i64).collect();
            assert_eq!(got[rank].1[6..9], counts[..], "receive counts written back on rank {rank}");
        }
    }
}

#[test]
fn all_gather_v_sends_column_zero_to_every_member_in_lnc2_groups_of_four() {
    let got = with_timeout(30, || {
        Launch::new()
            .ranks(4)
            .lnc(2)
            .run_ranks(|ctx| {
                // Rank r sends r + 1 elements from element r.
                let r = ctx.rank();
                let meta =
                    hbm_with(ctx, &[3, 4], Dtype::U32, &[(r + 1) as f64, 0.0, 0.0, 0.0, r as f64, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])?;
                let s = hbm_with(ctx, &[LEN as i64], Dtype::F32, &src_values(r))?;
                let d = hbm_with(ctx, &[4, 4], Dtype::F32, &[-1.0; 16])?;
                ncc::all_gather_v(ctx, &[s], std::slice::from_ref(&d), &ReplicaGroup::new(vec![]), &meta, VariableOpts::default())?;
                Ok(d.to_f32_vec())
            })
            .unwrap()
    });
    let mut want = vec![-1.0; 16];
    for r in 0..4 {
        want[4 * r..4 * r + r + 1].copy_from_slice(&src_values(r)[r..2 * r + 1]);
    }
    for g in &got {
        assert_close(g, &want, 0.0, 0.0);
    }
}

#[test]
fn invalid_metadata_launches_and_chunks_are_errors() {
    with_timeout(30, || {
        Launch::new()
            .run(|ctx| {
                let g = ReplicaGroup::new(vec![]);
                let s = hbm_with(ctx, &[4], Dtype::F32, &[0.0; 4])?;
                let f32_meta = hbm_with(ctx, &[3, 1], Dtype::F32, &[0.0; 3])?;
                let e = expect_err(ncc::all_to_all_v(
                    ctx,
                    std::slice::from_ref(&s),
                    std::slice::from_ref(&s),
                    &g,
                    &f32_meta,
                    VariableOpts::default(),
                ));
                assert_err(&e, ErrorKind::Argument, &["metadata_tensor", "uint32 of shape [3, 1]"]);
                let meta = hbm_with(ctx, &[3, 1], Dtype::U32, &[0.0; 3])?;
                let e = expect_err(ncc::all_gather_v(
                    ctx,
                    std::slice::from_ref(&s),
                    std::slice::from_ref(&s),
                    &g,
                    &meta,
                    VariableOpts::default(),
                ));
                assert_err(&e, ErrorKind::Constraint, &["ncc.all_gather_v", "LNC2"]);
                let opts = VariableOpts { has_rdispls: Some(true), ..Default::default() };
                let e = expect_err(ncc::all_gather_v(ctx, std::slice::from_ref(&s), std::slice::from_ref(&s), &g, &meta, opts));
                assert_err(&e, ErrorKind::Argument, &["has_rdispls"]);
                Ok(())
            })
            .unwrap()
    });
    let e = with_timeout(30, || {
        expect_err(Launch::new().run(|ctx| {
            let s = hbm_with(ctx, &[4], Dtype::F32, &[0.0; 4])?;
            let meta = hbm_with(ctx, &[3, 1], Dtype::U32, &[5.0, 0.0, 0.0])?;
            ncc::all_to_all_v(
                ctx,
                std::slice::from_ref(&s),
                std::slice::from_ref(&s),
                &ReplicaGroup::new(vec![]),
                &meta,
                VariableOpts::default(),
            )
        }))
    });
    assert_err(&e, ErrorKind::Shape, &["ncc.all_to_all_v", "sends elements 0..0+5 of a 4-element src"]);
}
