//! `attention_cte`: the NKI library's prefill flash-attention kernel (2.30 feature
//! set), written in the DSL.
//!
//! Query groups of 128 rows are processed one after another (the library
//! pipelines them; groups share no data, so the numerics are the same). Within a
//! group and a KV section: QK into PSUM per 512-key tile, masking (static
//! `affine_select`, dynamic `range_select`, or none) with the tile max, the
//! section max and running max (negated), `exp(s - max)` into bf16 P tiles with
//! fp32 row sums, P transposed, PV accumulated in PSUM per 2048 keys, then the
//! running sum and the output (corrected across sections through HBM).

use nki::prelude::*;

/// Whether any query of group `g` (or of `n` groups from `g`) may see key `k0`
/// under the causal mask; strided CP uses the worst-case rank.
#[nki_helper]
fn sees_key(g: i64, k0: i64, n: i64, cp_deg: i64, strided: bool) -> bool {
    let last_q = 128 * g + 128 * n - 1;
    let max_q = if strided { last_q * cp_deg + cp_deg - 1 } else { last_q };
    max_q >= k0
}

/// Whether group `g` may see a key of `[k0, k0 + tile)` inside its sliding window
/// of `sw` keys; strided CP uses the best-case rank.
#[nki_helper]
fn sees_window(g: i64, k0: i64, tile: i64, sw: i64, cp_deg: i64, strided: bool) -> bool {
    let min_q = if strided { 128 * g * cp_deg } else { 128 * g };
    min_q < k0 + tile - 1 + sw
}

/// Whether an active KV tile `[k0, k0 + tile)` has any visible key for group `g`
/// (compute skipping happens only for causal patterns).
#[nki_helper]
fn tile_visible(is_causal: bool, sw: i64, g: i64, k0: i64, tile: i64, cp_deg: i64, strided: bool) -> bool {
    !is_causal || (sees_key(g, k0, 1, cp_deg, strided) && (sw == 0 || sees_window(g, k0, tile, sw, cp_deg, strided)))
}

/// The KV tile of `tile` keys at position `x` of the section's `[used prior ++
/// active]` sequence (`s_pp` prior slots, `total` keys in all): whether it lies in
/// the prefix cache, its first key there or among the active keys, and how many
/// keys it holds (0 past the end).
#[nki_helper]
fn kv_tile(x: i64, tile: i64, prefix: bool, s_pp: i64, s_p: i64, s_ka: i64, total: i64) -> (bool, i64, i64) {
    let in_prior = prefix && x < s_pp;
    let k0 = if in_prior { x } else { x - s_pp };
    let part_len = if in_prior { s_p } else { s_ka };
    let keys = if k0 < part_len && x < total { (part_len - k0).min(tile) } else { 0 };
    (in_prior, k0, keys)
}

/// Copies partition 0 of the `(128, n)` tile `t` to all 128 partitions, one
/// 32-partition quadrant at a time.
#[nki_helper]
fn broadcast_partition0(t: Sbuf) {
    for quad in 0..4 {
        nisa::nc_stream_shuffle(t[s![quad * 32..(quad + 1) * 32, ..]], t[s![0..1, ..]], [0; 32]);
    }
}

/// A `(128, 1)` fp32 column holding element `[0, 0]` of the HBM view `src` on every partition.
#[nki_helper]
pub(crate) fn scalar_column(src: Hbm) -> Sbuf {
    let col = nl::ndarray([128, 1], nl::float32, buffer = nl::sbuf);
    nisa::dma_copy(col[s![0..1, 0..1]], src);
    broadcast_partition0(col);
    col
}

/// The query groups `[start, end)` of the odd last batch that LNC program `shard`
/// computes: from 1024 rows program 0 takes the first `frac` of the groups and
/// program 1 the rest; below that program 0 takes them all.
#[nki_helper]
pub(crate) fn remainder_groups(shard: i64, s_q: i64, groups: i64, frac: f64) -> (i64, i64) {
    let first = ((groups as f64) * frac) as i64;
    let split = s_q >= 1024;
    let start = if split && shard != 0 { first } else { 0 };
    let end = if !split && shard != 0 {
        0
    } else if split && shard == 0 {
        first
    } else {
        groups
    };
    (start, end)
}

/// DMA-transposes `rows` rows of `d` elements, starting at element `start` of the
/// HBM tensor `src`, into columns `[c0, c0 + rows)` of the `(d, width)` bf16 tile
/// `dst`, in the library's 4-d form `(rows, 1, 1, d) -> (d, 1, 1, rows)`. A source
/// of another dtype goes through a tile of its own dtype (the transpose does not cast).
#[nki_helper]
fn transpose_rows(dst: Sbuf, c0: i64, src: Hbm, start: i64, rows: i64) {
    let [d, width] = dst.shape();
    let rows_in = src.ap([[d, rows], [1, 1], [1, 1], [1, d]], offset = start);
    if src.dtype() == nl::bfloat16 {
        nisa::dma_transpose(dst.ap([[width, d], [1, 1], [1, 1], [1, rows]], offset = c0), rows_in);
    } else {
        let staged = nl::ndarray([d, rows], src.dtype(), buffer = nl::sbuf);
        nisa::dma_transpose(staged.ap([[rows, d], [1, 1], [1, 1], [1, rows]], offset = 0), rows_in);
        nisa::tensor_copy(dst[s![.., c0..c0 + rows]], staged);
    }
}

/// Loads the query rows `[q0, q0 + rows)` of batch `b` as a `(d, 128)` bf16 tile.
#[nki_helper]
fn load_q(q: Hbm, b: i64, q0: i64, rows: i64, d: i64, tp_q: bool) -> Sbuf {
    let q_sb = nl::ndarray([d, 128], nl::bfloat16, buffer = nl::sbuf);
    if tp_q {
        let s_q = q.shape()[1];
        transpose_rows(q_sb, 0, q, (b * s_q + q0) * d, rows);
    } else {
        nisa::dma_copy(q_sb[s![.., 0..rows]], q[s![b, .., q0..q0 + rows]]);
    }
    q_sb
}

/// Loads `cols` keys from `k0` of KV batch `kvb` of `src` (`(bs_kv, d, L)`, or
/// `(bs_kv, L, d)` with `tp_k`) into columns `[c0, c0 + cols)` of the bf16 tile
/// `k_sec`. With `offset_reg` (a `(1, 1)` uint32 tile) the keys start `k_off` later,
/// a run-time offset.
#[nki_helper]
fn load_k_tile(k_sec: Sbuf, c0: i64, src: Hbm, kvb: i64, k0: i64, cols: i64, tp_k: bool, offset_reg: Option<Sbuf>) {
    let [_nb, a, bdim] = src.shape();
    let d = if tp_k { bdim } else { a };
    let length = if tp_k { a } else { bdim };
    if let Some(k_off) = offset_reg {
        let ind = nl::ndarray([1, 1], nl::uint32, buffer = nl::sbuf);
        if !tp_k {
            nisa::tensor_scalar(ind, k_off, nl::add, k0);
            let view = src.ap([[length, d], [1, cols]], offset = kvb * d * length, scalar_offset = ind, indirect_dim = 2);
            nisa::dma_copy(k_sec[s![.., c0..c0 + cols]], view);
        } else {
            for t in 0..4 {
                let rows = (cols - 128 * t).min(128);
                if rows > 0 {
                    nisa::tensor_scalar(ind, k_off, nl::add, k0 + 128 * t);
                    let loaded = nl::ndarray([128, d], nl::bfloat16, buffer = nl::sbuf);
                    let view = src.ap([[d, rows], [1, d]], offset = kvb * length * d, scalar_offset = ind, indirect_dim = 1);
                    nisa::dma_copy(loaded[s![0..rows, ..]], view);
                    let flipped = nl::ndarray([d, 128], nl::bfloat16, buffer = nl::psum);
                    nisa::nc_transpose(flipped[s![.., 0..rows]], loaded[s![0..rows, ..]]);
                    nisa::tensor_copy(k_sec[s![.., c0 + 128 * t..c0 + 128 * t + rows]], flipped[s![.., 0..rows]]);
                }
            }
        }
    } else if tp_k {
        transpose_rows(k_sec, c0, src, (kvb * length + k0) * d, cols);
    } else {
        nisa::dma_copy(k_sec[s![.., c0..c0 + cols]], src[s![kvb, .., k0..k0 + cols]]);
    }
}

/// Loads `rows` values from key `k0` of KV batch `kvb` of `src` (`(bs_kv, L, d)`)
/// into V tile `t` of `v_sec` (`(128, tiles, d)` bf16), at a run-time offset with `offset_reg`.
#[nki_helper]
fn load_v_tile(v_sec: Sbuf, t: i64, src: Hbm, kvb: i64, k0: i64, rows: i64, offset_reg: Option<Sbuf>) {
    let [_nb, length, d] = src.shape();
    if let Some(k_off) = offset_reg {
        let ind = nl::ndarray([1, 1], nl::uint32, buffer = nl::sbuf);
        nisa::tensor_scalar(ind, k_off, nl::add, k0);
        let view = src.ap([[d, rows], [1, d]], offset = kvb * length * d, scalar_offset = ind, indirect_dim = 1);
        nisa::dma_copy(v_sec[s![0..rows, t, ..]], view);
    } else {
        nisa::dma_copy(v_sec[s![0..rows, t, ..]], src[s![kvb, k0..k0 + rows, ..]]);
    }
}

/// Writes the `rows` query rows of `x` (`(128, d)`, or `(d, 128)` with `tp_out`)
/// to the output rows `[q0, q0 + rows)` of batch `b`, cast to the output dtype.
#[nki_helper]
fn write_rows(out: Hbm, x: Sbuf, b: i64, q0: i64, rows: i64, tp_out: bool) {
    if tp_out {
        nisa::dma_copy(out[s![b, .., q0..q0 + rows]], x[s![.., 0..rows]]);
    } else {
        nisa::dma_copy(out[s![b, q0..q0 + rows, ..]], x[s![0..rows, ..]]);
    }
}

/// `x * column` per query row: `(128, d)` scaled by partition, or `(d, 128)`
/// scaled by column after a PE transpose of the broadcast column.
#[nki_helper]
fn scale_rows(dst: Sbuf, x: Sbuf, column: Sbuf, rows: i64, d: i64, tp_out: bool) {
    if tp_out {
        let flipped = nl::ndarray([d, 128], nl::float32, buffer = nl::psum);
        nisa::nc_transpose(flipped, column.broadcast(1, d));
        let factors = nl::ndarray([d, 128], nl::float32, buffer = nl::sbuf);
        nisa::tensor_copy(factors[s![.., 0..rows]], flipped[s![.., 0..rows]]);
        nisa::tensor_tensor(dst[s![.., 0..rows]], x[s![.., 0..rows]], factors[s![.., 0..rows]], nl::multiply);
    } else {
        nisa::tensor_scalar(dst[s![0..rows, ..]], x[s![0..rows, ..]], nl::multiply, column[s![0..rows, ..]]);
    }
}

/// Writes `x` as output rows `[q0, q0 + rows)` of batch `b`, first multiplied by
/// the reciprocal row sums `recip` (a `(128, 1)` column) when `normalize`.
#[nki_helper]
#[allow(clippy::too_many_arguments)]
fn finish_rows(out: Hbm, x: Sbuf, recip: Sbuf, b: i64, q0: i64, rows: i64, d: i64, tp_out: bool, normalize: bool, mm_dtype: Dtype) {
    if normalize {
        let shape = if tp_out { [d, 128] } else { [128, d] };
        let normalized = nl::ndarray(shape, mm_dtype, buffer = nl::sbuf);
        scale_rows(normalized, x, recip, rows, d, tp_out);
        write_rows(out, normalized, b, q0, rows, tp_out);
    } else {
        write_rows(out, x, b, q0, rows, tp_out);
    }
}

/// Loads the per-query bounds of batch `b` from the `(bs, s_q, 1)` HBM tensor
/// `src` into the `(128, groups)` tile `dst` (row `128 g + p` at `[p, g]`): the
/// full groups with one access pattern, the rows of a partial last group on
/// their own, so no read passes the batch's `s_q` rows. The partial group's
/// other partitions are left as they are; no query reads them.
#[nki_helper]
fn load_row_bounds(dst: Sbuf, src: Hbm, b: i64, s_q: i64) {
    let full = s_q / 128;
    let tail = s_q % 128;
    if full > 0 {
        nisa::dma_copy(dst[s![.., 0..full]], src.ap([[1, 128], [128, full]], offset = b * s_q));
    }
    if tail > 0 {
        nisa::dma_copy(dst[s![0..tail, full..full + 1]], src.ap([[1, tail], [1, 1]], offset = b * s_q + 128 * full));
    }
}

/// The sequence length of a K tensor (`(bs, d, L)`, or `(bs, L, d)` with `tp_k`); 0 when absent.
#[nki_helper]
fn kv_len(t: Option<Hbm>, tp_k: bool) -> i64 {
    let mut n = 0;
    if let Some(x) = t {
        n = if tp_k { x.shape()[1] } else { x.shape()[2] };
    }
    n
}

/// Attention over one batch `b` for query groups `[g_start, g_start + g_count)`:
/// every KV section, every group, then the cached statistics.
#[nki_helper]
#[allow(clippy::too_many_arguments)]
fn attend_batch(
    q: Hbm,
    k: Hbm,
    v: Hbm,
    out: Hbm,
    stat_max: Option<Hbm>,
    stat_sum: Option<Hbm>,
    b: i64,
    g_start: i64,
    g_count: i64,
    scale: f64,
    causal_mask: bool,
    k_prior: Option<Hbm>,
    v_prior: Option<Hbm>,
    prior_used_len: Option<Hbm>,
    sink: Option<Hbm>,
    sw: i64,
    tp_q: bool,
    tp_k: bool,
    tp_out: bool,
    mm_dtype: Dtype,
    cp_offset: Option<Hbm>,
    cp_deg: i64,
    use_cp: bool,
    strided: bool,
    striped: bool,
    bound_min: Option<Hbm>,
    bound_max: Option<Hbm>,
    skip_norm: bool,
    cap: f64,
    q_seg: Option<Hbm>,
    kv_seg: Option<Hbm>,
    bias: Option<Hbm>,
) {
    let [bs, s_q, d] = if tp_q { q.shape() } else { [q.shape()[0], q.shape()[2], q.shape()[1]] };
    let bs_kv = k.shape()[0];
    let s_k: i64 = kv_len(Some(k), tp_k);
    let kvb = b / (bs / bs_kv);
    let groups = (s_q + 127) / 128;
    let prefix = k_prior.is_some();
    let packed = bound_min.is_some();
    let has_sink = sink.is_some();
    let use_swa = sw > 0;
    let contiguous_cp = use_cp && !strided && !striped;
    let is_causal = if striped {
        true
    } else if contiguous_cp {
        false
    } else {
        causal_mask
    };
    let dynamic = use_cp || packed || striped || (use_swa && !contiguous_cp && sw <= 128);
    // range_select applies no scale (sequence packing reaches it without the scale rule).
    assert!(!dynamic || scale == 1.0, "range_select path doesn't support scale != 1.0");
    // With CP + SWA only the keys the local queries can see are loaded: a window
    // of s_ka keys starting at the run-time offset k_off.
    let window = use_swa && use_cp && !strided;
    let s_ka = if window { (((s_q + sw - 1).min(s_k) + 511) / 512 * 512).min(s_k) } else { s_k };
    let s_p: i64 = kv_len(k_prior, tp_k);
    let s_pp = (s_p + 511) / 512 * 512;
    let total = s_pp + s_ka;
    let section_len = if total > 10240 { 8192 } else { total };
    let sections = (total + section_len - 1) / section_len;
    let n_k = (section_len + 511) / 512;
    let n_v = (section_len + 127) / 128;
    let n_l = (section_len + 2047) / 2048;
    let sink_cols = if has_sink { 1 } else { 0 };
    let segmented = q_seg.is_some();
    let biased = bias.is_some();

    // Segment ids in fp32: column g, partition p is local query row 128 g + p.
    let q_ids = if segmented { Some(nl::ndarray([128, groups], nl::float32, buffer = nl::sbuf)) } else { None };
    if let Some(qs) = q_seg {
        if let Some(qi) = q_ids {
            load_row_bounds(qi, qs, b / (bs / qs.shape()[0]), s_q);
        }
    }
    let mut kv_row = 0;
    if let Some(ks) = kv_seg {
        kv_row = kvb / (bs_kv / ks.shape()[0]);
    }

    let zero_bias = nl::ndarray([128, 1], nl::float32, buffer = nl::sbuf);
    nisa::memset(zero_bias, 0.0);
    let sink_sb = nl::ndarray([128, 1], nl::float32, buffer = nl::sbuf);
    if let Some(sk) = sink {
        nisa::dma_copy(sink_sb[s![0..1, 0..1]], sk[s![b..b + 1, 0..1]]);
        broadcast_partition0(sink_sb);
    }

    // Range-select bounds: column g, partition p is local query row 128 g + p.
    let ubs = nl::ndarray([128, groups], nl::float32, buffer = nl::sbuf);
    let lbs = nl::ndarray([128, groups], nl::float32, buffer = nl::sbuf);
    let ubs_prior = nl::ndarray([128, groups], nl::float32, buffer = nl::sbuf);
    let lbs_prior = nl::ndarray([128, groups], nl::float32, buffer = nl::sbuf);
    nisa::memset(lbs, 0.0);
    nisa::memset(lbs_prior, 0.0);
    let k_off_reg = nl::ndarray([1, 1], nl::uint32, buffer = nl::sbuf);
    if dynamic {
        if use_cp && strided {
            nisa::iota(ubs, [[cp_deg * 128, groups]], channel_multiplier = cp_deg);
        } else if packed && !is_causal {
            nisa::iota(ubs, [[128, groups]], offset = s_k);
        } else {
            nisa::iota(ubs, [[128, groups]], channel_multiplier = 1);
        }
    }
    let cp_col = nl::ndarray([128, 1], nl::float32, buffer = nl::sbuf);
    if use_cp {
        if let Some(cpo) = cp_offset {
            let loaded = scalar_column(cpo[s![0..1, 0..1]]);
            nisa::tensor_copy(cp_col, loaded);
        }
        if dynamic {
            nisa::tensor_scalar(ubs, ubs, nl::add, cp_col);
        }
    }
    if packed {
        if let Some(bmin) = bound_min {
            load_row_bounds(lbs, bmin, b, s_q);
        }
        if let Some(bmax) = bound_max {
            let upper = nl::ndarray([128, groups], nl::float32, buffer = nl::sbuf);
            load_row_bounds(upper, bmax, b, s_q);
            nisa::tensor_tensor(ubs, ubs, upper, nl::minimum);
        }
    }
    if use_swa && dynamic {
        if packed {
            nisa::scalar_tensor_tensor(lbs, ubs, nl::subtract, (sw - 1) as f64, nl::maximum, lbs);
        } else {
            nisa::tensor_scalar(lbs, ubs, nl::add, -((sw - 1) as f64));
        }
    }
    let pul_col = nl::ndarray([128, 1], nl::float32, buffer = nl::sbuf);
    if let Some(pul) = prior_used_len {
        let loaded_len = scalar_column(pul.ap([[1, 1], [1, 1]], offset = 0));
        nisa::tensor_copy(pul_col, loaded_len);
        nisa::tensor_scalar(ubs_prior, zero_bias.ap([[1, 128], [0, groups]], offset = 0), nl::add, pul_col);
        if use_swa {
            if dynamic {
                nisa::tensor_scalar(lbs_prior, lbs, nl::add, pul_col);
            } else {
                nisa::iota(lbs_prior, [[128, groups]], channel_multiplier = 1);
                nisa::tensor_scalar(lbs_prior, lbs_prior, nl::add, pul_col, op1 = nl::add, operand1 = -((sw - 1) as f64));
            }
        }
    }
    if window {
        let k_off = nl::ndarray([128, 1], nl::float32, buffer = nl::sbuf);
        nisa::tensor_scalar(k_off, cp_col, nl::add, -((s_ka - s_q) as f64), op1 = nl::maximum, operand1 = 0.0);
        nisa::tensor_copy(k_off_reg, k_off[s![0..1, 0..1]]);
        nisa::tensor_scalar(lbs, lbs, nl::subtract, k_off);
        nisa::tensor_scalar(ubs, ubs, nl::subtract, k_off);
    }
    let offset_reg = if window { Some(k_off_reg) } else { None };

    // Running statistics of every group of the batch.
    let run_negmax = nl::ndarray([128, groups], nl::float32, buffer = nl::sbuf);
    let run_sum = nl::ndarray([128, groups], nl::float32, buffer = nl::sbuf);
    let sum_recip = nl::ndarray([128, groups], nl::float32, buffer = nl::sbuf);
    let width = n_k * 512;

    for sec in 0..sections {
        let sec_off = sec * section_len;
        let contains_prefix = prefix && sec_off < s_pp;
        let sec_off_active = if contains_prefix { sec_off } else { sec_off - s_pp };
        let next_off = (sec + 1) * section_len;
        let next_prefix = prefix && next_off < s_pp;
        let next_off_active = if next_prefix { next_off } else { next_off - s_pp };

        // The section's K (d, width) and V (128, n_v, d) tiles, in bf16.
        let k_sec = nl::ndarray([d, width], nl::bfloat16, buffer = nl::sbuf);
        let v_sec = nl::ndarray([128, n_v, d], nl::bfloat16, buffer = nl::sbuf);
        for kt in 0..n_k {
            let (in_prior, k0, cols): (bool, i64, i64) = kv_tile(sec_off + 512 * kt, 512, prefix, s_pp, s_p, s_ka, total);
            if cols > 0 {
                if in_prior {
                    if let Some(kp) = k_prior {
                        load_k_tile(k_sec, 512 * kt, kp, kvb, k0, cols, tp_k, None);
                    }
                } else {
                    load_k_tile(k_sec, 512 * kt, k, kvb, k0, cols, tp_k, offset_reg);
                }
            }
        }
        // The section's key segment ids, the same on every partition.
        let k_ids = if segmented { Some(nl::ndarray([128, width], nl::float32, buffer = nl::sbuf)) } else { None };
        if let Some(ks) = kv_seg {
            if let Some(ki) = k_ids {
                for kt in 0..n_k {
                    let (_in_prior, k0, cols): (bool, i64, i64) = kv_tile(sec_off + 512 * kt, 512, prefix, s_pp, s_p, s_ka, total);
                    if cols > 0 {
                        nisa::dma_copy(ki[s![.., 512 * kt..512 * kt + cols]], ks.ap([[0, 128], [1, cols]], offset = kv_row * s_k + k0));
                    }
                }
            }
        }
        for vt in 0..n_v {
            let (in_prior, k0, rows): (bool, i64, i64) = kv_tile(sec_off + 128 * vt, 128, prefix, s_pp, s_p, s_ka, total);
            if rows > 0 {
                if in_prior {
                    if let Some(vp) = v_prior {
                        load_v_tile(v_sec, vt, vp, kvb, k0, rows, None);
                    }
                } else {
                    load_v_tile(v_sec, vt, v, kvb, k0, rows, offset_reg);
                }
            }
        }

        for g in g_start..g_start + g_count {
            let q0 = 128 * g;
            let rows = (s_q - q0).min(128);
            let group_on = !is_causal || contains_prefix || sees_key(g, sec_off_active, 1, cp_deg, strided);
            let next_on = sec + 1 < sections && (!is_causal || next_prefix || sees_key(g, next_off_active, 1, cp_deg, strided));
            let last = sec + 1 == sections || !next_on;
            if group_on {
                let q_sb = load_q(q, b, q0, rows, d, tp_q);

                // QK, masking, scale and the max of every 512-key tile.
                let part_max = nl::ndarray([128, n_k + sink_cols], nl::float32, buffer = nl::sbuf);
                nisa::memset(part_max, f32::MIN);
                let masked = nl::ndarray([128, width], nl::float32, buffer = nl::sbuf);
                for kt in 0..n_k {
                    let (in_prior, k0, cols): (bool, i64, i64) = kv_tile(sec_off + 512 * kt, 512, prefix, s_pp, s_p, s_ka, total);
                    if cols > 0 && (in_prior || tile_visible(is_causal, sw, g, k0, 512, cp_deg, strided)) {
                        let c0 = 512 * kt;
                        let scores = nl::ndarray([128, 512], mm_dtype, buffer = nl::psum);
                        nisa::nc_matmul(scores[s![0..rows, 0..cols]], q_sb[s![.., 0..rows]], k_sec[s![.., c0..c0 + cols]]);
                        let dst = masked[s![0..rows, c0..c0 + cols]];
                        let tile_max = part_max[s![0..rows, kt]];
                        // Soft cap: logits cap·tanh(scale·s / cap), capped before the masks.
                        if cap > 0.0 {
                            nisa::activation(dst, nl::tanh, scores[s![0..rows, 0..cols]], scale = scale / cap);
                            nisa::tensor_scalar(dst, dst, nl::multiply, cap);
                        }
                        let uncapped = if cap > 0.0 { dst } else { scores[s![0..rows, 0..cols]] };
                        let uncapped_scale = if cap > 0.0 { 1.0 } else { scale };
                        // Bias: scaled (and capped) logits plus the bias tile, before the masks.
                        if let Some(bi) = bias {
                            let bt = nl::ndarray([128, 512], nl::float32, buffer = nl::sbuf);
                            nisa::dma_copy(bt[s![0..rows, 0..cols]], bi[s![b, q0..q0 + rows, k0..k0 + cols]]);
                            nisa::scalar_tensor_tensor(dst, uncapped, nl::multiply, uncapped_scale, nl::add, bt[s![0..rows, 0..cols]]);
                        }
                        let capped = if biased { dst } else { uncapped };
                        let cap_scale = if biased { 1.0 } else { uncapped_scale };
                        // Segment ids: scaled logits where the ids match, FLOAT32_MIN elsewhere
                        // (s·eq + (eq - 1)·FLOAT32_MAX, exact in both cases).
                        if let Some(ki) = k_ids {
                            if let Some(qi) = q_ids {
                                let eq = nl::ndarray([128, 512], nl::float32, buffer = nl::sbuf);
                                let same = eq[s![0..rows, 0..cols]];
                                nisa::tensor_scalar(same, ki[s![0..rows, c0..c0 + cols]], nl::equal, qi[s![0..rows, g]]);
                                nisa::scalar_tensor_tensor(dst, capped, nl::multiply, cap_scale, nl::multiply, same);
                                nisa::tensor_scalar(same, same, nl::subtract, 1.0, op1 = nl::multiply, operand1 = f32::MAX);
                                nisa::tensor_tensor(dst, dst, same, nl::add);
                            }
                        }
                        let src = if segmented || biased { dst } else { capped };
                        let tile_scale = if segmented || biased { 1.0 } else { cap_scale };
                        if dynamic || in_prior {
                            let lower = if in_prior { lbs_prior } else { lbs };
                            let upper = if in_prior { ubs_prior } else { ubs };
                            let keep_upper = if in_prior || (packed && !is_causal) { nl::less } else { nl::less_equal };
                            nisa::range_select(
                                dst,
                                src,
                                nl::greater_equal,
                                keep_upper,
                                lower[s![0..rows, g]],
                                upper[s![0..rows, g]],
                                reduce_cmd = nisa::reduce_cmd::reset_reduce,
                                reduce_res = tile_max,
                                reduce_op = nl::maximum,
                                range_start = k0,
                                on_false_value = f32::MIN,
                            );
                        } else if is_causal && (use_swa || q0 < k0 + 512) {
                            let copied = nl::ndarray([128, 512], mm_dtype, buffer = nl::sbuf);
                            nisa::tensor_copy(copied[s![0..rows, 0..cols]], src);
                            let selected = nl::ndarray([128, 512], mm_dtype, buffer = nl::sbuf);
                            nisa::affine_select(
                                selected[s![0..rows, 0..cols]],
                                [[-1, cols]],
                                1,
                                copied[s![0..rows, 0..cols]],
                                f32::MIN,
                                cmp_op = nl::greater_equal,
                                offset = q0 - k0,
                            );
                            if use_swa {
                                nisa::affine_select(
                                    selected[s![0..rows, 0..cols]],
                                    [[1, cols]],
                                    -1,
                                    selected[s![0..rows, 0..cols]],
                                    f32::MIN,
                                    cmp_op = nl::greater_equal,
                                    offset = k0 + sw - 1 - q0,
                                );
                            }
                            nisa::tensor_scalar_reduce(
                                dst,
                                selected[s![0..rows, 0..cols]],
                                nl::multiply,
                                tile_scale,
                                nl::maximum,
                                reduce_res = tile_max,
                            );
                        } else {
                            nisa::tensor_scalar_reduce(dst, src, nl::multiply, tile_scale, nl::maximum, reduce_res = tile_max);
                        }
                    }
                }

                // Section max, running max and the correction of earlier sections.
                if has_sink && sec == 0 {
                    nisa::tensor_copy(part_max[s![.., n_k..n_k + 1]], sink_sb);
                }
                let sec_negmax = nl::ndarray([128, 1], nl::float32, buffer = nl::sbuf);
                nisa::tensor_reduce(sec_negmax, nl::maximum, part_max, 1, negate = true);
                let corr = nl::ndarray([128, 1], nl::float32, buffer = nl::sbuf);
                if sec == 0 {
                    nisa::tensor_copy(run_negmax[s![.., g]], sec_negmax);
                    nisa::memset(corr, 0.0);
                } else {
                    let prev_max = nl::ndarray([128, 1], nl::float32, buffer = nl::sbuf);
                    nisa::activation(prev_max, nl::copy, run_negmax[s![.., g]], bias = zero_bias, scale = -1.0);
                    nisa::tensor_tensor(run_negmax[s![.., g]], run_negmax[s![.., g]], sec_negmax, nl::minimum);
                    nisa::activation(corr, nl::exp, prev_max, bias = run_negmax[s![.., g]]);
                }

                // exp(s - max) into bf16 P tiles with fp32 row sums; P transposed so keys sit on partitions.
                let part_sum = nl::ndarray([128, n_k + sink_cols], nl::float32, buffer = nl::sbuf);
                nisa::memset(part_sum, 0.0);
                let probs = nl::ndarray([128, width], nl::bfloat16, buffer = nl::sbuf);
                let probs_t = nl::ndarray([128, width], nl::bfloat16, buffer = nl::sbuf);
                for kt in 0..n_k {
                    let (in_prior, k0, cols): (bool, i64, i64) = kv_tile(sec_off + 512 * kt, 512, prefix, s_pp, s_p, s_ka, total);
                    if cols > 0 && (in_prior || tile_visible(is_causal, sw, g, k0, 512, cp_deg, strided)) {
                        let c0 = 512 * kt;
                        nisa::activation_reduce(
                            probs[s![0..rows, c0..c0 + cols]],
                            nl::exp,
                            masked[s![0..rows, c0..c0 + cols]],
                            nl::add,
                            part_sum[s![0..rows, kt]],
                            bias = run_negmax[s![0..rows, g]],
                        );
                        let full = cols / 128;
                        let rest = cols % 128;
                        if full > 0 {
                            nisa::dma_transpose(
                                probs_t.ap([[width, 128], [1, 1], [128, full], [1, rows]], offset = c0),
                                probs.ap([[width, rows], [1, 1], [128, full], [1, 128]], offset = c0),
                            );
                        }
                        if rest > 0 {
                            nisa::dma_transpose(
                                probs_t.ap([[width, rest], [1, 1], [128, 1], [1, rows]], offset = c0 + 128 * full),
                                probs.ap([[width, rows], [1, 1], [128, 1], [1, rest]], offset = c0 + 128 * full),
                            );
                        }
                    }
                }
                if has_sink && sec == 0 {
                    nisa::activation(part_sum[s![.., n_k..n_k + 1]], nl::exp, sink_sb, bias = run_negmax[s![.., g]]);
                }

                // PV: per 2048 keys in PSUM, added up across large tiles.
                let pv_shape = if tp_out { [d, 128] } else { [128, d] };
                let pv = nl::ndarray(pv_shape, mm_dtype, buffer = nl::sbuf);
                nisa::memset(pv, 0.0);
                for lt in 0..n_l {
                    let acc = nl::ndarray(pv_shape, mm_dtype, buffer = nl::psum);
                    let mut used = false;
                    for sub in 0..16 {
                        let vt = 16 * lt + sub;
                        let (in_prior, k0, keys): (bool, i64, i64) = kv_tile(sec_off + 128 * vt, 128, prefix, s_pp, s_p, s_ka, total);
                        let visible = in_prior || tile_visible(is_causal, sw, g, k0, 128, cp_deg, strided);
                        if vt < n_v && keys > 0 && visible {
                            let p_t = probs_t[s![0..keys, 128 * vt..128 * vt + rows]];
                            let v_t = v_sec[s![0..keys, vt, ..]];
                            if tp_out {
                                nisa::nc_matmul(acc[s![.., 0..rows]], v_t, p_t);
                            } else {
                                nisa::nc_matmul(acc[s![0..rows, ..]], p_t, v_t);
                            }
                            used = true;
                        }
                    }
                    if used {
                        if tp_out {
                            nisa::tensor_tensor(pv[s![.., 0..rows]], pv[s![.., 0..rows]], acc[s![.., 0..rows]], nl::add);
                        } else {
                            nisa::tensor_tensor(pv[s![0..rows, ..]], pv[s![0..rows, ..]], acc[s![0..rows, ..]], nl::add);
                        }
                    }
                }

                // Row sums, then the output: normalized on the group's last section.
                let sec_sum = nl::ndarray([128, 1], nl::float32, buffer = nl::sbuf);
                nisa::tensor_reduce(sec_sum, nl::add, part_sum, 1);
                if sec == 0 {
                    nisa::tensor_copy(run_sum[s![.., g]], sec_sum);
                } else {
                    let prev_sum = nl::ndarray([128, 1], nl::float32, buffer = nl::sbuf);
                    nisa::tensor_copy(prev_sum, run_sum[s![.., g]]);
                    nisa::tensor_scalar(run_sum[s![.., g]], prev_sum, nl::multiply, corr, op1 = nl::add, operand1 = sec_sum);
                }
                if last && !skip_norm {
                    nisa::reciprocal(sum_recip[s![.., g]], run_sum[s![.., g]]);
                }
                let normalize = last && !skip_norm;
                if sec == 0 {
                    finish_rows(out, pv, sum_recip[s![.., g]], b, q0, rows, d, tp_out, normalize, mm_dtype);
                } else {
                    let prev_out = nl::ndarray(pv_shape, mm_dtype, buffer = nl::sbuf);
                    if tp_out {
                        nisa::dma_copy(prev_out[s![.., 0..rows]], out[s![b, .., q0..q0 + rows]]);
                    } else {
                        nisa::dma_copy(prev_out[s![0..rows, ..]], out[s![b, q0..q0 + rows, ..]]);
                    }
                    let merged = nl::ndarray(pv_shape, nl::float32, buffer = nl::sbuf);
                    if tp_out {
                        let rescaled = nl::ndarray(pv_shape, nl::float32, buffer = nl::sbuf);
                        scale_rows(rescaled, prev_out, corr, rows, d, true);
                        nisa::tensor_tensor(merged[s![.., 0..rows]], rescaled[s![.., 0..rows]], pv[s![.., 0..rows]], nl::add);
                    } else {
                        nisa::scalar_tensor_tensor(
                            merged[s![0..rows, ..]],
                            prev_out[s![0..rows, ..]],
                            nl::multiply,
                            corr[s![0..rows, ..]],
                            nl::add,
                            pv[s![0..rows, ..]],
                        );
                    }
                    finish_rows(out, merged, sum_recip[s![.., g]], b, q0, rows, d, tp_out, normalize, mm_dtype);
                }
            }
        }
    }

    // Cached statistics: column g of batch b holds rows 128 g .. 128 g + 127.
    if let Some(nm) = stat_max {
        nisa::dma_copy(nm[s![b, .., g_start..g_start + g_count]], run_negmax[s![.., g_start..g_start + g_count]]);
    }
    if let Some(sm) = stat_sum {
        let sums = if skip_norm { run_sum } else { sum_recip };
        nisa::dma_copy(sm[s![b, .., g_start..g_start + g_count]], sums[s![.., g_start..g_start + g_count]]);
    }
}

/// Flash attention for prefill (context encoding), a drop-in for the NKI
/// library's `attention_cte` (2.30): causal or not, sliding window, context
/// parallelism (contiguous, strided or striped Q), prefix caching, sink tokens,
/// native GQA, cached softmax statistics, sequence packing and LNC2 sharding.
///
/// Layouts: `q` is `(bs, seqlen_q, d)` (`(bs, d, seqlen_q)` when not `tp_q`), `k`
/// is `(bs_kv, d, seqlen_kv)` (`(bs_kv, seqlen_kv, d)` with `tp_k`), `v` is
/// `(bs_kv, seqlen_kv, d)`. Returns the output (`(bs, seqlen_q, d)`, or
/// `(bs, d, seqlen_q)` with `tp_out`) and, with `cache_softmax`, the negated row
/// max and the reciprocal row sum (the raw sum with `skip_output_normalization`),
/// each `(bs, 128, ceil(seqlen_q / 128))` with row `128 g + p` at `[.., p, g]`.
/// Past the library's keyword arguments, `soft_cap` (default off) caps the
/// logits to `C·tanh(scale·q·k / C)` before the masks (the ring kernels use it),
/// and `q_segment_ids` / `kv_segment_ids` (`(batch, seqlen_q)` / `(batch,
/// seqlen_kv)`, any dtype holding integers below 2^24, query batch `i` reading
/// row `i / (bs / batch)`) show a key only to the queries with its id. A row that
/// sees no key keeps the masked sentinel statistics (negated max FLOAT32_MAX), so
/// the ring's merge and normalisation can tell it. `bias` (float32 `(bs,
/// seqlen_q, seqlen_kv)`) is added to the logits after the soft cap, before the
/// masks.
#[nki_kernel]
#[allow(clippy::too_many_arguments)]
pub fn attention_cte(
    #[dtypes(float32, bfloat16, float16)] q: Hbm,
    #[dtypes(float32, bfloat16, float16)] k: Hbm,
    #[dtypes(float32, bfloat16, float16)] v: Hbm,
    #[default(1.0)] scale: f64,
    #[default(true)] causal_mask: bool,
    #[dtypes(float32, bfloat16, float16)] k_prior: Option<Hbm>,
    #[dtypes(float32, bfloat16, float16)] v_prior: Option<Hbm>,
    #[dtypes(int32)] prior_used_len: Option<Hbm>,
    #[dtypes(float32, bfloat16, float16)] sink: Option<Hbm>,
    #[range(>= 0)] sliding_window: Option<i64>,
    #[default(true)] tp_q: bool,
    #[default(false)] tp_k: bool,
    #[default(false)] tp_out: bool,
    #[default(false)] cache_softmax: bool,
    #[default(nl::float32)] softmax_dtype: Dtype,
    #[default(nl::float32)] mm_out_dtype: Dtype,
    #[dtypes(int32, float32)] cp_offset: Option<Hbm>,
    global_cp_deg: Option<i64>,
    #[default(false)] cp_strided_q_slicing: bool,
    #[dtypes(int32, float32)] bound_min: Option<Hbm>,
    #[dtypes(int32, float32)] bound_max: Option<Hbm>,
    #[default(false)] cp_striped_input: bool,
    #[default(false)] skip_output_normalization: bool,
    #[range(> 0.0, <= 3.4028234663852886e38)] soft_cap: Option<f64>,
    #[dtypes(int32)] q_segment_ids: Option<Hbm>,
    #[dtypes(int32)] kv_segment_ids: Option<Hbm>,
    #[dtypes(float32)] bias: Option<Hbm>,
) -> Outputs {
    let sw = sliding_window.unwrap_or(0);
    let cap = soft_cap.unwrap_or(0.0);
    let prefix = k_prior.is_some();
    assert!(!prefix || v_prior.is_some(), "k_prior is not None but v_prior is None for prefix caching");
    assert!(!prefix || prior_used_len.is_some(), "k_prior is not None but prior_used_len is None for prefix caching");
    assert!(prefix || v_prior.is_none(), "k_prior is None but v_prior is not None.");
    assert!(prefix || prior_used_len.is_none(), "k_prior is None but prior_used_len is not None.");
    assert!(bound_min.is_some() == bound_max.is_some(), "bound_min and bound_max must both be set or both be None");
    if let Some(pul) = prior_used_len {
        let pul_shape = pul.shape();
        assert!(pul.ndim() == 1 && pul_shape[0] == 1, "Received unexpected shape for prior_used_len. Expected (1,), received {pul_shape}");
    }
    let [bs, s_q, d] = if tp_q { q.shape() } else { [q.shape()[0], q.shape()[2], q.shape()[1]] };
    let bs_kv = k.shape()[0];
    let s_k: i64 = kv_len(Some(k), tp_k);
    let k_shape = k.shape();
    let want_k = if tp_k { [bs_kv, s_k, d] } else { [bs_kv, d, s_k] };
    assert!(
        k.ndim() == 3 && k_shape[1] == want_k[1] && k_shape[2] == want_k[2],
        "Received unexpected shape for k. Expected {want_k}, received {k_shape}"
    );
    let v_shape = v.shape();
    assert!(
        v.ndim() == 3 && v_shape[0] == bs_kv && v_shape[1] == s_k && v_shape[2] == d,
        "Received unexpected shape for v. Expected ({bs_kv}, {s_k}, {d}), received {v_shape}"
    );
    let s_p: i64 = kv_len(k_prior, tp_k);
    if let Some(kp) = k_prior {
        let kp_shape = kp.shape();
        let want_kp = if tp_k { [bs_kv, s_p, d] } else { [bs_kv, d, s_p] };
        assert!(
            kp.ndim() == 3 && kp_shape[0] == bs_kv && kp_shape[1] == want_kp[1] && kp_shape[2] == want_kp[2],
            "Received unexpected shape for k_prior. Expected {want_kp}, received {kp_shape}"
        );
    }
    if let Some(vp) = v_prior {
        let vp_shape = vp.shape();
        assert!(
            vp.ndim() == 3 && vp_shape[0] == bs_kv && vp_shape[1] == s_p && vp_shape[2] == d,
            "Received unexpected shape for v_prior. Expected ({bs_kv}, {s_p}, {d}), received {vp_shape}"
        );
    }
    assert!(
        !cache_softmax || s_q % 128 == 0,
        "For cache softmax, attention_cte currently expects seqlen_q multiple of 128, got seqlen_q={s_q}"
    );
    let packed = bound_min.is_some();
    if let Some(bmin) = bound_min {
        let bmin_shape = bmin.shape();
        assert!(
            bmin.ndim() == 3 && bmin_shape[0] == bs && bmin_shape[1] == s_q && bmin_shape[2] == 1,
            "bound_min shape must be (batch, seqlen_q, 1)=({bs}, {s_q}, 1), got {bmin_shape}"
        );
    }
    if let Some(bmax) = bound_max {
        let bmax_shape = bmax.shape();
        assert!(
            bmax.ndim() == 3 && bmax_shape[0] == bs && bmax_shape[1] == s_q && bmax_shape[2] == 1,
            "bound_max shape must be (batch, seqlen_q, 1)=({bs}, {s_q}, 1), got {bmax_shape}"
        );
    }
    assert!(q_segment_ids.is_some() == kv_segment_ids.is_some(), "q_segment_ids and kv_segment_ids must both be set or both be None");
    if let Some(qs) = q_segment_ids {
        let qs_shape = qs.shape();
        assert!(
            qs.ndim() == 2 && qs_shape[1] == s_q && qs_shape[0] >= 1 && bs % qs_shape[0] == 0,
            "q_segment_ids must be (batch, seqlen_q) with batch dividing {bs}, got {qs_shape}"
        );
        assert!(s_q % 128 == 0, "segment ids need seqlen_q a multiple of 128, got {s_q}");
        assert!(!prefix && sw == 0, "segment ids are not supported with prefix caching or sliding_window");
    }
    if let Some(ks) = kv_segment_ids {
        let ks_shape = ks.shape();
        let mut q_rows = 0;
        if let Some(qs) = q_segment_ids {
            q_rows = qs.shape()[0];
        }
        assert!(
            ks.ndim() == 2 && ks_shape[0] == q_rows && ks_shape[1] == s_k && bs_kv % q_rows == 0,
            "kv_segment_ids must be ({q_rows}, {s_k}) to match q_segment_ids and k, got {ks_shape}"
        );
    }
    if let Some(bi) = bias {
        let bi_shape = bi.shape();
        assert!(
            bi.ndim() == 3 && bi_shape[0] == bs && bi_shape[1] == s_q && bi_shape[2] == s_k,
            "bias must be (bs, seqlen_q, seqlen_kv)=({bs}, {s_q}, {s_k}), got {bi_shape}"
        );
        assert!(bi.dtype() == nl::float32, "bias must be float32");
        assert!(!prefix && sw == 0, "bias is not supported with prefix caching or sliding_window");
    }
    assert!(!packed || !prefix, "is_sequence_packed is not supported with prefix caching");
    assert!(!packed || global_cp_deg.unwrap_or(0) <= 1, "is_sequence_packed is not supported with context parallelism");

    let groups = (s_q + 127) / 128;
    let out_shape = if tp_out { [bs, d, s_q] } else { [bs, s_q, d] };
    let out = nl::ndarray(out_shape, q.dtype(), buffer = nl::shared_hbm);
    let stat_max = if cache_softmax { Some(nl::ndarray([bs, 128, groups], softmax_dtype, buffer = nl::shared_hbm)) } else { None };
    let stat_sum = if cache_softmax { Some(nl::ndarray([bs, 128, groups], softmax_dtype, buffer = nl::shared_hbm)) } else { None };

    assert!(bs > 0, "Batch size must be positive, got {bs}");
    assert!(bs <= 512, "attention_cte kernel is not tested for batch size above 512, got {bs}.");
    assert!(bs_kv > 0, "Batch size must be positive, got {bs_kv}");
    assert!(bs % bs_kv == 0, "Q batch size must be a multiple of KV batch size, got bs={bs}, bs_kv={bs_kv}");
    assert!(s_q <= 131072, "attention_cte kernel is not tested for seqlen above 131072, got seqlen_q={s_q}.");
    let s_k_total = s_k + s_p;
    assert!(s_k_total <= 131072, "attention_cte kernel is not tested for seqlen above 131072, got seqlen_k_total={s_k_total}.");
    assert!(sw <= 131072, "attention_cte kernel is not tested for sliding window above 131072, got {sw}.");
    assert!(d > 0, "d must be > 0, got d={d}.");
    assert!(d <= 128, "we do not support head_dim > 128, got head dim {d}");
    assert!(
        mm_out_dtype == nl::float32 || (mm_out_dtype == nl::bfloat16 && nisa::get_nc_version() >= nisa::nc_version::gen4),
        "mm_out_dtype (psum) should be in [float32, bfloat16], and 2-byte dtype is only allows in gen4+ (Trn3+),but got dtype {mm_out_dtype}"
    );
    let use_cp = global_cp_deg.is_some();
    let cp_deg = global_cp_deg.unwrap_or(1);
    assert!(
        cp_deg == 0 || (1 <= cp_deg && cp_deg <= 32),
        "attention_cte kernel is not tested for global_cp_deg outside [1, 32], got global_cp_deg={cp_deg}."
    );
    assert!(!skip_output_normalization || cache_softmax, "skip_output_normalization=True requires cache_softmax=True");
    let use_swa = sw > 0;
    assert!(!(use_swa || prefix || use_cp) || scale == 1.0, "SWA/Prefix Caching/CP only support scale=1.0, but got ac.scale={scale}");
    // CteRule::ScaleNotFinite and CteRule::CausalScale (crate::scale::MIN_MASKED_SCALE): the causal mask's FLOAT32_MIN is scaled.
    assert!(
        f32::MIN <= scale && scale <= f32::MAX && (!causal_mask || scale >= 1e-30),
        "scale must be a finite float32, and at least 1e-30 with causal_mask (masked scores are FLOAT32_MIN * scale), got {scale}"
    );
    assert!(!use_cp || causal_mask, "CP currently only supports causal attn");
    assert!(!use_swa || causal_mask, "SWA currently only supports causal attn");
    assert!(!cp_striped_input || use_cp, "cp_striped_input requires CP mode (global_cp_deg must be set)");
    assert!(!cp_striped_input || causal_mask, "Striped CP requires causal_mask=True");
    assert!(!cp_striped_input || !use_swa, "Striped CP does not yet support SWA");
    assert!(!cp_striped_input || !prefix, "Striped CP does not yet support prefix caching");
    assert!(!use_cp || cp_offset.is_some(), "cp_offset missing but global_cp_deg is provided");
    if let Some(cpo) = cp_offset {
        let cpo_shape = cpo.shape();
        assert!(!use_cp || (cpo.ndim() == 2 && cpo_shape[0] == 1 && cpo_shape[1] == 1), "cp_offset shape must be (1, 1) for CP attn");
    }

    // LNC sharding: whole batches per program; an odd last batch is split by query groups.
    let grid = nl::program_ndim() == 1;
    let shard = if grid { nl::program_id(0) } else { 0 };
    let shards = if grid { nl::num_programs(0) } else { 1 };
    let per_shard = bs / shards;
    // The odd last batch: from 1024 rows each program takes a share of its groups
    // (more of the first, cheaper groups under a causal mask), below that program 0 takes it all.
    let has_remainder = bs % shards != 0;
    let causal_split = causal_mask && (cp_offset.is_none() || cp_strided_q_slicing) && sw == 0;
    let mut frac = if causal_split { 0.65 } else { 0.5 };
    if let Some(vp) = v_prior {
        if causal_split {
            let active = v.shape()[1] as f64;
            let prior = vp.shape()[1] as f64;
            frac = (0.65 * active + 0.5 * prior) / (active + prior);
        }
    }
    let (rem_start, rem_end): (i64, i64) = remainder_groups(shard, s_q, groups, frac);
    let items = per_shard + if has_remainder && rem_end > rem_start { 1 } else { 0 };
    for item in 0..items {
        let whole = item < per_shard;
        let b = if whole { shard * per_shard + item } else { bs - 1 };
        let g_start = if whole { 0 } else { rem_start };
        let g_end = if whole { groups } else { rem_end };
        attend_batch(
            q,
            k,
            v,
            out,
            stat_max,
            stat_sum,
            b,
            g_start,
            g_end - g_start,
            scale,
            causal_mask,
            k_prior,
            v_prior,
            prior_used_len,
            sink,
            sw,
            tp_q,
            tp_k,
            tp_out,
            mm_out_dtype,
            cp_offset,
            cp_deg,
            use_cp,
            cp_strided_q_slicing,
            cp_striped_input,
            bound_min,
            bound_max,
            skip_output_normalization,
            cap,
            q_segment_ids,
            kv_segment_ids,
            bias,
        );
    }
    if let Some(nm) = stat_max {
        if let Some(sm) = stat_sum {
            return Outputs(out, nm, sm);
        }
    }
    Outputs(out)
}
