//! Variable-size collectives over flat element buffers: `all_to_all_v` and
//! `all_gather_v`, sized by a `uint32` metadata tensor.
//!
//! The metadata is `[rows, G]` in HBM or `[1, rows, G]` in SBUF, `G` the group
//! size, `rows` 3 or 4: send counts, send displacements, receive counts (written
//! by the collective unless `recv_counts_known`), receive displacements (read
//! when `has_rdispls`). Column `r` is the group's r-th member. Without receive
//! displacements the chunk from member `s` lands at `s · (dst elements / G)`. A
//! chunk that does not fit its source or destination is an error.

use super::dense::{run, same_dtypes};
use super::{Call, check_buffer};
use crate::{Dtype, NkiError, Result, Tensor};

/// Optional arguments of the variable-size collectives.
#[nki_macros::spec_options]
#[derive(Clone, Debug, Default)]
pub struct VariableOpts<'a> {
    /// The receive counts are already in the metadata (default false: the
    /// collective writes them).
    pub recv_counts_known: Option<bool>,
    /// The metadata has a fourth row of receive displacements (default false).
    pub has_rdispls: Option<bool>,
    /// QoS priority; no numeric effect.
    pub priority: Option<i64>,
    /// Instruction name.
    pub name: Option<&'a str>,
}

/// Checks the metadata's dtype and shape for a group of `n`.
fn check_metadata(op: &str, t: &Tensor, n: usize, has_rdispls: bool) -> Result<()> {
    check_buffer(op, "metadata_tensor", t)?;
    let rows = if has_rdispls { 4 } else { 3 };
    let ok = t.dtype() == Dtype::U32 && if t.buffer().is_on_chip() { t.shape() == [1, rows, n] } else { t.shape() == [rows, n] };
    if ok {
        Ok(())
    } else {
        Err(NkiError::argument(
            "metadata_tensor",
            t.describe(),
            &format!("{op} needs uint32 of shape [{rows}, {n}] in HBM or [1, {rows}, {n}] in SBUF"),
        ))
    }
}

/// The metadata as rows of integers.
fn table(t: &Tensor) -> Vec<Vec<i64>> {
    let n = t.shape().last().copied().unwrap_or(1).max(1);
    t.to_i64_vec().chunks(n).map(<[i64]>::to_vec).collect()
}

/// Runs the variable collective of `c`: member `i` sends member `j` the
/// elements `chunk_of(its metadata table, j)` gives as (displacement, count).
/// The metadata travels as a second (src, dst) pair (it is read, and written
/// back with the receive counts).
fn exchange(c: &Call<'_>, chunk_of: fn(&[Vec<i64>], usize) -> (i64, i64), metadata: &Tensor, opts: VariableOpts<'_>) -> Result<()> {
    let _ = (opts.priority, opts.name);
    let (op, ctx, group) = (c.op, c.ctx, c.group);
    let mut pairs = c.pairs(true)?;
    if pairs.len() != 1 {
        return Err(NkiError::constraint(op, format!("srcs and dsts must hold one tensor each, they hold {}", pairs.len())));
    }
    same_dtypes(op, &pairs)?;
    let (known, rdispls) = (opts.recv_counts_known.unwrap_or(false), opts.has_rdispls.unwrap_or(false));
    let n = group.ring_of(ctx.rank(), ctx.num_ranks()).map_err(|e| e.in_op(op))?.len();
    check_metadata(op, metadata, n, rdispls)?;
    pairs.push((metadata.clone(), metadata.clone()));
    run(ctx, op, group, pairs, &|members, _| {
        let tables: Vec<Vec<Vec<i64>>> = members.iter().map(|m| table(&m[1].0)).collect();
        // Every chunk, read before anything is written: sent[i][j] from member i to j.
        let mut sent = Vec::with_capacity(n);
        for (i, m) in members.iter().enumerate() {
            let flat = m[0].0.gather_cells();
            let mut row = Vec::with_capacity(n);
            for j in 0..n {
                let (start, count) = chunk_of(&tables[i], j);
                let end = start.checked_add(count).filter(|&e| start >= 0 && count >= 0 && e <= flat.len() as i64);
                let Some(end) = end else {
                    return Err(NkiError::shape(
                        op,
                        format!("member {i} sends elements {start}..{start}+{count} of a {}-element src", flat.len()),
                    ));
                };
                row.push(flat[start as usize..end as usize].to_vec());
            }
            sent.push(row);
        }
        let (mut bytes, mut messages) = (0, 0);
        for (j, m) in members.iter().enumerate() {
            let (dst, meta) = (&m[0].1, &m[1].0);
            let mut out = dst.gather_cells();
            let slot = out.len() / n;
            let mut counts = Vec::with_capacity(n);
            for (i, from) in sent.iter().enumerate() {
                let chunk = &from[j];
                let at = if rdispls { tables[j][3][i] } else { (i * slot) as i64 };
                let room = if rdispls { out.len() as i64 - at } else { slot as i64 };
                if at < 0 || chunk.len() as i64 > room {
                    return Err(NkiError::shape(
                        op,
                        format!(
                            "member {j} receives {} elements from member {i} at {at}, which do not fit its {}-element dst",
                            chunk.len(),
                            out.len()
                        ),
                    ));
                }
                out[at as usize..at as usize + chunk.len()].copy_from_slice(chunk);
                counts.push(chunk.len() as f32);
                bytes += chunk.len() * dst.dtype().size_bytes();
                messages += usize::from(i != j);
            }
            dst.store_cells(dst.dtype(), &mut out, false);
            if !known {
                let mut cells: Vec<f32> = tables[j].iter().flatten().map(|&v| v as f32).collect();
                cells[2 * n..3 * n].copy_from_slice(&counts);
                meta.store_cells(Dtype::F32, &mut cells, false);
            }
        }
        Ok((bytes, messages))
    })
}

group_collective! {
    /// `ncc.all_to_all_v(srcs, dsts, replica_group, metadata_tensor)`: member `i`
    /// sends `src[send_displs[j] .. + send_counts[j]]` (its metadata's rows 1 and 0,
    /// column `j`) to member `j`; see the module doc for where it lands.
    all_to_all_v(metadata_tensor: &Tensor), VariableOpts => all_to_all_v_call
}

group_collective! {
    /// `ncc.all_gather_v(srcs, dsts, replica_group, metadata_tensor)`: every member
    /// sends `src[send_displ .. + send_count]` (column 0 of its metadata's rows 1
    /// and 0) to every member. As documented: no receive displacements, LNC2
    /// launches only, and replica groups of exactly 4 ranks.
    all_gather_v(metadata_tensor: &Tensor), VariableOpts => all_gather_v_call
}

/// The body of [`all_to_all_v`]: member `i` sends its send-count/displacement
/// column `j` to member `j`.
fn all_to_all_v_call(c: Call<'_>, metadata: &Tensor, opts: VariableOpts<'_>) -> Result<()> {
    exchange(&c, |t, j| (t[1][j], t[0][j]), metadata, opts)
}

/// The body of [`all_gather_v`]: its own rules (no receive displacements, LNC2
/// launches, groups of 4 ranks), then every member sends its column 0 to every
/// member.
fn all_gather_v_call(c: Call<'_>, metadata: &Tensor, opts: VariableOpts<'_>) -> Result<()> {
    if opts.has_rdispls == Some(true) {
        return Err(NkiError::argument("has_rdispls", "True", "ncc.all_gather_v does not support receive displacements"));
    }
    let ctx = c.ctx;
    if ctx.num_programs() != 2 {
        return Err(NkiError::constraint(
            c.op,
            format!("runs only in LNC2 launches, this one has {} programs per rank", ctx.num_programs()),
        ));
    }
    let groups = if c.group.groups().is_empty() { vec![(0..ctx.num_ranks() as i64).collect()] } else { c.group.groups().to_vec() };
    if groups.iter().any(|g| g.len() != 4) {
        return Err(NkiError::argument("replica_group", format!("{groups:?}"), "ncc.all_gather_v needs groups of exactly 4 ranks"));
    }
    exchange(&c, |t, _| (t[1][0], t[0][0]), metadata, opts)
}
