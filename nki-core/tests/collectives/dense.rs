//! `ncc` group collectives across emulated ranks — `all_reduce`, `all_gather`,
//! `reduce_scatter`, `all_to_all` — against float64 references written from
//! their documented meaning: member order inside replica groups, both precision
//! modes, the communication log, the run-time errors, and a failing rank ending
//! the run instead of hanging it.

use crate::common::*;
use nki_core::collectives::{self as ncc, CollectiveOpts, CommEvent, ReplicaGroup};
use nki_core::nl;
use nki_core::{Buffer, Ctx, Dtype, ErrorKind, Launch, Precision, Result, Tensor};

const ROWS: usize = 4;
const COLS: usize = 6;

fn group(g: &[&[i64]]) -> ReplicaGroup {
    ReplicaGroup::new(g.iter().map(|r| r.to_vec()).collect())
}

/// Rank `r`'s source: dyadic values (multiples of 2^-10 in [-2, 2)), exact in
/// fp32 (not bfloat16), so sums of four are exact in fp32 and round once into a bf16 dst.
fn values(r: usize) -> Vec<f64> {
    dyadic(ROWS * COLS, 70 + r as u64, -2.0, 2.0, 10)
}

/// A private-HBM tensor of rank `r`'s values.
fn src(ctx: &Ctx, dtype: Dtype, shape: &[i64]) -> Result<Tensor> {
    let t = alloc(ctx, shape, dtype, Buffer::PrivateHbm)?;
    t.fill_from_f32(&values(ctx.rank()).iter().map(|&x| x as f32).collect::<Vec<_>>())?;
    Ok(t)
}

fn opts() -> CollectiveOpts<'static> {
    CollectiveOpts::default()
}

/// Runs `f` on 4 ranks; returns each rank's result and the communication log.
fn on_four<R: Send + 'static>(precision: Precision, f: impl Fn(&Ctx) -> Result<R> + Sync + Send + 'static) -> (Vec<R>, Vec<CommEvent>) {
    with_timeout(30, move || {
        let report = Launch::new().ranks(4).precision(precision).run_all(f).unwrap();
        (report.results.into_iter().map(|mut r| r.swap_remove(0)).collect(), report.comm)
    })
}

/// Element-wise fold of members' values with `f`, in float64.
fn fold(members: &[usize], f: fn(f64, f64) -> f64) -> Vec<f64> {
    let mut acc = values(members[0]);
    for &m in &members[1..] {
        acc.iter_mut().zip(values(m)).for_each(|(a, b)| *a = f(*a, b));
    }
    acc
}

#[test]
fn all_reduce_sums_within_each_group_and_rounds_once_into_the_dst() {
    let run = |precision| {
        on_four(precision, |ctx| {
            let (s, d) = (src(ctx, Dtype::F32, &[4, 6])?, alloc(ctx, &[4, 6], Dtype::Bf16, Buffer::PrivateHbm)?);
            ncc::all_reduce(ctx, &[s], std::slice::from_ref(&d), &group(&[&[0, 2], &[3, 1]]), nl::add, opts())?;
            Ok(d.to_f32_vec())
        })
    };
    let (fp32, mut comm) = run(Precision::Fp32);
    let (hw, _) = run(Precision::Hardware);
    let mut rounded_somewhere = false;
    for (r, members) in [(0, [0, 2]), (2, [0, 2]), (1, [3, 1]), (3, [3, 1])] {
        let want = fold(&members, |a, b| a + b);
        assert_close(&fp32[r], &want, 0.0, 0.0);
        let want_hw: Vec<f64> = want.iter().map(|&x| f64::from(bf16(x as f32))).collect();
        assert_close(&hw[r], &want_hw, 0.0, 0.0);
        rounded_somewhere |= want_hw != want;
    }
    assert!(rounded_somewhere, "the sums must need rounding for the test to tell the modes apart");
    comm.sort_by_key(|e| e.ring.clone());
    let ev = |ring: Vec<usize>| CommEvent { op: "all_reduce", ring, seq: 0, messages: 2, bytes: 2 * ROWS * COLS * 4 };
    assert_eq!(comm, vec![ev(vec![0, 2]), ev(vec![3, 1])]);
}

#[test]
fn all_reduce_maximum_and_minimum_over_every_rank() {
    for (op, f) in [(nl::maximum, f64::max as fn(f64, f64) -> f64), (nl::minimum, f64::min)] {
        let (got, _) = on_four(Precision::Hardware, move |ctx| {
            let (s, d) = (src(ctx, Dtype::F32, &[4, 6])?, alloc(ctx, &[24], Dtype::F32, Buffer::PrivateHbm)?);
            ncc::all_reduce(ctx, &[s], std::slice::from_ref(&d), &ReplicaGroup::new(vec![]), op, opts())?;
            Ok(d.to_f32_vec())
        });
        for g in &got {
            assert_close(g, &fold(&[0, 1, 2, 3], f), 0.0, 0.0);
        }
    }
}

#[test]
fn all_gather_concatenates_in_member_order_along_dim_0_and_dim_1() {
    let members = [2usize, 0, 3, 1];
    let (got, comm) = on_four(Precision::Hardware, move |ctx| {
        let g = group(&[&[2, 0, 3, 1]]);
        let s = src(ctx, Dtype::F32, &[4, 6])?;
        let rows = alloc(ctx, &[16, 6], Dtype::F32, Buffer::PrivateHbm)?;
        ncc::all_gather(ctx, std::slice::from_ref(&s), std::slice::from_ref(&rows), &g, 0, opts())?;
        let tile = sbuf_with(ctx, &[4, 6], Dtype::F32, &values(ctx.rank()))?;
        let cols = alloc(ctx, &[4, 24], Dtype::F32, Buffer::Sbuf)?;
        ncc::all_gather(ctx, &[tile], std::slice::from_ref(&cols), &g, 1, opts())?;
        Ok((rows.to_f32_vec(), cols.to_f32_vec()))
    });
    let by_rows: Vec<f64> = members.iter().flat_map(|&m| values(m)).collect();
    let by_cols: Vec<f64> =
        (0..ROWS).flat_map(|i| members.iter().flat_map(move |&m| values(m)[i * COLS..(i + 1) * COLS].to_vec())).collect();
    for (rows, cols) in &got {
        assert_close(rows, &by_rows, 0.0, 0.0);
        assert_close(cols, &by_cols, 0.0, 0.0);
    }
    assert_eq!(comm.iter().map(|e| (e.op, e.seq)).collect::<Vec<_>>(), vec![("all_gather", 0), ("all_gather", 1)]);
}

#[test]
fn reduce_scatter_gives_the_kth_member_the_kth_chunk_of_the_sum() {
    let members = [3usize, 1, 0, 2];
    let run = |precision| {
        on_four(precision, |ctx| {
            let s = src(ctx, Dtype::F32, &[4, 6])?;
            let d = alloc(ctx, &[1, 6], Dtype::Bf16, Buffer::PrivateHbm)?;
            ncc::reduce_scatter(ctx, &[s], std::slice::from_ref(&d), &group(&[&[3, 1, 0, 2]]), 0, nl::add, opts())?;
            Ok(d.to_f32_vec())
        })
    };
    let ((fp32, _), (hw, _)) = (run(Precision::Fp32), run(Precision::Hardware));
    let sum = fold(&members, |a, b| a + b);
    for (k, &r) in members.iter().enumerate() {
        let chunk = &sum[k * COLS..(k + 1) * COLS];
        assert_close(&fp32[r], chunk, 0.0, 0.0);
        assert_close(&hw[r], &chunk.iter().map(|&x| f64::from(bf16(x as f32))).collect::<Vec<_>>(), 0.0, 0.0);
    }
}

#[test]
fn all_to_all_transposes_chunks_between_members() {
    let members = [1usize, 3, 0, 2];
    let (got, _) = on_four(Precision::Hardware, |ctx| {
        let s = src(ctx, Dtype::F32, &[4, 6])?;
        let d = alloc(ctx, &[4, 6], Dtype::F32, Buffer::PrivateHbm)?;
        ncc::all_to_all(ctx, &[s], std::slice::from_ref(&d), &group(&[&[1, 3, 0, 2]]), 0, opts())?;
        Ok(d.to_f32_vec())
    });
    for (k, &r) in members.iter().enumerate() {
        // Chunk j of member k's dst is chunk k of member j's src (one row per chunk).
        let want: Vec<f64> = members.iter().flat_map(|&j| values(j)[k * COLS..(k + 1) * COLS].to_vec()).collect();
        assert_close(&got[r], &want, 0.0, 0.0);
    }
}

#[test]
fn invalid_calls_are_errors_naming_the_op_and_the_limit() {
    with_timeout(30, || {
        Launch::new()
            .run(|ctx| {
                let g = ReplicaGroup::new(vec![]);
                let h = src(ctx, Dtype::F32, &[4, 6])?;
                let wide = alloc(ctx, &[8, 6], Dtype::F32, Buffer::PrivateHbm)?;
                let e = expect_err(ncc::all_reduce(ctx, std::slice::from_ref(&h), std::slice::from_ref(&h), &g, nl::multiply, opts()));
                assert_err(&e, ErrorKind::Constraint, &["ncc.all_reduce", "nl.multiply"]);
                let e = expect_err(ncc::all_reduce(ctx, std::slice::from_ref(&h), std::slice::from_ref(&wide), &g, nl::add, opts()));
                assert_err(&e, ErrorKind::Shape, &["ncc.all_reduce", "element count"]);
                let e = expect_err(ncc::all_gather(ctx, std::slice::from_ref(&h), std::slice::from_ref(&wide), &g, 1, opts()));
                assert_err(&e, ErrorKind::Argument, &["collective_dim", "ncc.all_gather"]);
                let bf = alloc(ctx, &[4, 6], Dtype::Bf16, Buffer::PrivateHbm)?;
                let e = expect_err(ncc::all_gather(ctx, std::slice::from_ref(&h), &[bf], &g, 0, opts()));
                assert_err(&e, ErrorKind::Constraint, &["same dtype"]);
                let e = expect_err(ncc::reduce_scatter(ctx, std::slice::from_ref(&h), std::slice::from_ref(&h), &g, 1, nl::add, opts()));
                assert_err(&e, ErrorKind::Argument, &["collective_dim", "ncc.reduce_scatter"]);
                let tile = alloc(ctx, &[4, 6], Dtype::F32, Buffer::Sbuf)?;
                let e = expect_err(ncc::all_to_all(ctx, std::slice::from_ref(&tile), std::slice::from_ref(&tile), &g, 0, opts()));
                assert_err(&e, ErrorKind::Constraint, &["ncc.all_to_all", "must be in HBM"]);
                let ps = alloc(ctx, &[4, 6], Dtype::F32, Buffer::Psum)?;
                let e = expect_err(ncc::all_reduce(ctx, std::slice::from_ref(&ps), std::slice::from_ref(&ps), &g, nl::add, opts()));
                assert_err(&e, ErrorKind::Constraint, &["PSUM"]);
                let e = expect_err(ncc::all_reduce(ctx, &[tile.clone(), tile.clone()], &[tile.clone(), tile], &g, nl::add, opts()));
                assert_err(&e, ErrorKind::Constraint, &["coalesced", "HBM"]);
                let e = expect_err(ncc::all_reduce(ctx, std::slice::from_ref(&h), &[], &g, nl::add, opts()));
                assert_err(&e, ErrorKind::Constraint, &["dsts must hold at least one tensor"]);
                Ok(())
            })
            .unwrap();
        // Found when the members meet, so it ends the run.
        let e = expect_err(Launch::new().run(|ctx| {
            let wide = alloc(ctx, &[8, 6], Dtype::F32, Buffer::PrivateHbm)?;
            ncc::all_gather(ctx, &[src(ctx, Dtype::F32, &[4, 6])?], &[wide], &ReplicaGroup::new(vec![]), 0, opts())
        }));
        assert_err(&e, ErrorKind::Shape, &["ncc.all_gather", "must have shape [4, 6]"]);
    });
}

#[test]
fn coalesced_hbm_lists_pair_srcs_with_dsts() {
    let (got, _) = on_four(Precision::Hardware, |ctx| {
        let (a, b) = (src(ctx, Dtype::F32, &[4, 6])?, src(ctx, Dtype::F32, &[24])?);
        let (da, db) = (alloc(ctx, &[4, 6], Dtype::F32, Buffer::PrivateHbm)?, alloc(ctx, &[24], Dtype::F32, Buffer::PrivateHbm)?);
        ncc::all_reduce(ctx, &[a, b], &[da.clone(), db.clone()], &ReplicaGroup::new(vec![]), nl::maximum, opts())?;
        Ok((da.to_f32_vec(), db.to_f32_vec()))
    });
    let want = fold(&[0, 1, 2, 3], f64::max);
    for (a, b) in &got {
        assert_close(a, &want, 0.0, 0.0);
        assert_close(b, &want, 0.0, 0.0);
    }
}

#[test]
fn a_rank_that_fails_before_the_collective_ends_the_run() {
    let e = with_timeout(30, || {
        expect_err(Launch::new().ranks(4).run_all(|ctx| {
            let s = src(ctx, Dtype::F32, &[4, 6])?;
            if ctx.rank() == 2 {
                return Err(nki_core::NkiError::constraint("test", "rank 2 fails".to_string()));
            }
            ncc::all_reduce(ctx, std::slice::from_ref(&s), std::slice::from_ref(&s), &ReplicaGroup::new(vec![]), nl::add, opts())
        }))
    });
    assert!(e.to_string().contains("rank 2 fails"), "{e}");
}

#[test]
fn members_with_mismatched_shapes_are_an_error_on_every_rank() {
    let e = with_timeout(30, || {
        expect_err(Launch::new().ranks(2).run_all(|ctx| {
            let cols = if ctx.rank() == 0 { 6 } else { 3 };
            let s = alloc(ctx, &[4, cols], Dtype::F32, Buffer::PrivateHbm)?;
            let d = alloc(ctx, &[8, 6], Dtype::F32, Buffer::PrivateHbm)?;
            ncc::all_gather(ctx, &[s], &[d], &ReplicaGroup::new(vec![]), 0, opts())
        }))
    });
    assert_err(&e, ErrorKind::Shape, &["ncc.all_gather", "do not concatenate along dim 0"]);
}

#[test]
fn collective_permute_moves_along_its_pairs_and_untargeted_ranks_keep_their_dst() {
    let (got, comm) = on_four(Precision::Hardware, |ctx| {
        let s = src(ctx, Dtype::F32, &[4, 6])?;
        let d = alloc(ctx, &[24], Dtype::F32, Buffer::PrivateHbm)?;
        d.fill_from_f32(&[-1.0; 24])?;
        ncc::collective_permute(ctx, &[s], std::slice::from_ref(&d), vec![vec![0, 2], vec![2, 0], vec![1, 3]], opts())?;
        let id = ncc::rank_id(ctx, None)?.value();
        Ok((d.to_f32_vec(), id))
    });
    for (r, from) in [(0, Some(2)), (1, None), (2, Some(0)), (3, Some(1))] {
        let want = from.map_or(vec![-1.0; ROWS * COLS], values);
        assert_close(&got[r].0, &want, 0.0, 0.0);
        assert_eq!(got[r].1, r as i64, "rank_id on rank {r}");
    }
    assert_eq!(comm, vec![CommEvent { op: "collective_permute", ring: vec![0, 1, 2, 3], seq: 0, messages: 3, bytes: 3 * ROWS * COLS * 4 }]);
    with_timeout(30, || {
        Launch::new()
            .ranks(1)
            .run(|ctx| {
                let h = src(ctx, Dtype::F32, &[4, 6])?;
                for pairs in [vec![vec![0, 1]], vec![vec![0, 0], vec![0, 0]], vec![vec![0]]] {
                    let e = expect_err(ncc::collective_permute(ctx, std::slice::from_ref(&h), std::slice::from_ref(&h), pairs, opts()));
                    assert_err(&e, ErrorKind::Argument, &["source_target_pairs", "each target once"]);
                }
                let tile = alloc(ctx, &[4, 6], Dtype::F32, Buffer::Sbuf)?;
                let e = expect_err(ncc::collective_permute(
                    ctx,
                    std::slice::from_ref(&tile),
                    std::slice::from_ref(&tile),
                    vec![vec![0, 0]],
                    opts(),
                ));
                assert_err(&e, ErrorKind::Constraint, &["ncc.collective_permute", "must be in HBM"]);
                Ok(())
            })
            .unwrap()
    });
}
