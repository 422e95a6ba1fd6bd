//! `ncc` ring collectives across emulated ranks: permute direction, replica
//! groups, channels, the reducing permute, processing-rank ids, LNC2 pairing and
//! the communication log.

use crate::common::*;
use nki_core::collectives::{
    self as ncc, CommEvent, PermuteOpts, RankIdOpts, ReplicaGroup, collective_permute_implicit, collective_permute_implicit_reduce,
};
use nki_core::nl;
use nki_core::{Buffer, Ctx, Dtype, ErrorKind, Launch, Result, Tensor, s};

const N: usize = 6;

/// The payload rank `r` (program `p`) sends: `100 r + 10 p + i`.
fn payload(r: usize, p: usize) -> Vec<f64> {
    (0..N).map(|i| (100 * r + 10 * p + i) as f64).collect()
}

fn permute(ctx: &Ctx, src: &Tensor, dst: &Tensor, group: &ReplicaGroup) -> Result<()> {
    collective_permute_implicit(ctx, &[vec![src.clone()]], &[vec![dst.clone()]], group, PermuteOpts::default())
}

fn group(g: &[&[i64]]) -> ReplicaGroup {
    ReplicaGroup::new(g.iter().map(|r| r.to_vec()).collect())
}

/// Runs one permute over `ranks` ranks with SBUF buffers; returns what each rank received.
fn received(ranks: usize, g: ReplicaGroup) -> (Vec<Vec<f32>>, Vec<CommEvent>) {
    with_timeout(30, move || {
        let report = Launch::new()
            .ranks(ranks)
            .run_all(|ctx| {
                let src = sbuf_with(ctx, &[2, 3], Dtype::F32, &payload(ctx.rank(), 0))?;
                let dst = alloc(ctx, &[2, 3], Dtype::F32, Buffer::Sbuf)?;
                permute(ctx, &src, &dst, &g)?;
                Ok(dst.to_f32_vec())
            })
            .unwrap();
        (report.results.into_iter().map(|mut r| r.swap_remove(0)).collect(), report.comm)
    })
}

fn to_f32(v: Vec<f64>) -> Vec<f32> {
    v.into_iter().map(|x| x as f32).collect()
}

#[test]
fn each_rank_receives_from_its_predecessor() {
    let (got, comm) = received(4, group(&[&[0, 1, 2, 3]]));
    for (r, g) in got.iter().enumerate() {
        assert_eq!(*g, to_f32(payload((r + 3) % 4, 0)), "rank {r}");
    }
    assert_eq!(comm, vec![CommEvent { op: "collective_permute_implicit", ring: vec![0, 1, 2, 3], seq: 0, messages: 4, bytes: 4 * N * 4 }]);
    // An empty replica group is one ring of every rank.
    let (got, _) = received(3, ReplicaGroup::new(vec![]));
    for (r, g) in got.iter().enumerate() {
        assert_eq!(*g, to_f32(payload((r + 2) % 3, 0)), "rank {r}");
    }
}

#[test]
fn ring_order_is_the_order_inside_the_group() {
    // 0 -> 2 -> 1 -> 3 -> 0.
    let (got, _) = received(4, group(&[&[0, 2, 1, 3]]));
    for (r, from) in [(0, 3), (1, 2), (2, 0), (3, 1)] {
        assert_eq!(got[r], to_f32(payload(from, 0)), "rank {r}");
    }
}

#[test]
fn replica_groups_are_independent_rings() {
    let (got, mut comm) = received(4, group(&[&[0, 2], &[1, 3]]));
    for (r, from) in [(0, 2), (2, 0), (1, 3), (3, 1)] {
        assert_eq!(got[r], to_f32(payload(from, 0)), "rank {r}");
    }
    comm.sort_by_key(|e| e.ring.clone());
    let ev = |ring: Vec<usize>| CommEvent { op: "collective_permute_implicit", ring, seq: 0, messages: 2, bytes: 2 * N * 4 };
    assert_eq!(comm, vec![ev(vec![0, 2]), ev(vec![1, 3])]);
    // Singleton groups send to themselves.
    let (got, comm) = received(2, group(&[&[0], &[1]]));
    assert_eq!(got[0], to_f32(payload(0, 0)));
    assert_eq!(got[1], to_f32(payload(1, 0)));
    assert_eq!(comm.len(), 2);
}

#[test]
fn ring_steps_follow_the_processing_rank_id() {
    // Pass blocks around the ring (0, 3, 1, 2) for n - 1 steps; at each step the
    // held block must come from current_processing_rank_id(step). Two channels
    // move the two halves of the buffer.
    let g = group(&[&[0, 3, 1, 2]]);
    let (report, ids) = with_timeout(30, move || {
        let report = Launch::new()
            .ranks(4)
            .run_all(|ctx| {
                let mut cur = alloc(ctx, &[1, 2 * N as i64], Dtype::F32, Buffer::SharedHbm)?;
                let mut nxt = alloc(ctx, &[1, 2 * N as i64], Dtype::F32, Buffer::SharedHbm)?;
                cur.fill_from_f32(&to_f32([payload(ctx.rank(), 0), payload(ctx.rank(), 1)].concat()))?;
                let mut seen = Vec::new();
                for step in 0..4 {
                    let id = ncc::collective_permute_implicit_current_processing_rank_id(ctx, step, &g, RankIdOpts::default())?;
                    let other = ncc::collective_permute_implicit_current_processing_rank_id(
                        ctx,
                        step,
                        &g,
                        RankIdOpts { channel_id: Some(1), ..Default::default() },
                    )?;
                    assert_eq!(id.value(), other.value());
                    seen.push((id.value(), cur.to_f32_vec()));
                    if step < 3 {
                        let halves = |t: &Tensor| -> Result<Vec<Vec<Tensor>>> {
                            Ok(vec![vec![t.index(&s![.., 0..N])?], vec![t.index(&s![.., N..2 * N])?]])
                        };
                        collective_permute_implicit(
                            ctx,
                            &halves(&cur)?,
                            &halves(&nxt)?,
                            &g,
                            PermuteOpts { channel_ids: Some(vec![0, 1]), ..Default::default() },
                        )?;
                        std::mem::swap(&mut cur, &mut nxt);
                    }
                }
                Ok(seen)
            })
            .unwrap();
        let ids: Vec<Vec<i64>> = report.results.iter().map(|r| r[0].iter().map(|(id, _)| *id).collect()).collect();
        (report, ids)
    });
    let ring = [0usize, 3, 1, 2];
    for (r, rank_ids) in ids.iter().enumerate() {
        let pos = ring.iter().position(|&x| x == r).unwrap();
        for (step, &id) in rank_ids.iter().enumerate() {
            let want_id = ring[(pos + 4 - step) % 4];
            assert_eq!(id, want_id as i64, "rank {r} step {step}");
            let data = &report.results[r][0][step].1;
            assert_eq!(*data, to_f32([payload(want_id, 0), payload(want_id, 1)].concat()), "rank {r} step {step}");
        }
    }
    assert_eq!(report.comm.len(), 3);
    for (seq, ev) in report.comm.iter().enumerate() {
        assert_eq!((ev.seq, ev.messages, ev.bytes), (seq as u64, 8, 4 * 2 * N * 4));
    }
}

#[test]
fn processing_rank_id_is_the_global_rank_of_each_group() {
    let g = group(&[&[3, 1], &[0, 2]]);
    let ids = Launch::new()
        .ranks(4)
        .run_ranks(|ctx| {
            (0..3)
                .map(|s| ncc::collective_permute_implicit_current_processing_rank_id(ctx, s, &g, RankIdOpts::default()).map(|r| r.value()))
                .collect::<Result<Vec<_>>>()
        })
        .unwrap();
    assert_eq!(ids, vec![vec![0, 2, 0], vec![1, 3, 1], vec![2, 0, 2], vec![3, 1, 3]]);
}

#[test]
fn permute_reduce_adds_then_sends_and_a_ring_all_reduce_converges() {
    let n = 4usize;
    let partial = |r: usize| -> Vec<f64> { dyadic(N, 90 + r as u64, -8.0, 8.0, 6) };
    let g = group(&[&[0, 1, 2, 3]]);
    let report = with_timeout(30, move || {
        Launch::new()
            .ranks(n)
            .run_all(|ctx| {
                let mine = sbuf_with(ctx, &[1, N as i64], Dtype::F32, &partial(ctx.rank()))?;
                let buf = alloc(ctx, &[1, N as i64], Dtype::F32, Buffer::Sbuf)?;
                nki_core::isa::memset(ctx, &buf, 0.0, Default::default())?;
                // dst is also a source: every source must be read before any write.
                for _ in 0..n - 1 {
                    collective_permute_implicit_reduce(
                        ctx,
                        &[vec![mine.clone()]],
                        &[vec![buf.clone()]],
                        &[vec![buf.clone()]],
                        &g,
                        nl::add,
                        PermuteOpts::default(),
                    )?;
                }
                Ok(buf.to_f32_vec())
            })
            .unwrap()
    });
    let total: Vec<f64> = (0..N).map(|i| (0..n).map(|r| partial(r)[i]).sum()).collect();
    for r in 0..n {
        let want: Vec<f64> = (0..N).map(|i| total[i] - partial(r)[i]).collect();
        assert_close(&report.results[r][0], &want, 0.0, 0.0);
    }
    assert_eq!(report.comm.len(), 3);
    assert!(report.comm.iter().all(|e| e.op == "collective_permute_implicit_reduce" && e.messages == 4));
    // Each rank sends one reduced buffer per step.
    assert!(report.comm.iter().all(|e| e.bytes == n * N * 4), "{:?}", report.comm);
}

#[test]
fn permute_reduce_maximum_and_cast_to_the_destination() {
    let a = |r: usize| dyadic(N, 70 + r as u64, -4.0, 4.0, 10);
    let b = |r: usize| dyadic(N, 80 + r as u64, -4.0, 4.0, 10);
    let g = group(&[&[0, 1]]);
    let got = with_timeout(30, move || {
        Launch::new()
            .ranks(2)
            .run_ranks(|ctx| {
                let r = ctx.rank();
                let x = Tensor::from_f32(&[N], &to_f32(a(r)), Dtype::F32)?;
                let y = Tensor::from_f32(&[N], &to_f32(b(r)), Dtype::F32)?;
                let mx = alloc(ctx, &[N as i64], Dtype::F32, Buffer::PrivateHbm)?;
                collective_permute_implicit_reduce(
                    ctx,
                    &[vec![x.clone()]],
                    &[vec![y.clone()]],
                    &[vec![mx.clone()]],
                    &g,
                    nl::maximum,
                    PermuteOpts::default(),
                )?;
                let sum = alloc(ctx, &[2, N as i64 / 2], Dtype::Bf16, Buffer::Sbuf)?;
                collective_permute_implicit_reduce(ctx, &[vec![x]], &[vec![y]], &[vec![sum.clone()]], &g, nl::add, PermuteOpts::default())?;
                Ok((mx.to_f32_vec(), sum.to_f32_vec()))
            })
            .unwrap()
    });
    for (r, (mx_got, sum_got)) in got.iter().enumerate() {
        let from = 1 - r;
        let mx: Vec<f64> = (0..N).map(|i| a(from)[i].max(b(from)[i])).collect();
        assert_close(mx_got, &mx, 0.0, 0.0);
        let sum: Vec<f32> = (0..N).map(|i| bf16((a(from)[i] + b(from)[i]) as f32)).collect();
        assert_bits(sum_got, &sum);
    }
}

#[test]
fn lnc2_pairs_program_p_with_program_p_of_the_predecessor() {
    let g = group(&[&[0, 1, 2]]);
    let report = with_timeout(30, move || {
        Launch::new()
            .ranks(3)
            .lnc(2)
            .run_all(|ctx| {
                // Per-core SBUF buffers: each core sends its own data.
                let src = sbuf_with(ctx, &[1, N as i64], Dtype::F32, &payload(ctx.rank(), ctx.program_id()))?;
                let dst = alloc(ctx, &[1, N as i64], Dtype::F32, Buffer::Sbuf)?;
                permute(ctx, &src, &dst, &g)?;
                // Shared-HBM buffers: both programs name the same tensors.
                let hsrc = alloc(ctx, &[1, N as i64], Dtype::F32, Buffer::SharedHbm)?;
                let hdst = alloc(ctx, &[1, N as i64], Dtype::F32, Buffer::SharedHbm)?;
                hsrc.index(&s![.., ctx.program_id() * 3..ctx.program_id() * 3 + 3])?
                    .fill_from_f32(&to_f32(payload(ctx.rank(), 0)[ctx.program_id() * 3..ctx.program_id() * 3 + 3].to_vec()))?;
                nki_core::isa::core_barrier(ctx, &hsrc, &[0, 1], Default::default())?;
                permute(ctx, &hsrc, &hdst, &g)?;
                Ok((dst.to_f32_vec(), hdst.to_f32_vec()))
            })
            .unwrap()
    });
    for r in 0..3 {
        for p in 0..2 {
            let (sb, hb) = &report.results[r][p];
            assert_eq!(*sb, to_f32(payload((r + 2) % 3, p)), "rank {r} program {p}");
            assert_eq!(*hb, to_f32(payload((r + 2) % 3, 0)), "rank {r} program {p}");
        }
    }
    assert_eq!(report.comm.len(), 2);
    // SBUF: six distinct sources; shared HBM: one per rank.
    assert_eq!(report.comm[0].bytes, 6 * N * 4);
    assert_eq!(report.comm[1].bytes, 3 * N * 4);
    assert_eq!(report.comm[1].seq, 1);
}

#[test]
fn argument_rules() {
    Launch::new()
        .run(|ctx| {
            let g = group(&[&[0]]);
            let a = alloc(ctx, &[2, 3], Dtype::F32, Buffer::Sbuf)?;
            let b = alloc(ctx, &[2, 4], Dtype::F32, Buffer::Sbuf)?;
            let e = expect_err(permute(ctx, &a, &b, &g));
            assert_err(&e, ErrorKind::Shape, &["collective_permute_implicit", "channel 0", "same element count"]);
            let c = alloc(ctx, &[2, 3], Dtype::Bf16, Buffer::Sbuf)?;
            let e = expect_err(permute(ctx, &a, &c, &g));
            assert_eq!(e.kind, ErrorKind::Shape);
            let p = alloc(ctx, &[2, 3], Dtype::F32, Buffer::Psum)?;
            let e = expect_err(permute(ctx, &a, &p, &g));
            assert_err(&e, ErrorKind::Constraint, &["PSUM"]);
            let e = expect_err(collective_permute_implicit(
                ctx,
                &[vec![a.clone()]],
                &[vec![a.clone()]],
                &g,
                PermuteOpts { channel_ids: Some(vec![1]), ..Default::default() },
            ));
            assert_err(&e, ErrorKind::Constraint, &["ncc.collective_permute_implicit", "channel_ids [1]"]);
            let e = expect_err(collective_permute_implicit(
                ctx,
                &[vec![a.clone()]],
                &[vec![a.clone()]],
                &g,
                PermuteOpts { channel_ids: Some(vec![0, 1]), ..Default::default() },
            ));
            assert_err(&e, ErrorKind::Constraint, &["1 channels", "names 2"]);
            let e =
                expect_err(collective_permute_implicit(ctx, &[vec![a.clone(), a.clone()]], &[vec![a.clone()]], &g, PermuteOpts::default()));
            assert_err(&e, ErrorKind::Constraint, &["exactly one tensor", "holds 2"]);
            let e = expect_err(permute(ctx, &a, &a, &group(&[&[0, 1]])));
            assert_err(&e, ErrorKind::Argument, &["replica_group", "rank 1"]);
            let e = expect_err(permute(ctx, &a, &a, &group(&[&[0], &[0]])));
            assert_err(&e, ErrorKind::Argument, &["replica_group", "distinct"]);
            let e = expect_err(collective_permute_implicit_reduce(
                ctx,
                &[vec![a.clone()]],
                &[vec![a.clone()]],
                &[vec![a.clone()]],
                &g,
                nl::multiply,
                PermuteOpts::default(),
            ));
            assert_err(&e, ErrorKind::Constraint, &["ncc.collective_permute_implicit_reduce", "nl.multiply"]);
            Ok(())
        })
        .unwrap();
    let e = expect_err(Launch::new().ranks(2).run(|ctx| {
        // Written: rank 0's permute within its own group is a valid one.
        let a = sbuf_with(ctx, &[1, 1], Dtype::F32, &[1.0])?;
        permute(ctx, &a, &a, &group(&[&[0]]))
    }));
    assert_err(&e, ErrorKind::Argument, &["rank 1 is in none of the groups"]);
}

#[test]
fn buffers_must_match_across_ranks() {
    // Each rank's own src and dst agree, but rank 0 sends 4 elements into rank 1's 6.
    let e = expect_err(with_timeout(30, || {
        Launch::new().ranks(2).run(|ctx| {
            let n = 4 + 2 * ctx.rank() as i64;
            let a = alloc(ctx, &[1, n], Dtype::F32, Buffer::Sbuf)?;
            let b = alloc(ctx, &[1, n], Dtype::F32, Buffer::Sbuf)?;
            permute(ctx, &a, &b, &group(&[&[0, 1]]))
        })
    }));
    assert_err(&e, ErrorKind::Shape, &["collective_permute_implicit", "channel 0", "[1, 4]", "[1, 6]", "same element count"]);
    // The same with dtypes: a plain permute moves raw data and does not cast.
    let e = expect_err(with_timeout(30, || {
        Launch::new().ranks(2).run(|ctx| {
            let d = if ctx.rank() == 0 { Dtype::F32 } else { Dtype::Bf16 };
            let a = alloc(ctx, &[1, 4], d, Buffer::Sbuf)?;
            permute(ctx, &a, &a, &group(&[&[0, 1]]))
        })
    }));
    assert_err(&e, ErrorKind::Shape, &["float32", "bfloat16"]);
    // And with channel counts.
    let e = expect_err(with_timeout(30, || {
        Launch::new().ranks(2).run(|ctx| {
            let a = alloc(ctx, &[1, 4], Dtype::F32, Buffer::Sbuf)?;
            let n = 1 + ctx.rank();
            let chans: Vec<Vec<Tensor>> = (0..n).map(|c| Ok(vec![a.index(&s![.., c..c + 1])?])).collect::<Result<_>>()?;
            collective_permute_implicit(
                ctx,
                &chans,
                &chans,
                &group(&[&[0, 1]]),
                PermuteOpts { channel_ids: Some((0..n as i64).collect()), ..Default::default() },
            )
        })
    }));
    assert_err(&e, ErrorKind::Constraint, &["channels", "same channels"]);
}
