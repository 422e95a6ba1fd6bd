//! `nisa.sendrecv` between the two programs of an LNC2 pair: tiles swapped
//! (sources read before destinations are written), pipes matched by their
//! issue order, and the documented constraints as errors.

use crate::common::*;
use nki_core::hw::Generation;
use nki_core::isa::{SendrecvOpts, sendrecv};
use nki_core::{Buffer, Dtype, ErrorKind, Launch};

/// The values of a program's two tiles.
type Tiles = (Vec<f32>, Vec<f32>);

/// Each program swaps tile `a` over pipe 1, then tile `b` over pipe 2 (in
/// place: every source is read before a destination is written); `crossed`
/// makes program 1 issue pipe 2 first.
fn swap_two(crossed: bool) -> nki_core::Result<Vec<Vec<Tiles>>> {
    with_timeout(30, move || {
        Launch::new()
            .lnc(2)
            .run_all(|ctx| {
                let me = ctx.program_id();
                let a = sbuf_with(ctx, &[2, 3], Dtype::F32, &[(10 * me) as f64; 6])?;
                let b = sbuf_with(ctx, &[2, 3], Dtype::F32, &[(10 * me + 1) as f64; 6])?;
                let other = 1 - me as i64;
                let pipes = if crossed && me == 1 { [2, 1] } else { [1, 2] };
                for pipe in pipes {
                    let t = if pipe == 1 { &a } else { &b };
                    sendrecv(ctx, t, t, other, other, pipe, SendrecvOpts::default())?;
                }
                Ok((a.to_f32_vec(), b.to_f32_vec()))
            })
            .map(|r| {
                // Logged like the collectives: two exchanges of the rank's pair, one message and 24 bytes per program.
                let log: Vec<_> = r.comm.iter().map(|c| (c.op, c.ring.clone(), c.messages, c.bytes)).collect();
                assert_eq!(log, vec![("sendrecv", vec![0], 2, 48); 2]);
                r.results
            })
    })
}

#[test]
fn the_pair_swaps_tiles_in_place_per_pipe() {
    let outs = swap_two(false).unwrap();
    // results[rank][program]
    assert_eq!(outs[0][0], (vec![10.0; 6], vec![11.0; 6]));
    assert_eq!(outs[0][1], (vec![0.0; 6], vec![1.0; 6]));
    // Each program blocks in its first exchange: crossed pipes are a deadlock, reported.
    let e = expect_err(swap_two(true));
    assert_err(&e, ErrorKind::Collective, &["deadlock", "sendrecv"]);
}

#[test]
fn refuses_what_the_docs_rule_out() {
    let run = |launch: Launch, shape: [i64; 2], peer: Option<i64>, psum: bool| {
        expect_err(with_timeout(30, move || {
            launch
                .run_all(|ctx| {
                    let other = peer.unwrap_or(1 - ctx.program_id() as i64);
                    let s = alloc(ctx, &[2, 3], Dtype::F32, if psum { Buffer::Psum } else { Buffer::Sbuf })?;
                    let d = alloc(ctx, &shape, Dtype::F32, Buffer::Sbuf)?;
                    sendrecv(ctx, &s, &d, other, other, 0, SendrecvOpts::default())
                })
                .map(|_| ())
        }))
    };
    assert_err(&run(Launch::new(), [2, 3], None, false), ErrorKind::Constraint, &["nisa.sendrecv", "LNC2"]);
    assert_err(&run(Launch::new().lnc(2), [2, 4], None, false), ErrorKind::Shape, &["same dtype and shape"]);
    assert_err(&run(Launch::new().lnc(2), [2, 3], None, true), ErrorKind::Constraint, &["src", "SBUF"]);
    assert_err(&run(Launch::new().lnc(2), [2, 3], Some(2), false), ErrorKind::Argument, &["send_to_rank = 2", "other program"]);
    let e = run(Launch::new().generation(Generation::Trn1), [2, 3], None, false);
    assert_err(&e, ErrorKind::Constraint, &["nisa.sendrecv", "the launch targets trn1"]);
}
