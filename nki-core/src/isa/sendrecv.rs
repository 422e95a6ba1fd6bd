//! `nisa.sendrecv`: the two programs of an LNC2 pair swap SBUF tiles over DMA.
//!
//! Each program sends `src` to the other and receives the other's `src` into
//! its `dst`. The n-th `sendrecv` of a `pipe_id` meets the partner's n-th of the
//! same `pipe_id`; every source is read before any destination is written. A
//! partner that never issues it ends the launch with an error (never a hang).

use super::enums::DmaEngine;
use crate::collectives::CommEvent;
use crate::emulator::Ctx;
use crate::profile::{Rendezvous, Unit};
use crate::{Buffer, NkiError, Result, Tensor};

/// Bytes per partition a `dma_engine=gpsimd_dma` transfer moves at most.
const GPSIMD_DMA_PARTITION_BYTES: usize = 1024;

/// Optional arguments of `nisa.sendrecv`.
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct SendrecvOpts<'a> {
    /// DMA queue carrying the exchange (default `dma`); no numeric effect, but
    /// `gpsimd_dma` moves at most 1 KiB per partition.
    pub dma_engine: Option<DmaEngine>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// One program's side of an exchange.
struct Side {
    program: usize,
    send_to: usize,
    recv_from: usize,
    src: Tensor,
    dst: Tensor,
}

/// `nisa.sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine)`: program p
/// sends `src` to program `send_to_rank` and receives program
/// `recv_from_rank`'s `src` into `dst` (both the other program of the pair);
/// `src` and `dst` are SBUF tiles of one dtype and shape. trn2 and later.
pub fn sendrecv(
    ctx: &Ctx,
    src: &Tensor,
    dst: &Tensor,
    send_to_rank: i64,
    recv_from_rank: i64,
    pipe_id: i64,
    opts: SendrecvOpts<'_>,
) -> Result<()> {
    const OP: &str = "nisa.sendrecv";
    ctx.begin_generation_op(OP)?;
    ctx.defer_unwritten(OP);
    ctx.record_waiting(OP, Unit::Dma, &[src], &[dst], Rendezvous::CoreBarrier)?;
    if ctx.num_programs() != 2 {
        return Err(NkiError::constraint(
            OP,
            "sendrecv exchanges data within an LNC2 pair, but the kernel was launched without an LNC2 grid (Launch::lnc(2))",
        ));
    }
    for (role, t) in [("src", src), ("dst", dst)] {
        if t.buffer() != Buffer::Sbuf {
            return Err(NkiError::constraint(OP, format!("{role} {} must be in SBUF", t.describe())));
        }
    }
    if src.dtype() != dst.dtype() || src.shape() != dst.shape() {
        return Err(NkiError::shape(OP, format!("src {} and dst {} must have the same dtype and shape", src.describe(), dst.describe())));
    }
    if opts.dma_engine == Some(DmaEngine::GpsimdDma) {
        let per_partition = src.shape().iter().skip(1).product::<usize>() * src.dtype().size_bytes();
        if per_partition > GPSIMD_DMA_PARTITION_BYTES {
            return Err(NkiError::constraint(
                OP,
                format!(
                    "dma_engine=gpsimd_dma moves at most {GPSIMD_DMA_PARTITION_BYTES} bytes per partition; src {} holds {per_partition}",
                    src.describe()
                ),
            ));
        }
    }
    let me = ctx.program_id();
    let partner = |role: &str, r: i64| -> Result<usize> {
        match usize::try_from(r) {
            Ok(p) if p < 2 && p != me => Ok(p),
            _ => Err(NkiError::argument(role, r, &format!("program {me} of an LNC2 pair exchanges with the other program ({})", 1 - me))
                .in_op(OP)),
        }
    };
    let side = Side {
        program: me,
        send_to: partner("send_to_rank", send_to_rank)?,
        recv_from: partner("recv_from_rank", recv_from_rank)?,
        src: src.clone(),
        dst: dst.clone(),
    };
    ctx.validated()?;
    let (round, world, rank) = (ctx.rounds(), ctx.world.clone(), ctx.rank());
    ctx.pipe_exchange(pipe_id, "sendrecv", side, |seq, sides| {
        let sides: Vec<Side> = sides.into_iter().map(|(_, s)| s).collect();
        // Every source is read before any destination is written.
        let sent: Vec<(usize, usize, Vec<f32>)> = sides.iter().map(|s| (s.program, s.send_to, s.src.gather_cells())).collect();
        for s in &sides {
            let Some((_, to, cells)) = sent.iter().find(|(p, _, _)| *p == s.recv_from) else { continue };
            if *to != s.program {
                return Err(NkiError::constraint(
                    OP,
                    format!("program {} receives from program {}, which sends to program {to}", s.program, s.recv_from),
                ));
            }
            let mut cells = cells.clone();
            s.dst.store_cells(s.src.dtype(), &mut cells, round);
        }
        // Logged like the collectives: one message per program, over this rank's pair.
        let bytes = sides.iter().map(|s| s.src.numel() * s.src.dtype().size_bytes()).sum();
        world.record_comm(CommEvent { op: "sendrecv", ring: vec![rank], seq, messages: sides.len(), bytes });
        Ok(())
    })
    .map_err(|e| e.in_op(OP))
}
