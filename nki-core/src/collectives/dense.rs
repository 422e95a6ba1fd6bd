//! Group collectives over fixed-size tensors: `all_reduce`, `all_gather`,
//! `reduce_scatter` and `all_to_all`.
//!
//! The members of a replica group take part in the order the group lists them:
//! that order places the gathered blocks, picks which member receives which
//! scattered chunk, and is the order reductions fold in. Reductions combine the
//! members' values in fp32, left to right, and round once into the destination
//! dtype; moves copy cells bit-exactly and need equal dtypes. Coalesced calls
//! (several tensors, HBM only) pair `srcs[i]` with `dsts[i]`. Program `p` of a
//! rank works with program `p` of the other members.

use super::{Call, CommEvent, ReplicaGroup, check_buffer};
use crate::emulator::Ctx;
use crate::language::NlOp;
use crate::profile::{Rendezvous, Unit};
use crate::{Dtype, NkiError, Result, Tensor};

/// Optional arguments of the group collectives.
#[nki_macros::spec_options]
#[derive(Clone, Debug, Default)]
pub struct CollectiveOpts<'a> {
    /// QoS priority; no numeric effect.
    pub priority: Option<i64>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// Checks one side's list: not empty, no PSUM, in bounds, one memory space, and
/// several tensors (a coalesced call) only in HBM; with `hbm_only` none on chip.
fn check_list(op: &str, role: &str, ts: &[Tensor], hbm_only: bool) -> Result<()> {
    let Some(first) = ts.first() else {
        return Err(NkiError::constraint(op, format!("{role} must hold at least one tensor")));
    };
    for t in ts {
        check_buffer(op, role, t)?;
        if hbm_only && t.buffer().is_on_chip() {
            return Err(NkiError::constraint(op, format!("{role}: {} must be in HBM", t.describe())));
        }
        if t.buffer().is_on_chip() != first.buffer().is_on_chip() {
            return Err(NkiError::constraint(op, format!("{role} mixes HBM and SBUF tensors; use one memory space")));
        }
    }
    if ts.len() > 1 && first.buffer().is_on_chip() {
        return Err(NkiError::constraint(op, format!("{role}: coalesced collectives (several tensors) need HBM tensors")));
    }
    Ok(())
}

/// The (src, dst) pairs of a call, checked.
pub(super) fn pairs(op: &str, srcs: &[Tensor], dsts: &[Tensor], hbm_only: bool) -> Result<Vec<(Tensor, Tensor)>> {
    check_list(op, "srcs", srcs, hbm_only)?;
    check_list(op, "dsts", dsts, hbm_only)?;
    if srcs.len() != dsts.len() {
        return Err(NkiError::constraint(op, format!("srcs has {} tensors but dsts has {}", srcs.len(), dsts.len())));
    }
    Ok(srcs.iter().cloned().zip(dsts.iter().cloned()).collect())
}

impl Call<'_> {
    /// The call's (src, dst) pairs, checked as [`pairs`] checks them.
    pub(super) fn pairs(&self, hbm_only: bool) -> Result<Vec<(Tensor, Tensor)>> {
        pairs(self.op, self.srcs, self.dsts, hbm_only)
    }
}

/// Moves need equal dtypes.
pub(super) fn same_dtypes(op: &str, pairs: &[(Tensor, Tensor)]) -> Result<()> {
    match pairs.iter().find(|(s, d)| s.dtype() != d.dtype()) {
        Some((s, d)) => Err(NkiError::constraint(op, format!("src {} and dst {} must have the same dtype", s.describe(), d.describe()))),
        None => Ok(()),
    }
}

/// Element-wise collectives need equal element counts.
fn same_sizes(op: &str, pairs: &[(Tensor, Tensor)]) -> Result<()> {
    match pairs.iter().find(|(s, d)| s.numel() != d.numel()) {
        Some((s, d)) => Err(NkiError::shape(op, format!("src {} and dst {} must have the same element count", s.describe(), d.describe()))),
        None => Ok(()),
    }
}

/// The reductions the collectives accept.
fn reduce_op(op: &str, rop: NlOp) -> Result<NlOp> {
    match rop {
        NlOp::Add | NlOp::Maximum | NlOp::Minimum => Ok(rop),
        _ => Err(NkiError::constraint(op, format!("op must be nl.add, nl.maximum or nl.minimum, got {rop}"))),
    }
}

/// `collective_dim` must be one of `allowed`.
fn check_dim(op: &str, dim: i64, allowed: &[i64], t: &Tensor) -> Result<usize> {
    if !allowed.contains(&dim) {
        return Err(NkiError::argument("collective_dim", dim.to_string(), &format!("{op} supports {allowed:?} for {}", t.describe())));
    }
    Ok(dim as usize)
}

/// The members' fp32 values folded with `rop`, left to right.
fn fold(rop: NlOp, srcs: &[&Tensor]) -> Vec<f32> {
    let mut acc = srcs[0].to_f32_vec();
    for s in &srcs[1..] {
        acc.iter_mut().zip(s.to_f32_vec()).for_each(|(a, b)| *a = rop.apply2(*a, b));
    }
    acc
}

/// An exchange for one program: the members' pairs in group order, the caller's
/// rounding mode; returns the bytes it moved and its point-to-point messages. It
/// reads every source before it writes any destination.
pub(super) type Exchange<'f> = dyn Fn(&[&[(Tensor, Tensor)]], bool) -> Result<Traffic> + 'f;

/// Bytes and point-to-point messages of one exchange.
pub(super) type Traffic = (usize, usize);

/// Every member sends to every other member once per tensor pair.
fn all_pairs(members: &[&[(Tensor, Tensor)]], bytes: usize) -> Traffic {
    let n = members.len();
    (bytes, n * n.saturating_sub(1) * members[0].len())
}

/// One rank-program's part of a collective [`run`] joins: its (src, dst) pairs.
struct Part {
    rank: usize,
    program: usize,
    pairs: Vec<(Tensor, Tensor)>,
}

/// Joins the collective `op` over the caller's group and runs `exchange` once per
/// program when every member has arrived.
pub(super) fn run(ctx: &Ctx, op: &'static str, group: &ReplicaGroup, pairs: Vec<(Tensor, Tensor)>, exchange: &Exchange<'_>) -> Result<()> {
    ctx.begin_op(op)?;
    let members = group.ring_of(ctx.rank(), ctx.num_ranks()).map_err(|e| e.in_op(op))?;
    let reads: Vec<&Tensor> = pairs.iter().map(|(s, _)| s).collect();
    let writes: Vec<&Tensor> = pairs.iter().map(|(_, d)| d).collect();
    ctx.record_waiting(op, Unit::Collective, &reads, &writes, Rendezvous::Ranks(members.clone()))?;
    let part = Part { rank: ctx.rank(), program: ctx.program_id(), pairs };
    let (world, round) = (ctx.world.clone(), ctx.rounds());
    let kind = op.trim_start_matches("ncc.");
    ctx.collective(&members, kind, part, |seq, parts| {
        let (mut bytes, mut messages) = (0, 0);
        let programs = parts.iter().map(|(_, p)| p.program + 1).max().unwrap_or(0);
        for program in 0..programs {
            let mut mine = Vec::with_capacity(members.len());
            for &r in &members {
                let p = parts.iter().map(|(_, p)| p).find(|p| p.rank == r && p.program == program);
                let p = p.ok_or_else(|| NkiError::constraint(op, format!("rank {r} has no program {program} in the collective")))?;
                if p.pairs.len() != parts[0].1.pairs.len() {
                    return Err(NkiError::constraint(
                        op,
                        format!(
                            "rank {r} passes {} tensor pairs but rank {} passes {}",
                            p.pairs.len(),
                            parts[0].1.rank,
                            parts[0].1.pairs.len()
                        ),
                    ));
                }
                mine.push(p.pairs.as_slice());
            }
            let (b, m) = exchange(&mine, round)?;
            bytes += b;
            messages += m;
        }
        world.record_comm(CommEvent { op: kind_name(op), ring: members.clone(), seq, messages, bytes });
        Ok(())
    })
    .map_err(|e| e.in_op(op))
}

/// The log name of a collective (its name without the module).
fn kind_name(op: &'static str) -> &'static str {
    op.strip_prefix("ncc.").unwrap_or(op)
}

/// The bytes of `t`.
fn bytes_of(t: &Tensor) -> usize {
    t.numel() * t.dtype().size_bytes()
}

/// The members' `i`-th sources, in member order.
fn member_srcs<'a>(members: &[&'a [(Tensor, Tensor)]], i: usize) -> Vec<&'a Tensor> {
    members.iter().map(|m| &m[i].0).collect()
}

/// The values to write, per destination, collected before any is written.
type Writes = Vec<(Tensor, Vec<f32>, Dtype)>;

fn write_all(writes: Writes, round: bool) {
    for (dst, mut vals, dtype) in writes {
        dst.store_cells(dtype, &mut vals, round);
    }
}

/// The exchange of a group collective: `pair` collects the writes of the
/// members' `i`-th tensor pairs and returns the bytes they move; every
/// destination is written (rounding when `round`) once all pairs are collected,
/// and every member sends to every other member.
fn each_pair(members: &[&[(Tensor, Tensor)]], round: bool, pair: impl Fn(usize, &mut Writes) -> Result<usize>) -> Result<Traffic> {
    let mut writes = Writes::new();
    let mut bytes = 0;
    for i in 0..members[0].len() {
        bytes += pair(i, &mut writes)?;
    }
    write_all(writes, round);
    Ok(all_pairs(members, bytes))
}

/// The rows of one of `n` equal chunks of `t` along dim 0.
fn chunk_rows(op: &str, t: &Tensor, n: usize) -> Result<usize> {
    let rows = t.shape().first().copied().unwrap_or(1);
    if rows % n != 0 {
        return Err(NkiError::shape(op, format!("src {}: dim 0 ({rows}) does not split into {n} equal chunks", t.describe())));
    }
    Ok(rows / n)
}

group_collective! {
    /// `ncc.all_reduce(srcs, dsts, replica_group, op)`: every member's `dsts[i]`
    /// receives the members' `srcs[i]` combined element-wise with `op` (`nl.add`,
    /// `nl.maximum` or `nl.minimum`), folded in fp32 in member order and rounded once
    /// into the destination dtype. Sources and destinations pair by element count.
    all_reduce(op: NlOp), CollectiveOpts => all_reduce_call
}

/// The body of [`all_reduce`].
fn all_reduce_call(c: Call<'_>, op: NlOp, opts: CollectiveOpts<'_>) -> Result<()> {
    let _ = (opts.priority, opts.name);
    let rop = reduce_op(c.op, op)?;
    let pairs = c.pairs(false)?;
    same_sizes(c.op, &pairs)?;
    run(c.ctx, c.op, c.group, pairs, &|members, round| {
        each_pair(members, round, |i, writes| {
            let srcs = member_srcs(members, i);
            if let Some(s) = srcs.iter().find(|s| s.numel() != srcs[0].numel()) {
                return Err(NkiError::shape(
                    c.op,
                    format!("src {} and src {} of two members differ in element count", s.describe(), srcs[0].describe()),
                ));
            }
            let acc = fold(rop, &srcs);
            writes.extend(members.iter().map(|m| (m[i].1.clone(), acc.clone(), Dtype::F32)));
            Ok(srcs.iter().map(|s| bytes_of(s)).sum::<usize>())
        })
    })
}

group_collective! {
    /// `ncc.all_gather(srcs, dsts, replica_group, collective_dim)`: every member's
    /// `dsts[i]` receives the members' `srcs[i]` concatenated along `collective_dim`
    /// in member order (dim 0, or dim 1 of 2-D SBUF tiles); `dsts[i]` has exactly
    /// that shape and the sources' dtype.
    all_gather(collective_dim: i64), CollectiveOpts => all_gather_call
}

/// The body of [`all_gather`].
fn all_gather_call(c: Call<'_>, collective_dim: i64, opts: CollectiveOpts<'_>) -> Result<()> {
    let _ = (opts.priority, opts.name);
    let pairs = c.pairs(false)?;
    same_dtypes(c.op, &pairs)?;
    let mut dim = 0;
    for (s, _) in &pairs {
        let allowed: &[i64] = if s.buffer().is_on_chip() && s.shape().len() == 2 { &[0, 1] } else { &[0] };
        dim = check_dim(c.op, collective_dim, allowed, s)?;
    }
    run(c.ctx, c.op, c.group, pairs, &|members, _| {
        each_pair(members, false, |i, writes| {
            let srcs = member_srcs(members, i);
            let (shape, cells) = concat(c.op, &srcs, dim)?;
            for m in members {
                let d = &m[i].1;
                if d.shape() != shape.as_slice() {
                    return Err(NkiError::shape(
                        c.op,
                        format!("dst {} must have shape {shape:?} (the {} srcs concatenated along dim {dim})", d.describe(), srcs.len()),
                    ));
                }
                writes.push((d.clone(), cells.clone(), srcs[0].dtype()));
            }
            Ok(cells.len() * srcs[0].dtype().size_bytes())
        })
    })
}

/// The raw cells of `ts` concatenated along `dim`, with the result's shape.
fn concat(op: &str, ts: &[&Tensor], dim: usize) -> Result<(Vec<usize>, Vec<f32>)> {
    let first = ts[0].shape();
    let mut shape = first.to_vec();
    shape[dim] = 0;
    for t in ts {
        let s = t.shape();
        if s.len() != first.len() || s.iter().zip(first).enumerate().any(|(k, (a, b))| k != dim && a != b) || t.dtype() != ts[0].dtype() {
            return Err(NkiError::shape(op, format!("{} and {} do not concatenate along dim {dim}", ts[0].describe(), t.describe())));
        }
        shape[dim] += s[dim];
    }
    let outer: usize = first[..dim].iter().product();
    let blocks: Vec<Vec<f32>> = ts.iter().map(|t| t.gather_cells()).collect();
    let mut cells = Vec::with_capacity(shape.iter().product());
    for o in 0..outer {
        for b in &blocks {
            let inner = b.len() / outer.max(1);
            cells.extend_from_slice(&b[o * inner..(o + 1) * inner]);
        }
    }
    Ok((shape, cells))
}

group_collective! {
    /// `ncc.reduce_scatter(srcs, dsts, replica_group, collective_dim, op)`: the
    /// members' `srcs[i]` combined element-wise with `op` (fp32, member order) and cut
    /// along dim 0 into one equal chunk per member; the k-th member's `dsts[i]`
    /// receives chunk k (same element count), rounded once into its dtype.
    reduce_scatter(collective_dim: i64, op: NlOp), CollectiveOpts => reduce_scatter_call
}

/// The body of [`reduce_scatter`].
fn reduce_scatter_call(c: Call<'_>, collective_dim: i64, op: NlOp, opts: CollectiveOpts<'_>) -> Result<()> {
    let _ = (opts.priority, opts.name);
    let rop = reduce_op(c.op, op)?;
    let pairs = c.pairs(false)?;
    for (s, _) in &pairs {
        check_dim(c.op, collective_dim, &[0], s)?;
    }
    run(c.ctx, c.op, c.group, pairs, &|members, round| {
        let n = members.len();
        each_pair(members, round, |i, writes| {
            let srcs = member_srcs(members, i);
            if let Some(s) = srcs.iter().find(|s| s.shape() != srcs[0].shape()) {
                return Err(NkiError::shape(
                    c.op,
                    format!("the members' srcs {} and {} must have one shape", srcs[0].describe(), s.describe()),
                ));
            }
            chunk_rows(c.op, srcs[0], n)?;
            let acc = fold(rop, &srcs);
            let chunk = acc.len() / n;
            for (k, m) in members.iter().enumerate() {
                let d = &m[i].1;
                if d.numel() != chunk {
                    return Err(NkiError::shape(c.op, format!("dst {} must hold {chunk} elements (one of {n} chunks)", d.describe())));
                }
                writes.push((d.clone(), acc[k * chunk..(k + 1) * chunk].to_vec(), Dtype::F32));
            }
            Ok(srcs.iter().map(|s| bytes_of(s)).sum::<usize>())
        })
    })
}

group_collective! {
    /// `ncc.all_to_all(srcs, dsts, replica_group, collective_dim)`: each member cuts
    /// its `srcs[i]` along dim 0 into one equal chunk per member; chunk j of the k-th
    /// member's `dsts[i]` is chunk k of the j-th member's source. HBM tensors of one
    /// dtype; `dsts[i]` has the concatenated shape.
    all_to_all(collective_dim: i64), CollectiveOpts => all_to_all_call
}

/// The body of [`all_to_all`].
fn all_to_all_call(c: Call<'_>, collective_dim: i64, opts: CollectiveOpts<'_>) -> Result<()> {
    let _ = (opts.priority, opts.name);
    let pairs = c.pairs(true)?;
    same_dtypes(c.op, &pairs)?;
    for (s, _) in &pairs {
        check_dim(c.op, collective_dim, &[0], s)?;
    }
    run(c.ctx, c.op, c.group, pairs, &|members, _| {
        let n = members.len();
        each_pair(members, false, |i, writes| {
            let chunks = members
                .iter()
                .map(|m| {
                    let s = &m[i].0;
                    let mut shape = s.shape().to_vec();
                    shape[0] = chunk_rows(c.op, s, n)?;
                    Ok((shape, s.gather_cells()))
                })
                .collect::<Result<Vec<_>>>()?;
            let mut bytes = 0;
            for (k, m) in members.iter().enumerate() {
                let mut shape = chunks[0].0.clone();
                shape[0] = chunks.iter().map(|c| c.0[0]).sum();
                let mut cells = Vec::new();
                for (cs, cells_j) in &chunks {
                    let len = cs.iter().product::<usize>();
                    cells.extend_from_slice(&cells_j[k * len..(k + 1) * len]);
                }
                let d = &m[i].1;
                if let Some(other) = members.iter().map(|m| &m[i].0).find(|s| s.dtype() != d.dtype()) {
                    return Err(NkiError::constraint(
                        c.op,
                        format!("src {} and dst {} must have the same dtype", other.describe(), d.describe()),
                    ));
                }
                if d.shape() != shape.as_slice() || chunks.iter().any(|c| c.0[1..] != chunks[0].0[1..]) {
                    return Err(NkiError::shape(
                        c.op,
                        format!("dst {} must have shape {shape:?} (one chunk from each of {n} members)", d.describe()),
                    ));
                }
                bytes += cells.len() * d.dtype().size_bytes();
                writes.push((d.clone(), cells, d.dtype()));
            }
            Ok(bytes)
        })
    })
}

/// `ncc.collective_permute(srcs, dsts, source_target_pairs)`: for each
/// `[source, target]` pair, the target's `dsts[0]` receives the source's
/// `srcs[0]` (one HBM tensor each, same element count and dtype, copied
/// bit-exactly). Every rank of the launch issues it; a rank no pair targets keeps
/// its `dst`; each rank is a target at most once.
pub fn collective_permute(
    ctx: &Ctx,
    srcs: &[Tensor],
    dsts: &[Tensor],
    source_target_pairs: Vec<Vec<i64>>,
    opts: CollectiveOpts<'_>,
) -> Result<()> {
    const OP: &str = "ncc.collective_permute";
    let _ = (opts.priority, opts.name);
    let pairs = pairs(OP, srcs, dsts, true)?;
    if pairs.len() != 1 {
        return Err(NkiError::constraint(OP, format!("srcs and dsts must hold one tensor each, they hold {}", pairs.len())));
    }
    same_dtypes(OP, &pairs)?;
    same_sizes(OP, &pairs)?;
    let ranks = ctx.num_ranks();
    let mut moves = Vec::with_capacity(source_target_pairs.len());
    for p in &source_target_pairs {
        match p.as_slice() {
            &[s, t] if (0..ranks as i64).contains(&s) && (0..ranks as i64).contains(&t) && !moves.iter().any(|&(_, u)| u == t as usize) => {
                moves.push((s as usize, t as usize))
            }
            _ => {
                return Err(NkiError::argument(
                    "source_target_pairs",
                    format!("{source_target_pairs:?}"),
                    &format!("pairs [source, target] of ranks in 0..{ranks}, each target once"),
                ));
            }
        }
    }
    run(ctx, OP, &ReplicaGroup::new(vec![]), pairs, &|members, _| {
        let mut writes = Writes::new();
        let mut bytes = 0;
        for &(s, t) in &moves {
            let (src, dst) = (&members[s][0].0, &members[t][0].1);
            if src.numel() != dst.numel() || src.dtype() != dst.dtype() {
                return Err(NkiError::shape(
                    OP,
                    format!(
                        "rank {s} sends src {} but rank {t} receives into dst {}; they must match in element count and dtype",
                        src.describe(),
                        dst.describe()
                    ),
                ));
            }
            bytes += bytes_of(src);
            writes.push((dst.clone(), src.gather_cells(), src.dtype()));
        }
        write_all(writes, false);
        Ok((bytes, moves.len()))
    })
}
