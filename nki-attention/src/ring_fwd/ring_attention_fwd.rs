//! `ring_attention_spmd_fwd`: context-parallel attention over a ring of workers,
//! written in the DSL on top of [`attention_cte`].
//!
//! Every rank keeps its queries; keys and values travel to the ring successor one
//! step at a time (two HBM buffers per tensor, alternating between "arrived" and
//! "free"). Each step runs `attention_cte` with cached, unnormalised statistics;
//! the step's output merges into the running one by online softmax on negated
//! maxima, in bf16 tiles as the library does, and the last step normalises and
//! writes the log-sum-exp. The permute for step `s + 1` is issued before the merge
//! of step `s`, so on the device the transfer overlaps the merge.
//!
//! Grouped-query attention: K and V hold `h_kv` heads (query head `i` reads KV
//! head `i / (h / h_kv)`, as `attention_cte` does), and only those heads travel,
//! so a step moves `h_kv / h` of the multi-head bytes. Sinks (`[h]`, one logit per
//! query head) enter the softmax denominator through step 0's `attention_cte`
//! only: the online-softmax merges carry them, so they count once whatever `W`.
//!
//! Segment ids mask inside `attention_cte`; the key ids travel with K and V. A
//! row that sees no key in any step keeps the sentinel statistics and is written
//! as zeros with LSE `-inf`.

use crate::cte::attention_cte::{attention_cte, remainder_groups, scalar_column};
use crate::ring_inputs::check_feature_inputs;
use crate::ring_masks::{key_bounds, last_needed_step, row_positions, step_needed};
use nki::prelude::*;

/// Fills `table[0, rank] = position of rank in its ring` for every rank of the
/// replica groups (`[0, 1, ..., num_workers)` when there are none): collectives
/// name ranks by id, causal masking needs their positions.
#[nki_helper]
pub(crate) fn fill_ring_positions(table: Hbm, groups: Groups, num_workers: i64) {
    let ranks = table.shape()[1];
    let positions = nl::ndarray([1, ranks], nl::float32, buffer = nl::sbuf);
    if groups.len() == 0 {
        nisa::iota(positions, [[1, ranks]]);
    } else {
        for gi in 0..groups.len() {
            let ring = groups[gi];
            for j in 0..num_workers {
                let r = ring[j];
                nisa::memset(positions[s![0..1, r..r + 1]], j as f64);
            }
        }
    }
    nisa::dma_copy(table, positions);
}

/// `(128, 1)` columns holding this rank's ring position and the position of the
/// rank whose data it holds after `step` steps.
#[nki_helper]
pub(crate) fn ring_positions_at(positions: Hbm, groups: Groups, step: i64) -> (Sbuf, Sbuf) {
    let rg = ncc::ReplicaGroup(groups);
    let me = ncc::collective_permute_implicit_current_processing_rank_id(0, rg);
    let mine: Sbuf = scalar_column(positions.ap([[1, 1], [1, 1]], offset = 0, scalar_offset = me, indirect_dim = 1));
    let them = ncc::collective_permute_implicit_current_processing_rank_id(step, rg);
    let theirs: Sbuf = scalar_column(positions.ap([[1, 1], [1, 1]], offset = 0, scalar_offset = them, indirect_dim = 1));
    (mine, theirs)
}

/// One ring step's `attention_cte`: the unnormalised output and the raw statistics
/// (negated max, sum) of the local queries against `k` and `v`.
#[nki_helper]
fn step_attention(
    q3: Hbm,
    k: Hbm,
    v: Hbm,
    scale: f64,
    causal: bool,
    tp_q: bool,
    tp_k: bool,
    cp_offset: Option<Hbm>,
    cp_deg: Option<i64>,
    striped: bool,
    sink: Option<Hbm>,
    bound_min: Option<Hbm>,
    bound_max: Option<Hbm>,
    soft_cap: Option<f64>,
    q_seg: Option<Hbm>,
    kv_seg: Option<Hbm>,
    bias: Option<Hbm>,
) -> (Hbm, Hbm, Hbm) {
    let (o, neg_max, sum): (Hbm, Hbm, Hbm) = attention_cte(
        q3,
        k,
        v,
        scale = scale,
        causal_mask = causal,
        tp_q = tp_q,
        tp_k = tp_k,
        sink = sink,
        tp_out = false,
        cache_softmax = true,
        cp_offset = cp_offset,
        global_cp_deg = cp_deg,
        cp_striped_input = striped,
        bound_min = bound_min,
        bound_max = bound_max,
        skip_output_normalization = true,
        soft_cap = soft_cap,
        q_segment_ids = q_seg,
        kv_segment_ids = kv_seg,
        bias = bias,
    );
    (o, neg_max, sum)
}

/// `q3 · scale` in this program's HBM, in `q3`'s dtype (fp32 products): the
/// bounds path of `attention_cte` applies no scale.
#[nki_helper]
fn scaled_copy(q3: Hbm, scale: f64) -> Hbm {
    let shape = q3.shape();
    let out = nl::ndarray(shape, q3.dtype(), buffer = nl::private_hbm);
    let cols = shape[0] * shape[1] * shape[2] / 128;
    let src = q3.reshape([128, cols]);
    let dst = out.reshape([128, cols]);
    for c0 in (0..cols).step_by(2048) {
        let c1 = (c0 + 2048).min(cols);
        let t = nl::ndarray([128, c1 - c0], nl::float32, buffer = nl::sbuf);
        nisa::dma_copy(t, src[s![.., c0..c1]]);
        let r = nl::ndarray([128, c1 - c0], q3.dtype(), buffer = nl::sbuf);
        nisa::tensor_scalar(r, t, nl::multiply, scale);
        nisa::dma_copy(dst[s![.., c0..c1]], r);
    }
    out
}

/// Writes the per-row key bounds of one step (`[128, S / 128]`, row `128 g + p`
/// at `[p, g]`) for every batch of `bound_min` / `bound_max` (`[bs, S, 1]`).
#[nki_helper]
fn store_bounds(bound_min: Hbm, bound_max: Hbm, lower: Sbuf, upper: Sbuf) {
    let [bs, s, _one] = bound_min.shape();
    let n_grp = s / 128;
    for bi in 0..bs {
        nisa::dma_copy(bound_min.ap([[1, 128], [128, n_grp]], offset = bi * s), lower);
        nisa::dma_copy(bound_max.ap([[1, 128], [128, n_grp]], offset = bi * s), upper);
    }
}

/// The per-batch sink logits `attention_cte` takes, `[b·h, 1]` fp32 in this
/// program's HBM: batch `bi` holds `sinks[bi mod h]` (None without sinks).
#[nki_helper]
fn sink_rows(sinks: Option<Hbm>, b: i64, h: i64) -> Option<Hbm> {
    if let Some(sk) = sinks {
        let rows = nl::ndarray([b * h, 1], nl::float32, buffer = nl::private_hbm);
        let staged = nl::ndarray([1, h], nl::float32, buffer = nl::sbuf);
        nisa::dma_copy(staged, sk.reshape([1, h]));
        for bi in 0..b {
            nisa::dma_copy(rows.ap([[h, 1], [1, h]], offset = bi * h), staged);
        }
        return Some(rows);
    }
    None
}

/// Half `half_at` of the sequence axis of `src` (`[n, a, S]`, or `[n, S, a]` when
/// `seq_major`) copied to this program's HBM: half `fixed` when `sel` is None,
/// else half `sel` (a one-element int32 tile holding 0 or 1, read at run time).
#[nki_helper]
fn seq_half(src: Hbm, seq_major: bool, fixed: i64, sel: Option<Sbuf>) -> Hbm {
    let [n, x, y] = src.shape();
    let (a, s) = if seq_major { (y, x) } else { (x, y) };
    let half = s / 2;
    let out_shape = if seq_major { [n, half, a] } else { [n, a, half] };
    let out = nl::ndarray(out_shape, src.dtype(), buffer = nl::private_hbm);
    let halves = if seq_major { src.reshape([n, 2, half, a]) } else { src.reshape([n, a, 2, half]) };
    let pattern = if seq_major { [[a, half], [1, a]] } else { [[s, a], [1, half]] };
    let step = if seq_major { half * a } else { half };
    let axis = if seq_major { 1 } else { 2 };
    for i in 0..n {
        let start = i * a * s + fixed * step;
        if let Some(t) = sel {
            nisa::dma_copy(out[s![i, .., ..]], halves.ap(pattern, offset = start, scalar_offset = t, indirect_dim = axis));
        } else {
            nisa::dma_copy(out[s![i, .., ..]], halves.ap(pattern, offset = start));
        }
    }
    out
}

/// Copies between the running statistics and output of one sequence half (`half`
/// 0 or 1 at run time in `sel`) and half-size buffers, for batches `b0..b1`:
/// `to_half` copies the half out, else back in.
#[nki_helper]
fn swap_half(o_acc: Hbm, nm_acc: Hbm, sum_acc: Hbm, o_h: Hbm, nm_h: Hbm, sum_h: Hbm, sel: Sbuf, b0: i64, b1: i64, to_half: bool) {
    let [bs, s, d] = o_acc.shape();
    let n_grp = s / 128;
    let hg = n_grp / 2;
    let o_halves = o_acc.reshape([bs, 2, s / 2, d]);
    let nm_halves = nm_acc.reshape([bs, 128, 2, hg]);
    let sum_halves = sum_acc.reshape([bs, 128, 2, hg]);
    for bi in b0..b1 {
        let o_view = o_halves.ap([[d, s / 2], [1, d]], offset = bi * s * d, scalar_offset = sel, indirect_dim = 1);
        let nm_view = nm_halves.ap([[n_grp, 128], [1, hg]], offset = bi * 128 * n_grp, scalar_offset = sel, indirect_dim = 2);
        let sum_view = sum_halves.ap([[n_grp, 128], [1, hg]], offset = bi * 128 * n_grp, scalar_offset = sel, indirect_dim = 2);
        if to_half {
            nisa::dma_copy(o_h[s![bi, .., ..]], o_view);
            nisa::dma_copy(nm_h[s![bi, .., ..]], nm_view);
            nisa::dma_copy(sum_h[s![bi, .., ..]], sum_view);
        } else {
            nisa::dma_copy(o_view, o_h[s![bi, .., ..]]);
            nisa::dma_copy(nm_view, nm_h[s![bi, .., ..]]);
            nisa::dma_copy(sum_view, sum_h[s![bi, .., ..]]);
        }
    }
}

/// Merges one half-size `attention_cte` result (`o_cur`, `nm_cur`, `sum_cur`, for
/// the query half in `sel`) into the running one, for batches `b0..b1`.
#[nki_helper]
fn merge_half(o_acc: Hbm, nm_acc: Hbm, sum_acc: Hbm, o_cur: Hbm, nm_cur: Hbm, sum_cur: Hbm, sel: Sbuf, b0: i64, b1: i64) {
    let [bs, s, d] = o_acc.shape();
    let hg = s / 256;
    let o_h = nl::ndarray([bs, s / 2, d], o_acc.dtype(), buffer = nl::private_hbm);
    let nm_h = nl::ndarray([bs, 128, hg], nl::float32, buffer = nl::private_hbm);
    let sum_h = nl::ndarray([bs, 128, hg], nl::float32, buffer = nl::private_hbm);
    swap_half(o_acc, nm_acc, sum_acc, o_h, nm_h, sum_h, sel, b0, b1, true);
    for bi in b0..b1 {
        merge_batch(o_h, nm_h, sum_h, o_cur, nm_cur, sum_cur, bi, 0, hg, s / 2, d);
    }
    swap_half(o_acc, nm_acc, sum_acc, o_h, nm_h, sum_h, sel, b0, b1, false);
}

/// Waits for both LNC programs' writes to `tensors` (no-op on one program).
#[nki_helper]
fn both_programs(a: Hbm, b: Hbm, c: Hbm, shards: i64) {
    if shards > 1 {
        nisa::core_barrier(a, [0, 1]);
        nisa::core_barrier(b, [0, 1]);
        nisa::core_barrier(c, [0, 1]);
    }
}

/// One zigzag causal step without a window or chunks. The arriving block holds
/// chunks `p` and `2W-1-p`; this rank's queries chunks `me` and `2W-1-me`. Every
/// second-chunk query sees the whole first chunk of the block; the remaining
/// visible quarter is the first chunks of both (`p < me`) or the second chunks of
/// both (`p > me`), all visible too. So two unmasked half-size `attention_cte`
/// calls do exactly the visible work; `sel` (int32, 1 when `p > me`) picks the
/// halves of the second call at run time. Batches are merged whole by program
/// `bi mod shards`, after barriers on `attention_cte`'s outputs.
#[nki_helper]
fn zigzag_step(
    q_second: Hbm,
    q_full: Hbm,
    k: Hbm,
    v: Hbm,
    o_acc: Hbm,
    nm_acc: Hbm,
    sum_acc: Hbm,
    sel: Sbuf,
    tp_q: bool,
    tp_k: bool,
    shard: i64,
    shards: i64,
    soft_cap: Option<f64>,
) {
    let bs = o_acc.shape()[0];
    let per = (bs + shards - 1) / shards;
    let b0 = (shard * per).min(bs);
    let b1 = (b0 + per).min(bs);
    let k_first: Hbm = seq_half(k, tp_k, 0, None);
    let v_first: Hbm = seq_half(v, true, 0, None);
    let (o1, nm1, sum1): (Hbm, Hbm, Hbm) =
        step_attention(q_second, k_first, v_first, 1.0, false, tp_q, tp_k, None, None, false, None, None, None, soft_cap, None, None, None);
    both_programs(o1, nm1, sum1, shards);
    let second = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
    nisa::memset(second, 1.0);
    merge_half(o_acc, nm_acc, sum_acc, o1, nm1, sum1, second, b0, b1);
    let q_x: Hbm = seq_half(q_full, tp_q, 0, Some(sel));
    let k_x: Hbm = seq_half(k, tp_k, 0, Some(sel));
    let v_x: Hbm = seq_half(v, true, 0, Some(sel));
    let (o2, nm2, sum2): (Hbm, Hbm, Hbm) =
        step_attention(q_x, k_x, v_x, 1.0, false, tp_q, tp_k, None, None, false, None, None, None, soft_cap, None, None, None);
    both_programs(o2, nm2, sum2, shards);
    merge_half(o_acc, nm_acc, sum_acc, o2, nm2, sum2, sel, b0, b1);
}

/// The columns of `bias` (`[b, h, S, W·S]`, global key positions) of the keys of
/// ring position `kpos` (a `(128, 1)` fp32 column), in their local order, for
/// the `count` (batch, head) pairs from `first`, as `[count, S, S]` in this
/// program's HBM: one block of `S` columns (contiguous), every `W`-th column
/// from `kpos` (striped), or chunks `kpos` and `2W-1-kpos` of `S / 2` columns
/// (zigzag), picked at run time by `scalar_offset`.
#[nki_helper]
pub(crate) fn bias_block(bias: Hbm, first: i64, count: i64, kpos: Sbuf, striped: bool, zigzag: bool, w: i64) -> Hbm {
    let [b, h, s, total] = bias.shape();
    let bs = b * h;
    let out = nl::ndarray([count, s, s], nl::float32, buffer = nl::private_hbm);
    let at = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
    nisa::tensor_copy(at, kpos[s![0..1, 0..1]]);
    if zigzag {
        let half = s / 2;
        let mirror = nl::ndarray([128, 1], nl::float32, buffer = nl::sbuf);
        nisa::tensor_scalar(mirror, kpos, nl::multiply, -1.0, op1 = nl::add, operand1 = (2 * w - 1) as f64);
        let at_mirror = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
        nisa::tensor_copy(at_mirror, mirror[s![0..1, 0..1]]);
        let chunks = bias.reshape([bs, s, 2 * w, half]);
        for i in 0..count {
            let rows = (first + i) * s * total;
            nisa::dma_copy(
                out[s![i, .., 0..half]],
                chunks.ap([[total, s], [1, half]], offset = rows, scalar_offset = at, indirect_dim = 2),
            );
            nisa::dma_copy(
                out[s![i, .., half..s]],
                chunks.ap([[total, s], [1, half]], offset = rows, scalar_offset = at_mirror, indirect_dim = 2),
            );
        }
    } else if striped {
        let cols = bias.reshape([bs, s, s, w]);
        for i in 0..count {
            let rows = (first + i) * s * total;
            nisa::dma_copy(out[s![i, .., ..]], cols.ap([[total, s], [w, s]], offset = rows, scalar_offset = at, indirect_dim = 3));
        }
    } else {
        let blocks = bias.reshape([bs, s, w, s]);
        for i in 0..count {
            let rows = (first + i) * s * total;
            nisa::dma_copy(out[s![i, .., ..]], blocks.ap([[total, s], [1, s]], offset = rows, scalar_offset = at, indirect_dim = 2));
        }
    }
    out
}

/// [`bias_block`] of the keys of ring position `kpos`, when there is a bias.
#[nki_helper]
fn step_bias(bias: Option<Hbm>, kpos: Sbuf, striped: bool, zigzag: bool, w: i64) -> Option<Hbm> {
    if let Some(bi) = bias {
        let [b, h, _s, _total] = bi.shape();
        return Some(bias_block(bi, 0, b * h, kpos, striped, zigzag, w));
    }
    None
}

/// Sends the keys and values that arrived to the ring successor, and their
/// segment ids when there are any.
#[nki_helper]
fn pass_on(arrived_k: Hbm, free_k: Hbm, arrived_v: Hbm, free_v: Hbm, arrived_ids: Option<Hbm>, free_ids: Option<Hbm>, groups: Groups) {
    let rg = ncc::ReplicaGroup(groups);
    ncc::collective_permute_implicit([[arrived_k]], [[free_k]], rg);
    ncc::collective_permute_implicit([[arrived_v]], [[free_v]], rg);
    if let Some(arrived) = arrived_ids {
        if let Some(free) = free_ids {
            ncc::collective_permute_implicit([[arrived]], [[free]], rg);
        }
    }
}

/// Loads the `(128, n_grp)` statistics of batch `b`.
#[nki_helper]
fn load_stats(src: Hbm, b: i64, n_grp: i64) -> Sbuf {
    let t = nl::ndarray([128, n_grp], nl::float32, buffer = nl::sbuf);
    nisa::dma_copy(t, src[s![b, .., ..]]);
    t
}

/// Merges step outputs into the running ones for query groups `[g0, g1)` of batch
/// `b`: `n = min(n_acc, n_cur)`, `c = exp(n - n_x)`, `S = S_acc c_acc + S_cur c_cur`,
/// `O = O_acc c_acc + O_cur c_cur` (negated maxima; a row that saw no key this
/// step has `n_cur = +FLOAT32_MAX` and weight 0).
#[nki_helper]
fn merge_batch(o_acc: Hbm, nm_acc: Hbm, sum_acc: Hbm, o_cur: Hbm, nm_cur: Hbm, sum_cur: Hbm, b: i64, g0: i64, g1: i64, s: i64, d: i64) {
    let n_grp = s / 128;
    let nm_a: Sbuf = load_stats(nm_acc, b, n_grp);
    let sum_a: Sbuf = load_stats(sum_acc, b, n_grp);
    let nm_c: Sbuf = load_stats(nm_cur, b, n_grp);
    let sum_c: Sbuf = load_stats(sum_cur, b, n_grp);
    let nm_new = nl::ndarray([128, n_grp], nl::float32, buffer = nl::sbuf);
    nisa::tensor_tensor(nm_new, nm_a, nm_c, nl::minimum);
    let c_acc = nl::ndarray([128, n_grp], nl::float32, buffer = nl::sbuf);
    nisa::tensor_tensor(c_acc, nm_new, nm_a, nl::subtract);
    nisa::activation(c_acc, nl::exp, c_acc);
    let c_cur = nl::ndarray([128, n_grp], nl::float32, buffer = nl::sbuf);
    nisa::tensor_tensor(c_cur, nm_new, nm_c, nl::subtract);
    nisa::activation(c_cur, nl::exp, c_cur);
    let sum_new = nl::ndarray([128, n_grp], nl::float32, buffer = nl::sbuf);
    nisa::tensor_tensor(sum_new, sum_a, c_acc, nl::multiply);
    let sum_part = nl::ndarray([128, n_grp], nl::float32, buffer = nl::sbuf);
    nisa::tensor_tensor(sum_part, sum_c, c_cur, nl::multiply);
    nisa::tensor_tensor(sum_new, sum_new, sum_part, nl::add);

    // Outputs in tiles of up to 128 groups: row 128 t + p of the batch at [p, t, :].
    for t0 in (g0..g1).step_by(128) {
        let t1 = (t0 + 128).min(g1);
        let tc = t1 - t0;
        let pattern = [[d, 128], [128 * d, tc], [1, d]];
        let offset = (b * s + 128 * t0) * d;
        let prev = nl::ndarray([128, tc, d], nl::bfloat16, buffer = nl::sbuf);
        nisa::dma_copy(prev, o_acc.ap(pattern, offset = offset));
        let cur = nl::ndarray([128, tc, d], nl::bfloat16, buffer = nl::sbuf);
        nisa::dma_copy(cur, o_cur.ap(pattern, offset = offset));
        let merged = nl::ndarray([128, tc, d], nl::bfloat16, buffer = nl::sbuf);
        nisa::tensor_tensor(merged, prev, c_acc[s![.., t0..t1]].expand_dim(2).broadcast(2, d), nl::multiply);
        let part = nl::ndarray([128, tc, d], nl::bfloat16, buffer = nl::sbuf);
        nisa::tensor_tensor(part, cur, c_cur[s![.., t0..t1]].expand_dim(2).broadcast(2, d), nl::multiply);
        nisa::tensor_tensor(merged, merged, part, nl::add);
        nisa::dma_copy(o_acc.ap(pattern, offset = offset), merged);
    }
    nisa::dma_copy(nm_acc[s![b, .., g0..g1]], nm_new[s![.., g0..g1]]);
    nisa::dma_copy(sum_acc[s![b, .., g0..g1]], sum_new[s![.., g0..g1]]);
}

/// Writes the normalised output `O / S` of query groups `[g0, g1)` of batch `b`
/// and, when training, the log-sum-exp `-n + ln S`. Rows that never saw a key keep
/// the sentinel there: without segment ids none exists; with them the row's
/// output is 0 and its LSE `-inf`.
#[nki_helper]
fn normalize_batch(
    o_acc: Hbm,
    nm_acc: Hbm,
    sum_acc: Hbm,
    o: Hbm,
    lse: Option<Hbm>,
    b: i64,
    g0: i64,
    g1: i64,
    s: i64,
    d: i64,
    lse_dtype: Dtype,
    segmented: bool,
) {
    let n_grp = s / 128;
    let sums: Sbuf = load_stats(sum_acc, b, n_grp);
    let recip = nl::ndarray([128, n_grp], nl::float32, buffer = nl::sbuf);
    nisa::reciprocal(recip, sums);
    // With segment ids a row may see no key at all (negated max still the
    // sentinel): 0 there, 1 elsewhere, so its output is 0 and its LSE -inf.
    let seen = nl::ndarray([128, n_grp], nl::float32, buffer = nl::sbuf);
    if segmented {
        let nm: Sbuf = load_stats(nm_acc, b, n_grp);
        nisa::tensor_scalar(seen, nm, nl::less, 1.0e30);
        nisa::tensor_tensor(recip, recip, seen, nl::multiply);
    }
    for t0 in (g0..g1).step_by(128) {
        let t1 = (t0 + 128).min(g1);
        let tc = t1 - t0;
        let pattern = [[d, 128], [128 * d, tc], [1, d]];
        let offset = (b * s + 128 * t0) * d;
        let tile = nl::ndarray([128, tc, d], nl::bfloat16, buffer = nl::sbuf);
        nisa::dma_copy(tile, o_acc.ap(pattern, offset = offset));
        nisa::tensor_tensor(tile, tile, recip[s![.., t0..t1]].expand_dim(2).broadcast(2, d), nl::multiply);
        nisa::dma_copy(o.ap(pattern, offset = offset), tile);
    }
    if let Some(l) = lse {
        let nm: Sbuf = load_stats(nm_acc, b, n_grp);
        let out = nl::ndarray([128, n_grp], lse_dtype, buffer = nl::sbuf);
        nisa::tensor_scalar(out, nm, nl::multiply, -1.0);
        let log_sum = nl::ndarray([128, n_grp], lse_dtype, buffer = nl::sbuf);
        nisa::activation(log_sum, nl::log, sums);
        nisa::tensor_tensor(out, out, log_sum, nl::add);
        nisa::scalar_tensor_tensor(out, out, nl::greater, -1.0e30, nl::multiply, out);
        if segmented {
            let none = nl::ndarray([128, n_grp], lse_dtype, buffer = nl::sbuf);
            nisa::activation(none, nl::log, seen);
            nisa::tensor_tensor(out, out, none, nl::add);
        }
        nisa::dma_copy(l[s![b, .., g0..g1]], out[s![.., g0..g1]]);
    }
}

/// Ring attention forward, a drop-in for the NKI library's
/// `ring_attention_spmd_fwd` (2.30): each of `num_workers` ranks holds `seqlen`
/// tokens of the sequence (contiguous blocks, or every `num_workers`-th token with
/// `striped_input`); K and V travel around the ring so every rank attends its
/// queries to the whole sequence.
///
/// Layouts per rank: `q` is `[b, h, d, seqlen]` and `k` `[b, h_kv, d, seqlen]`
/// (`[.., seqlen, d]` with `tp_q` / `tp_k`), `v` is `[b, h_kv, seqlen, d]`, with
/// `h` a multiple of `h_kv` (GQA; the library's kernel needs `h_kv = h`). Returns
/// the output `[b, h, seqlen, d]` and, when `training`, the log-sum-exp of the
/// scaled scores `[b, h, 128, seqlen / 128]` (row `128 g + p` at `[.., p, g]`).
/// With the causal mask the kernel ignores `softmax_scale`: `q` must be
/// pre-scaled. Keyword arguments past the library's (default: off): `sinks`,
/// float32 `[h]`, one logit per query head in every row's softmax denominator
/// (not scaled; included in the log-sum-exp); `zigzag_input` (rank `r` holds
/// chunks `r` and `2W-1-r` of `seqlen / 2` tokens; needs the causal mask);
/// `window_left` / `window_right` (key `j` visible to query `i` only if
/// `i - L <= j <= i + R`); `chunk_size` (only if `i / C == j / C`); `soft_cap`
/// (logits `C·tanh(scale·q·k / C)`); `q_segment_ids` / `kv_segment_ids`, int32
/// `[b, seqlen]` (both or neither; only keys with the query's id are visible,
/// ids below 2^24 in magnitude; the key ids travel with K and V). A row that
/// sees no key and has no sink outputs zeros and LSE `-inf`. `bias`, float32
/// `[b, h, seqlen, num_workers·seqlen]`: this rank's query rows against every
/// key at its global position, added to the logits after the soft cap (each
/// step reads the columns of the visiting keys).
#[nki_kernel]
pub fn ring_attention_spmd_fwd(
    #[dtypes(float32, bfloat16, float16)] q: Hbm,
    #[dtypes(float32, bfloat16, float16)] k: Hbm,
    #[dtypes(float32, bfloat16, float16)] v: Hbm,
    replica_groups: Option<Groups>,
    #[default(1)]
    #[range(>= 1)]
    num_workers: i64,
    softmax_scale: Option<f64>,
    #[default(false)] use_causal_mask: bool,
    #[default(false)] striped_input: bool,
    #[default(false)] training: bool,
    #[default(nl::float32)] lse_dtype: Dtype,
    #[default(false)] tp_q: bool,
    #[default(false)] tp_k: bool,
    #[dtypes(float32)] sinks: Option<Hbm>,
    #[default(false)] zigzag_input: bool,
    #[range(>= 0)] window_left: Option<i64>,
    #[range(>= 0)] window_right: Option<i64>,
    #[range(>= 1)] chunk_size: Option<i64>,
    #[range(> 0.0, <= 3.4028234663852886e38)] soft_cap: Option<f64>,
    #[dtypes(int32)] q_segment_ids: Option<Hbm>,
    #[dtypes(int32)] kv_segment_ids: Option<Hbm>,
    #[dtypes(float32)] bias: Option<Hbm>,
) -> Outputs {
    assert!(nisa::get_nc_version() > nisa::nc_version::gen2, "ring_attention_spmd_fwd not supported on trn1");
    assert!(q.ndim() == 4 && k.ndim() == 4 && v.ndim() == 4, "q, k and v must be 4-d, [b, h, d, seqlen] or [b, h, seqlen, d]");
    let q_shape = q.shape();
    let [b, q_h, d, s] = if tp_q { [q_shape[0], q_shape[1], q_shape[3], q_shape[2]] } else { q_shape };
    let k_shape = k.shape();
    let k_h = k_shape[1];
    assert!(k_h >= 1 && q_h % k_h == 0, "q_heads must be a multiple of kv_heads (GQA), got q_heads={q_h}, kv_heads={k_h}");
    assert!(d <= 128, "head_dim must be <= 128, got {d}");
    assert!(s % 128 == 0, "seqlen must be divisible by 128, got {s}");
    // The library leaves these to attention_cte's asserts, or to nothing.
    let want_k = if tp_k { [b, k_h, s, d] } else { [b, k_h, d, s] };
    assert!(
        k_shape[0] == b && k_shape[2] == want_k[2] && k_shape[3] == want_k[3],
        "k must be {want_k} to match q's batch, seqlen and head dim, got {k_shape}"
    );
    let v_shape = v.shape();
    assert!(
        v_shape[0] == b && v_shape[1] == k_h && v_shape[2] == s && v_shape[3] == d,
        "v must be [{b}, {k_h}, {s}, {d}] to match q and k, got {v_shape}"
    );
    assert!(!striped_input || use_causal_mask, "striped_input requires use_causal_mask=True");
    assert!(!zigzag_input || use_causal_mask, "zigzag_input requires use_causal_mask=True");
    assert!(!(zigzag_input && striped_input), "striped_input and zigzag_input exclude each other");
    let left = window_left.unwrap_or(-1);
    let right = window_right.unwrap_or(-1);
    let chunk = chunk_size.unwrap_or(0);
    // Windows, chunks and zigzag blocks mask through per-row key bounds.
    let bounded = zigzag_input || left >= 0 || right >= 0 || chunk > 0;
    assert!(!use_causal_mask || num_workers <= 32, "causal ring attention supports at most 32 workers, got {num_workers}");
    let groups = replica_groups.unwrap_or([]);
    for gi in 0..groups.len() {
        let size = groups[gi].len();
        assert!(size == num_workers, "replica group {gi} has {size} ranks but num_workers is {num_workers}");
    }

    check_feature_inputs(sinks, q_segment_ids, kv_segment_ids, bias, b, q_h, s, num_workers);
    let segmented = q_segment_ids.is_some();
    let biased = bias.is_some();

    let bs = b * q_h;
    let bs_kv = b * k_h;
    let n_grp = s / 128;
    let q3 = if tp_q { q.reshape([bs, s, d]) } else { q.reshape([bs, d, s]) };
    let k3 = if tp_k { k.reshape([bs_kv, s, d]) } else { k.reshape([bs_kv, d, s]) };
    let v3 = v.reshape([bs_kv, s, d]);
    let sink: Option<Hbm> = sink_rows(sinks, b, q_h);
    let o = nl::ndarray([bs, s, d], q.dtype(), buffer = nl::shared_hbm);
    let lse = if training { Some(nl::ndarray([bs, 128, n_grp], lse_dtype, buffer = nl::shared_hbm)) } else { None };
    let scale = softmax_scale.unwrap_or(1.0 / (d as f64).powf(0.5));
    assert!(f32::MIN <= scale && scale <= f32::MAX, "softmax_scale must be a finite float32, got {scale}");
    // attention_cte takes scale 1.0 in CP mode: causal callers pre-scale q.
    let attn_scale = if use_causal_mask || bounded { 1.0 } else { scale };
    let cp_deg = if use_causal_mask && !bounded { Some(num_workers) } else { None };
    let q_run: Hbm = if bounded && !use_causal_mask { scaled_copy(q3, scale) } else { q3 };
    let cte_causal = use_causal_mask && !bounded;
    let cte_striped = striped_input && !bounded;
    // The ring turns only as far as some rank needs keys.
    let last: i64 = if bounded {
        last_needed_step(striped_input, zigzag_input, num_workers, s, use_causal_mask, left, right, chunk)
    } else {
        num_workers - 1
    };

    // LNC2: each program copies, merges and normalises the batches attention_cte gives it.
    let grid = nl::program_ndim() == 1;
    let shard = if grid { nl::program_id(0) } else { 0 };
    let shards = if grid { nl::num_programs(0) } else { 1 };
    let per_shard = bs / shards;
    let b_first = shard * per_shard;
    let has_remainder = bs % shards != 0;
    // attention_cte splits an odd last batch half and half in CP and non-causal mode.
    let (rem_g0, rem_g1): (i64, i64) = remainder_groups(shard, s, n_grp, 0.5);

    // Each program copies its share of the KV batches into the send buffers.
    let kv_per_shard = bs_kv / shards;
    let kv_first = shard * kv_per_shard;
    let kv_remainder = bs_kv % shards != 0;
    let k_buf_shape = if tp_k { [bs_kv, s, d] } else { [bs_kv, d, s] };
    let send_k = nl::ndarray(k_buf_shape, k.dtype(), buffer = nl::shared_hbm);
    let recv_k = nl::ndarray(k_buf_shape, k.dtype(), buffer = nl::shared_hbm);
    let send_v = nl::ndarray([bs_kv, s, d], v.dtype(), buffer = nl::shared_hbm);
    let recv_v = nl::ndarray([bs_kv, s, d], v.dtype(), buffer = nl::shared_hbm);
    let rg = ncc::ReplicaGroup(groups);

    // Causal steps mask by ring positions: cp_offset = (mine - theirs) * seqlen
    // (contiguous) or -[mine < theirs] (striped), written to HBM before each step.
    let n_rings = if groups.len() == 0 { 1 } else { groups.len() };
    let positions = nl::ndarray([1, n_rings * num_workers], nl::float32, buffer = nl::shared_hbm);
    let cp_offset = if cte_causal { Some(nl::ndarray([1, 1], nl::float32, buffer = nl::shared_hbm)) } else { None };
    if use_causal_mask || bounded || biased {
        fill_ring_positions(positions, groups, num_workers);
    }
    if let Some(cpo) = cp_offset {
        let zero = nl::ndarray([1, 1], nl::float32, buffer = nl::sbuf);
        nisa::memset(zero, 0.0);
        nisa::dma_copy(cpo, zero);
    }
    let bound_min = if bounded { Some(nl::ndarray([bs, s, 1], nl::float32, buffer = nl::private_hbm)) } else { None };
    let bound_max = if bounded { Some(nl::ndarray([bs, s, 1], nl::float32, buffer = nl::private_hbm)) } else { None };
    let (home_pos, own_pos): (Sbuf, Sbuf) = ring_positions_at(positions, groups, 0);
    let q_pos: Sbuf = row_positions(home_pos, striped_input, zigzag_input, num_workers, s);
    let own_bias: Option<Hbm> = step_bias(bias, own_pos, striped_input, zigzag_input, num_workers);
    // A rank's zigzag chunks are in global order, so on its own block the causal
    // mask is the local one: attention_cte's static causal mask skips the tiles above
    // the diagonal (without a window or chunks).
    let local_causal = zigzag_input && left < 0 && chunk == 0;
    // Its other steps split into two unmasked half-size calls (halves of 128-row
    // groups; segment ids mask every step, so they take the bounds path).
    let zigzag_fast = local_causal && s % 256 == 0 && !segmented && !biased;
    let q_second: Hbm = if zigzag_fast { seq_half(q_run, tp_q, 1, None) } else { q_run };
    if !local_causal {
        if let Some(bmin) = bound_min {
            if let Some(bmax) = bound_max {
                let (lower, upper): (Sbuf, Sbuf) =
                    key_bounds(q_pos, own_pos, striped_input, zigzag_input, num_workers, s, use_causal_mask, left, right, chunk);
                store_bounds(bmin, bmax, lower, upper);
            }
        }
    }

    // Step 0: the rank's own keys.
    let (o_acc, nm_acc, sum_acc): (Hbm, Hbm, Hbm) = if local_causal {
        step_attention(
            q_run,
            k3,
            v3,
            attn_scale,
            true,
            tp_q,
            tp_k,
            None,
            None,
            false,
            sink,
            None,
            None,
            soft_cap,
            q_segment_ids,
            kv_segment_ids,
            own_bias,
        )
    } else {
        step_attention(
            q_run,
            k3,
            v3,
            attn_scale,
            cte_causal,
            tp_q,
            tp_k,
            cp_offset,
            cp_deg,
            cte_striped,
            sink,
            bound_min,
            bound_max,
            soft_cap,
            q_segment_ids,
            kv_segment_ids,
            own_bias,
        )
    };

    for bi in kv_first..kv_first + kv_per_shard {
        nisa::dma_copy(send_k[s![bi, .., ..]], k3[s![bi, .., ..]]);
        nisa::dma_copy(send_v[s![bi, .., ..]], v3[s![bi, .., ..]]);
    }
    if kv_remainder && shard == 0 {
        nisa::dma_copy(send_k[s![bs_kv - 1, .., ..]], k3[s![bs_kv - 1, .., ..]]);
        nisa::dma_copy(send_v[s![bs_kv - 1, .., ..]], v3[s![bs_kv - 1, .., ..]]);
    }
    // The key segment ids travel with K and V (program 0 copies them).
    let send_ids = if segmented { Some(nl::ndarray([b, s], nl::int32, buffer = nl::shared_hbm)) } else { None };
    let recv_ids = if segmented { Some(nl::ndarray([b, s], nl::int32, buffer = nl::shared_hbm)) } else { None };
    if let Some(ks) = kv_segment_ids {
        if let Some(ids) = send_ids {
            if shard == 0 {
                nisa::dma_copy(ids, ks);
            }
        }
    }
    if last >= 1 {
        if shards > 1 {
            // Both programs wrote the send buffers.
            nisa::core_barrier(send_k, [0, 1]);
            nisa::core_barrier(send_v, [0, 1]);
            if let Some(ids) = send_ids {
                nisa::core_barrier(ids, [0, 1]);
            }
        }
        pass_on(send_k, recv_k, send_v, recv_v, send_ids, recv_ids, groups);
    }

    for step in nl::sequential_range(1, last + 1) {
        // Odd steps find the keys in the recv buffers, even steps in the send buffers.
        let odd = step % 2 == 1;
        let arrived_k = if odd { recv_k } else { send_k };
        let free_k = if odd { send_k } else { recv_k };
        let arrived_v = if odd { recv_v } else { send_v };
        let free_v = if odd { send_v } else { recv_v };
        let arrived_ids = if odd { recv_ids } else { send_ids };
        let free_ids = if odd { send_ids } else { recv_ids };
        // A step no rank needs computes nothing (its block still travels on when a later one is needed).
        let needed: bool = !bounded || step_needed(step, striped_input, zigzag_input, num_workers, s, use_causal_mask, left, right, chunk);
        if zigzag_fast {
            if step == 1 {
                // Whole batches merge from here on, whichever program's attention_cte wrote them.
                both_programs(o_acc, nm_acc, sum_acc, shards);
            }
            let (here, there): (Sbuf, Sbuf) = ring_positions_at(positions, groups, step);
            let later = nl::ndarray([128, 1], nl::float32, buffer = nl::sbuf);
            nisa::tensor_tensor(later, there, here, nl::greater);
            let sel = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
            nisa::tensor_copy(sel, later[s![0..1, 0..1]]);
            zigzag_step(q_second, q_run, arrived_k, arrived_v, o_acc, nm_acc, sum_acc, sel, tp_q, tp_k, shard, shards, soft_cap);
            if step < last {
                pass_on(arrived_k, free_k, arrived_v, free_v, arrived_ids, free_ids, groups);
            }
        }
        if let Some(cpo) = cp_offset {
            let (my_pos, their_pos): (Sbuf, Sbuf) = ring_positions_at(positions, groups, step);
            let off = nl::ndarray([128, 1], nl::float32, buffer = nl::sbuf);
            if striped_input {
                nisa::tensor_tensor(off, my_pos, their_pos, nl::less);
                nisa::tensor_scalar(off, off, nl::multiply, -1.0);
            } else {
                nisa::tensor_tensor(off, my_pos, their_pos, nl::subtract);
                nisa::tensor_scalar(off, off, nl::multiply, s as f64);
            }
            nisa::dma_copy(cpo, off[s![0..1, 0..1]]);
        }
        if needed && !zigzag_fast {
            let (_here, k_pos): (Sbuf, Sbuf) = ring_positions_at(positions, groups, step);
            let visiting_bias: Option<Hbm> = step_bias(bias, k_pos, striped_input, zigzag_input, num_workers);
            if let Some(bmin) = bound_min {
                if let Some(bmax) = bound_max {
                    let (lower, upper): (Sbuf, Sbuf) =
                        key_bounds(q_pos, k_pos, striped_input, zigzag_input, num_workers, s, use_causal_mask, left, right, chunk);
                    store_bounds(bmin, bmax, lower, upper);
                }
            }
            let (o_cur, nm_cur, sum_cur): (Hbm, Hbm, Hbm) = step_attention(
                q_run,
                arrived_k,
                arrived_v,
                attn_scale,
                cte_causal,
                tp_q,
                tp_k,
                cp_offset,
                cp_deg,
                cte_striped,
                None,
                bound_min,
                bound_max,
                soft_cap,
                q_segment_ids,
                arrived_ids,
                visiting_bias,
            );
            // The next transfer goes out before this step's merge.
            if step < last {
                pass_on(arrived_k, free_k, arrived_v, free_v, arrived_ids, free_ids, groups);
            }
            for bi in b_first..b_first + per_shard {
                merge_batch(o_acc, nm_acc, sum_acc, o_cur, nm_cur, sum_cur, bi, 0, n_grp, s, d);
            }
            if has_remainder && rem_g1 > rem_g0 {
                merge_batch(o_acc, nm_acc, sum_acc, o_cur, nm_cur, sum_cur, bs - 1, rem_g0, rem_g1, s, d);
            }
        } else if step < last && !zigzag_fast {
            pass_on(arrived_k, free_k, arrived_v, free_v, arrived_ids, free_ids, groups);
        }
    }
    if zigzag_fast && last >= 1 {
        both_programs(o_acc, nm_acc, sum_acc, shards);
    }

    for bi in b_first..b_first + per_shard {
        normalize_batch(o_acc, nm_acc, sum_acc, o, lse, bi, 0, n_grp, s, d, lse_dtype, segmented);
    }
    if has_remainder && rem_g1 > rem_g0 {
        normalize_batch(o_acc, nm_acc, sum_acc, o, lse, bs - 1, rem_g0, rem_g1, s, d, lse_dtype, segmented);
    }
    let o4 = o.reshape([b, q_h, s, d]);
    if let Some(l) = lse {
        return Outputs(o4, l.reshape([b, q_h, 128, n_grp]));
    }
    Outputs(o4)
}
