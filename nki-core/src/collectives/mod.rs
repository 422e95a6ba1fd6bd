//! `nki.collectives` (`ncc`): ring and group collectives between ranks.
//!
//! A collective is a rendezvous: every program of every rank in the caller's
//! replica group must issue the same collective, in the same order; the last to
//! arrive moves the data for everyone (all sources are read before any
//! destination is written). Each completed collective is logged as a [`CommEvent`].

use crate::emulator::Ctx;
use crate::isa::Register;
use crate::language::NlOp;
use crate::{Buffer, Dtype, ErrorKind, NkiError, Result, Tensor};
use std::collections::HashSet;

/// One call of a collective over a replica group, as its public function
/// received it: the op's name (for messages), the caller's context, the tensor
/// lists it pairs and the group.
struct Call<'a> {
    op: &'static str,
    ctx: &'a Ctx,
    srcs: &'a [Tensor],
    dsts: &'a [Tensor],
    group: &'a ReplicaGroup,
}

/// Declares the public `ncc.<name>` of a collective over a replica group with
/// the signature they all share (context, source and destination lists, replica
/// group, the collective's own arguments, its options), written once here; the
/// body is `$imp`, which receives the bundled [`Call`], those arguments and the
/// options.
macro_rules! group_collective {
    ($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*), $opts:ident => $imp:path) => {
        $(#[$doc])*
        pub fn $name(
            ctx: &$crate::emulator::Ctx,
            srcs: &[$crate::Tensor],
            dsts: &[$crate::Tensor],
            replica_group: &$crate::collectives::ReplicaGroup,
            $($arg: $ty,)*
            opts: $opts<'_>,
        ) -> $crate::Result<()> {
            let call = $crate::collectives::Call { op: concat!("ncc.", stringify!($name)), ctx, srcs, dsts, group: replica_group };
            $imp(call, $($arg,)* opts)
        }
    };
}

mod dense;
mod variable;
pub use dense::{CollectiveOpts, all_gather, all_reduce, all_to_all, collective_permute, reduce_scatter};
pub use variable::{VariableOpts, all_gather_v, all_to_all_v};

/// Replica groups as a kernel parameter or an `#[nki_object]` field holds them
/// (the DSL's `Groups`): the rings' rank ids.
pub type Groups = Vec<Vec<i64>>;

/// `ncc.ReplicaGroup(groups)`: disjoint rings of ranks. Each inner list is one
/// ring in send order (a rank sends to the next one, the last to the first). An
/// empty group list means one ring of every rank of the launch.
///
/// ```
/// use nki_core::collectives::ReplicaGroup;
/// let g = ReplicaGroup::new(vec![vec![0, 4], vec![1, 5]]);
/// assert_eq!(g.ring_of(5, 8).unwrap(), vec![1, 5]);
/// assert_eq!(ReplicaGroup::new(vec![]).ring_of(2, 3).unwrap(), vec![0, 1, 2]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ReplicaGroup(pub Vec<Vec<i64>>);

impl ReplicaGroup {
    /// A replica group from its rings.
    pub fn new(groups: Vec<Vec<i64>>) -> ReplicaGroup {
        ReplicaGroup(groups)
    }

    /// The rings.
    pub fn groups(&self) -> &[Vec<i64>] {
        &self.0
    }

    /// The ring holding `rank` in a launch of `num_ranks` ranks.
    pub fn ring_of(&self, rank: usize, num_ranks: usize) -> Result<Vec<usize>> {
        if self.0.is_empty() {
            return Ok((0..num_ranks).collect());
        }
        let mut seen = HashSet::new();
        for g in &self.0 {
            for &r in g {
                if r < 0 || r as usize >= num_ranks || !seen.insert(r) {
                    return Err(NkiError::argument(
                        "replica_group",
                        format!("{:?}", self.0),
                        &format!("ranks must be distinct and in 0..{num_ranks}; rank {r} is not"),
                    ));
                }
            }
        }
        self.0
            .iter()
            .find(|g| g.contains(&(rank as i64)))
            .map(|g| g.iter().map(|&r| r as usize).collect())
            .ok_or_else(|| NkiError::argument("replica_group", format!("{:?}", self.0), &format!("rank {rank} is in none of the groups")))
    }
}

/// One completed collective.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommEvent {
    /// The collective (`"collective_permute_implicit"`, ...).
    pub op: &'static str,
    /// The ranks of the ring, in ring order.
    pub ring: Vec<usize>,
    /// The ring's collective sequence number (0 for its first collective).
    pub seq: u64,
    /// Point-to-point messages: one per rank and channel.
    pub messages: usize,
    /// Bytes sent, summed over ranks and channels.
    pub bytes: usize,
}

/// Optional arguments of the ring permutes.
#[nki_macros::spec_options]
#[derive(Clone, Debug, Default)]
pub struct PermuteOpts<'a> {
    /// Channel ids, consecutive from 0 (default `[0]`).
    pub channel_ids: Option<Vec<i64>>,
    /// QoS priority; no numeric effect.
    pub priority: Option<i64>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// One rank-program's part in a permute: per channel, its sources and destination.
struct Part {
    slot_rank: usize,
    program: usize,
    channels: Vec<(Vec<Tensor>, Tensor)>,
}

fn flatten(op: &str, what: &str, by_channel: &[Vec<Tensor>], channels: usize) -> Result<Vec<Tensor>> {
    if by_channel.len() != channels {
        return Err(NkiError::constraint(op, format!("{what} has {} channels but channel_ids names {channels}", by_channel.len())));
    }
    by_channel
        .iter()
        .enumerate()
        .map(|(c, list)| match list.as_slice() {
            [t] => Ok(t.clone()),
            _ => Err(NkiError::constraint(
                op,
                format!("{what}[{c}] must hold exactly one tensor (coalescing is not supported), it holds {}", list.len()),
            )),
        })
        .collect()
}

fn check_buffer(op: &str, role: &str, t: &Tensor) -> Result<()> {
    if t.buffer() == Buffer::Psum {
        return Err(NkiError::constraint(op, format!("{role} {} is in PSUM; collectives move HBM or SBUF tensors", t.describe())));
    }
    t.check_bounds(op)
}

fn channel_count(op: &str, opts: &PermuteOpts<'_>) -> Result<usize> {
    let ids = opts.channel_ids.clone().unwrap_or_else(|| vec![0]);
    if ids.is_empty() || ids.iter().enumerate().any(|(i, &c)| c != i as i64) || ids.len() > 4 {
        return Err(NkiError::constraint(op, format!("channel_ids {ids:?} must be 0, 1, ... (at most 4 channels)")));
    }
    Ok(ids.len())
}

fn run_permute(
    ctx: &Ctx,
    op: &'static str,
    srcs: Vec<Vec<Tensor>>,
    dsts: Vec<Tensor>,
    group: &ReplicaGroup,
    reduce: Option<NlOp>,
) -> Result<()> {
    ctx.begin_op(op)?;
    let ring = group.ring_of(ctx.rank(), ctx.num_ranks()).map_err(|e| e.in_op(op))?;
    let reads: Vec<&Tensor> = srcs.iter().flatten().collect();
    let writes: Vec<&Tensor> = dsts.iter().collect();
    ctx.record_waiting(op, crate::profile::Unit::Collective, &reads, &writes, crate::profile::Rendezvous::Ranks(ring.clone()))?;
    for (c, (ss, d)) in srcs.iter().zip(&dsts).enumerate() {
        check_buffer(op, "dst", d)?;
        for s in ss {
            check_buffer(op, "src", s)?;
            if s.numel() != d.numel() || (reduce.is_none() && s.dtype() != d.dtype()) {
                return Err(NkiError::shape(
                    op,
                    format!("channel {c}: src {} and dst {} must have the same element count and dtype", s.describe(), d.describe()),
                ));
            }
        }
    }
    let part = Part { slot_rank: ctx.rank(), program: ctx.program_id(), channels: srcs.into_iter().zip(dsts).collect() };
    let world = ctx.world.clone();
    ctx.collective(&ring, op, part, |seq, parts| {
        let n = ring.len();
        let find = |rank: usize, program: usize| parts.iter().map(|(_, p)| p).find(|p| p.slot_rank == rank && p.program == program);
        // Each destination with the sources it receives. The programs of one rank
        // pass the same shared buffers, so identical transfers are planned once.
        let mut plan: Vec<(Tensor, Vec<Tensor>)> = Vec::new();
        let mut planned = HashSet::new();
        let (mut bytes, mut seen) = (0usize, HashSet::new());
        for (_, me) in &parts {
            let pos = ring.iter().position(|&r| r == me.slot_rank).unwrap_or(0);
            let pred = find(ring[(pos + n - 1) % n], me.program).ok_or_else(|| {
                NkiError::new(ErrorKind::Collective, format!("no program {} on the predecessor of rank {}", me.program, me.slot_rank))
            })?;
            if me.channels.len() != pred.channels.len() {
                return Err(NkiError::constraint(
                    op,
                    format!(
                        "rank {} uses {} channels but its predecessor rank {} uses {}; every rank must pass the same channels",
                        me.slot_rank,
                        me.channels.len(),
                        pred.slot_rank,
                        pred.channels.len()
                    ),
                ));
            }
            for (c, ((_, dst), (psrcs, _))) in me.channels.iter().zip(&pred.channels).enumerate() {
                // Each rank checked its own buffers; the ones that meet here belong to two ranks.
                let s = &psrcs[0];
                if s.numel() != dst.numel() || (reduce.is_none() && s.dtype() != dst.dtype()) {
                    return Err(NkiError::shape(
                        op,
                        format!(
                            "channel {c}: rank {} sends src {} but its successor rank {} receives into dst {}; \
                             the buffers must have the same element count and dtype on every rank",
                            pred.slot_rank,
                            s.describe(),
                            me.slot_rank,
                            dst.describe()
                        ),
                    ));
                }
                // One message per channel: the source, or for a reducing permute the
                // combined sources (counted at the first source's size).
                if seen.insert(view_key(s)) {
                    bytes += s.numel() * s.dtype().size_bytes();
                }
                let key: Vec<_> = std::iter::once(dst).chain(psrcs).map(view_key).collect();
                if planned.insert(key) {
                    plan.push((dst.clone(), psrcs.clone()));
                }
            }
        }
        let round = ctx.rounds();
        let sources: HashSet<u64> = plan.iter().flat_map(|(_, ss)| ss.iter().map(|s| s.storage().id)).collect();
        if reduce.is_none() && plan.iter().all(|(d, _)| !sources.contains(&d.storage().id)) {
            // No destination is anyone's source: copy straight across.
            for (dst, srcs) in &plan {
                dst.copy_cells_from(&srcs[0], round);
            }
        } else {
            // Read every source before writing any destination.
            let mut writes: Vec<(Tensor, Vec<f32>, Dtype)> = Vec::with_capacity(plan.len());
            for (dst, srcs) in plan {
                let vals = match reduce {
                    None => (srcs[0].gather_cells(), srcs[0].dtype()),
                    Some(rop) => {
                        let a = srcs[0].to_f32_vec();
                        let b = srcs[1].to_f32_vec();
                        (a.iter().zip(&b).map(|(&x, &y)| rop.apply2(x, y)).collect(), Dtype::F32)
                    }
                };
                writes.push((dst, vals.0, vals.1));
            }
            for (dst, mut vals, src_dtype) in writes {
                dst.store_cells(src_dtype, &mut vals, round);
                crate::tensor::give_back(vals);
            }
        }
        let channels = parts.first().map_or(0, |(_, p)| p.channels.len());
        world.record_comm(CommEvent { op, ring: ring.clone(), seq, messages: n * channels, bytes });
        Ok(())
    })
    .map_err(|e| e.in_op(op))
}

/// What identifies a view: its storage, offset and shape.
fn view_key(t: &Tensor) -> (u64, isize, Vec<usize>) {
    (t.storage().id, t.layout().offset, t.shape().to_vec())
}

/// `ncc.collective_permute_implicit(srcs_by_channel, dsts_by_channel, replica_group)`:
/// every rank sends each channel's source to its ring successor, whose destination
/// receives it.
pub fn collective_permute_implicit(
    ctx: &Ctx,
    srcs_by_channel: &[Vec<Tensor>],
    dsts_by_channel: &[Vec<Tensor>],
    replica_group: &ReplicaGroup,
    opts: PermuteOpts<'_>,
) -> Result<()> {
    const OP: &str = "ncc.collective_permute_implicit";
    let channels = channel_count(OP, &opts)?;
    let srcs = flatten(OP, "srcs_by_channel", srcs_by_channel, channels)?.into_iter().map(|t| vec![t]).collect();
    let dsts = flatten(OP, "dsts_by_channel", dsts_by_channel, channels)?;
    run_permute(ctx, "collective_permute_implicit", srcs, dsts, replica_group, None)
}

/// `ncc.collective_permute_implicit_reduce(srcs0_by_channel, srcs1_by_channel, dsts_by_channel, replica_group, op)`:
/// every rank combines its two sources element-wise with `op` (in fp32) and sends
/// the result to its ring successor.
pub fn collective_permute_implicit_reduce(
    ctx: &Ctx,
    srcs0_by_channel: &[Vec<Tensor>],
    srcs1_by_channel: &[Vec<Tensor>],
    dsts_by_channel: &[Vec<Tensor>],
    replica_group: &ReplicaGroup,
    op: NlOp,
    opts: PermuteOpts<'_>,
) -> Result<()> {
    const OP: &str = "ncc.collective_permute_implicit_reduce";
    if !matches!(op, NlOp::Add | NlOp::Maximum | NlOp::Minimum) {
        return Err(NkiError::constraint(OP, format!("op must be nl.add, nl.maximum or nl.minimum, got {op}")));
    }
    let channels = channel_count(OP, &opts)?;
    let s0 = flatten(OP, "srcs0_by_channel", srcs0_by_channel, channels)?;
    let s1 = flatten(OP, "srcs1_by_channel", srcs1_by_channel, channels)?;
    let dsts = flatten(OP, "dsts_by_channel", dsts_by_channel, channels)?;
    let srcs = s0.into_iter().zip(s1).map(|(a, b)| vec![a, b]).collect();
    run_permute(ctx, "collective_permute_implicit_reduce", srcs, dsts, replica_group, Some(op))
}

/// Optional arguments of [`collective_permute_implicit_current_processing_rank_id`].
#[nki_macros::spec_options]
#[derive(Clone, Copy, Debug, Default)]
pub struct RankIdOpts<'a> {
    /// Channel (default 0); every channel uses the same ring order.
    pub channel_id: Option<i64>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// `ncc.collective_permute_implicit_current_processing_rank_id(iteration_id, replica_group)`:
/// a register holding the rank whose data this rank holds after `iteration_id`
/// ring steps (its own rank at step 0, then its predecessors). The value is the
/// rank id from the replica group.
pub fn collective_permute_implicit_current_processing_rank_id(
    ctx: &Ctx,
    iteration_id: i64,
    replica_group: &ReplicaGroup,
    opts: RankIdOpts<'_>,
) -> Result<Register> {
    const OP: &str = "ncc.collective_permute_implicit_current_processing_rank_id";
    let _ = opts.name;
    ctx.begin_op(OP)?;
    let ring = replica_group.ring_of(ctx.rank(), ctx.num_ranks()).map_err(|e| e.in_op(OP))?;
    let n = ring.len() as i64;
    let pos = ring.iter().position(|&r| r == ctx.rank()).unwrap_or(0) as i64;
    let idx = (pos - iteration_id).rem_euclid(n) as usize;
    Ok(Register::new(ring[idx] as i64))
}

/// `ncc.rank_id()`: a register holding this rank's id in the launch.
pub fn rank_id(ctx: &Ctx, name: Option<&str>) -> Result<Register> {
    const OP: &str = "ncc.rank_id";
    let _ = name;
    ctx.begin_op(OP)?;
    ctx.record(OP, crate::profile::Unit::Sync, &[], &[])?;
    Ok(Register::new(ctx.rank() as i64))
}
