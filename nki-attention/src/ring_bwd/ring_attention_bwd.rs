//! `ring_attention_spmd_bwd`: the gradients of ring attention, written in the DSL.
//!
//! K and V stay on their rank; each rank's Q, dY, log-sum-exp and
//! `D = rowsum(dY ∘ O)` travel around the ring. At every step a rank recomputes
//! `P = exp(scale·QKᵀ − LSE)` for the visiting queries against its keys, adds
//! `Pᵀ·dY` to dV and `scale·dSᵀ·Q` to dK (with `dS = P ∘ (dY·Vᵀ − D)`), and adds
//! `scale·dS·K` to the visiting queries' dQ, which travels one hop behind its Q:
//! a reducing permute sums it on the way, so after the last step every rank holds
//! the complete dQ of its own queries. Tiles follow the library's backward: 128
//! query rows per tile in groups of 4, 512-key tiles (the last one holding the
//! rest of the rank's keys), head dims in equal tiles of at most 128.
//!
//! Segment ids mask the scores of every tile like the other masks (the
//! FLOAT32_MIN sentinel where the ids differ); the queries' ids travel with Q,
//! the keys' stay. A row whose forward saw no key (LSE `-inf`) gets P = 0, so
//! no gradient.

use crate::cte::attention_cte::scalar_column;
use crate::ring_fwd::ring_attention_fwd::{bias_block, fill_ring_positions, ring_positions_at};
use crate::ring_inputs::check_feature_inputs;
use crate::ring_masks::{key_bounds, row_positions, step_needed};
use nki::prelude::*;

/// Head dims split into equal tiles of at most 128: `(tile size, tile count)`.
#[nki_helper]
pub(crate) fn head_tiles(dh: i64) -> (i64, i64) {
    let n = (dh + 127) / 128;
    ((dh + n - 1) / n, n)
}

/// Loads `width` columns from `c0` of a `[dh, S]` HBM view as `[dts, dnt, len]`
/// (head-dim tile `t` at `[.., t, ..]`).
#[nki_helper]
fn load_head_tiles(src: Hbm, dts: i64, dnt: i64, c0: i64, width: i64, dtype: Dtype) -> Sbuf {
    let t = nl::ndarray([dts, dnt, width], dtype, buffer = nl::sbuf);
    for dt in 0..dnt {
        nisa::dma_copy(t[s![.., dt, ..]], src[s![dt * dts..(dt + 1) * dts, c0..c0 + width]]);
    }
    t
}

/// Transposes every `(dts, 128)` block of a `[dts, dnt, 128 n]` tile on the PE:
/// block `j` of head-dim tile `t` lands at `[.., t, j, ..]` of a `[128, dnt, n, dts]` tile.
#[nki_helper]
fn transpose_blocks(src: Sbuf, dts: i64, dnt: i64, n: i64) -> Sbuf {
    let out = nl::ndarray([128, dnt, n, dts], src.dtype(), buffer = nl::sbuf);
    for dt in 0..dnt {
        for j in 0..n {
            let flipped = nl::ndarray([128, dts], src.dtype(), buffer = nl::psum);
            nisa::nc_transpose(flipped, src[s![.., dt, 128 * j..128 * (j + 1)]]);
            nisa::tensor_copy(out[s![.., dt, j, ..]], flipped);
        }
    }
    out
}

/// `D = rowsum(dY ∘ O)` of the local queries of `(bid, hid)`, as `[128, S / 128]`
/// (row `128 g + p` at `[p, g]`): both are PE-transposed to rows and multiplied in fp32.
#[nki_helper]
fn rowsum_dy_o(o_ref: Hbm, dy_ref: Hbm, bid: i64, hid: i64, dts: i64, dnt: i64, sl: i64, mdt: Dtype) -> Sbuf {
    let kdt = o_ref.dtype();
    let o_tiles: Sbuf = load_head_tiles(o_ref[s![bid, hid, .., ..]], dts, dnt, 0, sl, kdt);
    let dy_tiles: Sbuf = load_head_tiles(dy_ref[s![bid, hid, .., ..]], dts, dnt, 0, sl, kdt);
    let dy_rows: Sbuf = transpose_blocks(dy_tiles, dts, dnt, sl / 128);
    let dos = nl::ndarray([128, sl / 128], mdt, buffer = nl::sbuf);
    for g in 0..sl / 128 {
        let partial = nl::ndarray([128, dnt], nl::float32, buffer = nl::sbuf);
        for dt in 0..dnt {
            let o_rows = nl::ndarray([128, dts], kdt, buffer = nl::psum);
            nisa::nc_transpose(o_rows, o_tiles[s![.., dt, 128 * g..128 * (g + 1)]]);
            let prod = nl::ndarray([128, dts], nl::float32, buffer = nl::sbuf);
            nisa::tensor_tensor(prod, dy_rows[s![.., dt, g, ..]], o_rows, nl::multiply);
            nisa::tensor_reduce(partial[s![.., dt..dt + 1]], nl::add, prod, 1);
        }
        nisa::tensor_reduce(dos[s![.., g..g + 1]], nl::add, partial, 1);
    }
    dos
}

/// One key tile (512 keys, or the rest) against the query tiles `first..cg` of a group of up to 4:
/// recomputes P, forms dS, and accumulates dQ (into `dq_grp`), dK and dV.
#[nki_helper]
fn bwd_tile(
    q_l: Sbuf,
    dy_l: Sbuf,
    tq: Sbuf,
    tdy: Sbuf,
    k_ld: Sbuf,
    v_ld: Sbuf,
    dk_r: Sbuf,
    dv_r: Sbuf,
    dq_grp: Sbuf,
    neg_lse: Sbuf,
    dos: Sbuf,
    bounds: Option<Sbuf>,
    lower: Option<Sbuf>,
    qg: i64,
    cg: i64,
    k0: i64,
    kts: i64,
    dts: i64,
    dnt: i64,
    scale: f64,
    causal: bool,
    first: i64,
    cap: f64,
    q_ids: Option<Sbuf>,
    k_ids: Option<Sbuf>,
    bias_blk: Option<Hbm>,
) {
    let kdt = k_ld.dtype();
    let nb = kts / 128;
    let biased = bias_blk.is_some();
    let p = nl::ndarray([128, cg, kts], kdt, buffer = nl::sbuf);
    let ds = nl::ndarray([128, cg, kts], kdt, buffer = nl::sbuf);
    let zero = nl::ndarray([128, 1], nl::float32, buffer = nl::sbuf);
    nisa::memset(zero, 0.0);
    for j in first..cg {
        let g = qg + j;
        // Scores, masked with the FLOAT32_MIN sentinel.
        let scores = nl::ndarray([128, kts], nl::float32, buffer = nl::psum);
        for dt in 0..dnt {
            nisa::nc_matmul(scores, q_l[s![.., dt, 128 * j..128 * (j + 1)]], k_ld[s![.., dt, k0..k0 + kts]]);
        }
        let masked = nl::ndarray([128, kts], nl::float32, buffer = nl::sbuf);
        // Soft cap: logits cap·tanh(scale·s / cap), capped before the masks (the exp then takes no scale).
        if cap > 0.0 {
            nisa::activation(masked, nl::tanh, scores, scale = scale / cap);
            nisa::tensor_scalar(masked, masked, nl::multiply, cap);
        }
        let capped = if cap > 0.0 { masked } else { scores };
        let cap_scale = if cap > 0.0 { 1.0 } else { scale };
        // Bias: scaled (and capped) logits plus the bias tile, before the masks (the exp then takes no scale).
        if let Some(bb) = bias_blk {
            let bt = nl::ndarray([128, kts], nl::float32, buffer = nl::sbuf);
            nisa::dma_copy(bt, bb[s![0, 128 * g..128 * (g + 1), k0..k0 + kts]]);
            nisa::scalar_tensor_tensor(masked, capped, nl::multiply, cap_scale, nl::add, bt);
        }
        let src = if biased { masked } else { capped };
        let exp_scale = if biased { 1.0 } else { cap_scale };
        if let Some(ub) = bounds {
            if let Some(lb) = lower {
                nisa::range_select(
                    masked,
                    src,
                    nl::greater_equal,
                    nl::less,
                    lb[s![.., g..g + 1]],
                    ub[s![.., g..g + 1]],
                    range_start = k0,
                    on_false_value = f32::MIN,
                );
            } else {
                nisa::range_select(
                    masked,
                    src,
                    nl::greater_equal,
                    nl::less_equal,
                    zero,
                    ub[s![.., g..g + 1]],
                    range_start = k0,
                    on_false_value = f32::MIN,
                );
            }
        } else {
            nisa::tensor_copy(masked, src);
            if causal && 128 * g < k0 + kts - 1 {
                nisa::affine_select(masked, [[-1, kts]], 1, masked, f32::MIN, cmp_op = nl::greater_equal, offset = 128 * g - k0);
            }
        }
        // Segment ids: the sentinel where the ids differ (s·eq + (eq - 1)·FLOAT32_MAX).
        if let Some(ki) = k_ids {
            if let Some(qi) = q_ids {
                let same = nl::ndarray([128, kts], nl::float32, buffer = nl::sbuf);
                nisa::tensor_scalar(same, ki[s![.., k0..k0 + kts]], nl::equal, qi[s![.., g..g + 1]]);
                nisa::tensor_tensor(masked, masked, same, nl::multiply);
                nisa::tensor_scalar(same, same, nl::subtract, 1.0, op1 = nl::multiply, operand1 = f32::MAX);
                nisa::tensor_tensor(masked, masked, same, nl::add);
            }
        }
        nisa::activation(p[s![.., j, ..]], nl::exp, masked, bias = neg_lse[s![.., g..g + 1]], scale = exp_scale);
        // dS = P ∘ (dY·Vᵀ − D).
        let dp = nl::ndarray([128, kts], nl::float32, buffer = nl::psum);
        for dt in 0..dnt {
            nisa::nc_matmul(dp, dy_l[s![.., dt, 128 * j..128 * (j + 1)]], v_ld[s![.., dt, k0..k0 + kts]]);
        }
        nisa::scalar_tensor_tensor(ds[s![.., j, ..]], dp, nl::subtract, dos[s![.., g..g + 1]], nl::multiply, p[s![.., j, ..]]);
        if cap > 0.0 {
            // Through the cap: dS ∘ (1 - tanh²(scale·s / cap)).
            let slope = nl::ndarray([128, kts], nl::float32, buffer = nl::sbuf);
            nisa::activation(slope, nl::tanh, scores, scale = scale / cap);
            nisa::tensor_tensor(slope, slope, slope, nl::multiply);
            nisa::tensor_scalar(slope, slope, nl::multiply, -1.0, op1 = nl::add, operand1 = 1.0);
            nisa::tensor_tensor(ds[s![.., j, ..]], ds[s![.., j, ..]], slope, nl::multiply);
        }
    }

    // dQ += scale · dS·K, contracting over keys: Kᵀ and dSᵀ in 128-key blocks.
    let k_rows = nl::ndarray([128, dnt, nb, dts], kdt, buffer = nl::sbuf);
    for dt in 0..dnt {
        for kb in 0..nb {
            let flipped = nl::ndarray([128, dts], kdt, buffer = nl::psum);
            nisa::nc_transpose(flipped, k_ld[s![.., dt, k0 + 128 * kb..k0 + 128 * (kb + 1)]]);
            nisa::tensor_copy(k_rows[s![.., dt, kb, ..]], flipped);
        }
    }
    let ds_t = nl::ndarray([128, nb, cg, 128], kdt, buffer = nl::sbuf);
    for kb in 0..nb {
        for j in first..cg {
            let flipped = nl::ndarray([128, 128], kdt, buffer = nl::psum);
            nisa::nc_transpose(flipped, ds[s![.., j, 128 * kb..128 * (kb + 1)]]);
            nisa::tensor_copy(ds_t[s![.., kb, j, ..]], flipped);
        }
    }
    // Only the computed tiles' columns of the dQ partial: the first matmul into a
    // column overwrites it and the later ones add. Zeroing the other columns with a
    // memset instead (the library's way) would make the matmuls accumulate onto
    // memset values, undefined behaviour on trn1/trn2.
    let (c0, c1) = (128 * first, 128 * cg);
    for dt in 0..dnt {
        let dq_ps = nl::ndarray([dts, 128 * cg], nl::float32, buffer = nl::psum);
        for kb in 0..nb {
            for j in first..cg {
                nisa::nc_matmul(dq_ps[s![.., 128 * j..128 * (j + 1)]], k_rows[s![.., dt, kb, ..]], ds_t[s![.., kb, j, ..]]);
            }
        }
        nisa::scalar_tensor_tensor(
            dq_grp[s![.., dt, c0..c1]],
            dq_ps[s![.., c0..c1]],
            nl::multiply,
            scale,
            nl::add,
            dq_grp[s![.., dt, c0..c1]],
        );
    }

    // dV += Pᵀ·dY and dK += scale · dSᵀ·Q, contracting over the group's queries.
    for dt in 0..dnt {
        let dv_ps = nl::ndarray([dts, kts], nl::float32, buffer = nl::psum);
        let dk_ps = nl::ndarray([dts, kts], nl::float32, buffer = nl::psum);
        for j in first..cg {
            nisa::nc_matmul(dv_ps, tdy[s![.., dt, j, ..]], p[s![.., j, ..]]);
            nisa::nc_matmul(dk_ps, tq[s![.., dt, j, ..]], ds[s![.., j, ..]]);
        }
        nisa::tensor_tensor(dv_r[s![.., dt, k0..k0 + kts]], dv_r[s![.., dt, k0..k0 + kts]], dv_ps, nl::add);
        nisa::scalar_tensor_tensor(dk_r[s![.., dt, k0..k0 + kts]], dk_ps, nl::multiply, scale, nl::add, dk_r[s![.., dt, k0..k0 + kts]]);
    }
}

/// One ring step for one `(b, h)`: the queries in `q_buf` / `dy_buf` (`[dh, S]`)
/// against the local K/V, dK/dV accumulated in place and this step's dQ written
/// to `dq_out` (`[dh, S]`, fp32). `bounds` is the range-select upper bound per
/// query row (inclusive, or exclusive with a `lower` bound: windows, chunks,
/// zigzag); without it causal masking is static. `q_ids` (`[128, S / 128]`) and
/// `k_ids` (`[128, S]`, every partition alike) are the segment ids, if any;
/// `bias_blk` (`[1, S, S]`) the bias of the visiting queries against the local keys.
#[nki_helper]
fn compute_step(
    q_buf: Hbm,
    dy_buf: Hbm,
    neg_lse: Sbuf,
    dos: Sbuf,
    dq_out: Hbm,
    k_ld: Sbuf,
    v_ld: Sbuf,
    dk_r: Sbuf,
    dv_r: Sbuf,
    bounds: Option<Sbuf>,
    lower: Option<Sbuf>,
    causal: bool,
    skip: bool,
    scale: f64,
    sl: i64,
    dts: i64,
    dnt: i64,
    mdt: Dtype,
    cap: f64,
    q_ids: Option<Sbuf>,
    k_ids: Option<Sbuf>,
    bias_blk: Option<Hbm>,
) {
    let kdt = k_ld.dtype();
    let qnt = sl / 128;
    // Keys in tiles of 512 (as the library tiles them, min(512, S)), the last one
    // holding the rest: any multiple of 128 tokens per rank tiles.
    let key_tile = 512;
    for qg in (0..qnt).step_by(4) {
        let cg = (qnt - qg).min(4);
        let q_l: Sbuf = load_head_tiles(q_buf, dts, dnt, 128 * qg, 128 * cg, kdt);
        let dy_l: Sbuf = load_head_tiles(dy_buf, dts, dnt, 128 * qg, 128 * cg, kdt);
        let tq: Sbuf = transpose_blocks(q_l, dts, dnt, cg);
        let tdy: Sbuf = transpose_blocks(dy_l, dts, dnt, cg);
        let dq_grp = nl::ndarray([dts, dnt, 128 * cg], mdt, buffer = nl::sbuf);
        nisa::memset(dq_grp, 0.0);
        for kt in 0..(sl + key_tile - 1) / key_tile {
            let k0 = kt * key_tile;
            let kts = (sl - k0).min(key_tile);
            // Under the local causal pattern (`skip`) query tile `g` sees keys up to
            // 128 (g + 1) - 1, so the group's tiles `qg + first..qg + cg` see some of
            // the key tile at k0 and the ones before them none.
            let first = if skip { (k0 / 128 - qg).max(0).min(cg) } else { 0 };
            if first < cg {
                bwd_tile(
                    q_l, dy_l, tq, tdy, k_ld, v_ld, dk_r, dv_r, dq_grp, neg_lse, dos, bounds, lower, qg, cg, k0, kts, dts, dnt, scale,
                    causal, first, cap, q_ids, k_ids, bias_blk,
                );
            }
        }
        for dt in 0..dnt {
            nisa::dma_copy(dq_out[s![dt * dts..(dt + 1) * dts, 128 * qg..128 * (qg + cg)]], dq_grp[s![.., dt, ..]]);
        }
    }
}

/// The range-select bounds of ring step `step` per query row (`[128, S / 128]`):
/// `(lower, exclusive upper)` from the masks with windows, chunks or zigzag
/// blocks (`bounded`); else, with the causal mask after step 0, `(None, inclusive
/// upper)` in local key coordinates, keeping `0 <= k <= row + offset` (contiguous
/// offset `(q_pos - k_pos)·S`, striped `-min(max(k_pos - q_pos, 0), 1)`); else none.
#[nki_helper]
fn step_bounds(
    positions: Hbm,
    groups: Groups,
    step: i64,
    bounded: bool,
    causal: bool,
    striped: bool,
    zigzag: bool,
    nw: i64,
    sl: i64,
    left: i64,
    right: i64,
    chunk: i64,
) -> (Option<Sbuf>, Option<Sbuf>) {
    let qnt = sl / 128;
    if bounded {
        let (my_pos, q_pos): (Sbuf, Sbuf) = ring_positions_at(positions, groups, step);
        let rows: Sbuf = row_positions(q_pos, striped, zigzag, nw, sl);
        let (lower, upper): (Sbuf, Sbuf) = key_bounds(rows, my_pos, striped, zigzag, nw, sl, causal, left, right, chunk);
        return (Some(lower), Some(upper));
    }
    if causal && step > 0 {
        let (my_pos, q_pos): (Sbuf, Sbuf) = ring_positions_at(positions, groups, step);
        let ub = nl::ndarray([128, qnt], nl::float32, buffer = nl::sbuf);
        nisa::iota(ub, [[128, qnt]], channel_multiplier = 1);
        let off = nl::ndarray([128, 1], nl::float32, buffer = nl::sbuf);
        if striped {
            nisa::tensor_tensor(off, my_pos, q_pos, nl::subtract);
            nisa::tensor_scalar(off, off, nl::maximum, 0.0, op1 = nl::minimum, operand1 = 1.0);
            nisa::tensor_scalar(ub, ub, nl::subtract, off);
        } else {
            nisa::tensor_tensor(off, q_pos, my_pos, nl::subtract);
            nisa::tensor_scalar(off, off, nl::multiply, sl as f64);
            nisa::tensor_scalar(ub, ub, nl::add, off);
        }
        return (None, Some(ub));
    }
    (None, None)
}

/// `[128, S / 128]` negated log-sum-exps of a `[128, S / 128]` HBM view. With
/// segment ids a row that saw no key has LSE `-inf`: its `-LSE` becomes
/// FLOAT32_MIN, so its P (every score masked) is 0 instead of `exp(inf)`.
#[nki_helper]
fn load_neg_lse(src: Hbm, mdt: Dtype, segmented: bool) -> Sbuf {
    let t = nl::ndarray(src.shape(), mdt, buffer = nl::sbuf);
    nisa::dma_copy(t, src);
    nisa::tensor_scalar(t, t, nl::multiply, -1.0);
    if segmented {
        // t·m + (m - 1)·FLOAT32_MAX with m = [t finite], after clamping t to be finite.
        let m = nl::ndarray(src.shape(), nl::float32, buffer = nl::sbuf);
        nisa::tensor_scalar(t, t, nl::minimum, f32::MAX);
        nisa::tensor_scalar(m, t, nl::less, 1.0e38);
        nisa::tensor_tensor(t, t, m, nl::multiply);
        nisa::tensor_scalar(m, m, nl::subtract, 1.0, op1 = nl::multiply, operand1 = f32::MAX);
        nisa::tensor_tensor(t, t, m, nl::add);
    }
    t
}

/// Stages `-LSE` and `D` of query head `hid` in slot `qh` of `stats`
/// (`[group, 2, 128, S / 128]`) and, with sinks, writes this rank's share of
/// the head's sink gradient.
#[nki_helper]
fn stage_row_stats(
    lse_ref: Hbm,
    o_ref: Hbm,
    dy_ref: Hbm,
    stats: Hbm,
    sinks: Option<Hbm>,
    dsink_part: Hbm,
    bid: i64,
    hid: i64,
    qh: i64,
    dts: i64,
    dnt: i64,
    mdt: Dtype,
    segmented: bool,
) {
    let sl = o_ref.shape()[3];
    let neg_lse: Sbuf = load_neg_lse(lse_ref[s![bid, hid, .., ..]], mdt, segmented);
    let dos: Sbuf = rowsum_dy_o(o_ref, dy_ref, bid, hid, dts, dnt, sl, mdt);
    nisa::dma_copy(stats[s![qh, 0, .., ..]], neg_lse);
    nisa::dma_copy(stats[s![qh, 1, .., ..]], dos);
    if let Some(sk) = sinks {
        sink_grad(sk, neg_lse, dos, dsink_part, bid, hid, sl / 128);
    }
}

/// This rank's share of the sink gradient of query head `hid` of batch `bid`,
/// `-Σ_i exp(sink - LSE_i)·D_i` over the local rows, written to
/// `dsink_part[bid, hid]` (`neg_lse` and `dos` are the local `-LSE` and `D`).
#[nki_helper]
fn sink_grad(sinks: Hbm, neg_lse: Sbuf, dos: Sbuf, dsink_part: Hbm, bid: i64, hid: i64, qnt: i64) {
    let n = dsink_part.shape()[1];
    let sink: Sbuf = scalar_column(sinks.ap([[1, 1], [1, 1]], offset = hid));
    let weighted = nl::ndarray([128, qnt], nl::float32, buffer = nl::sbuf);
    nisa::activation(weighted, nl::exp, neg_lse, bias = sink);
    nisa::tensor_tensor(weighted, weighted, dos, nl::multiply);
    let rows = nl::ndarray([128, 1], nl::float32, buffer = nl::sbuf);
    nisa::tensor_reduce(rows, nl::add, weighted, 1);
    let minus_one = nl::ndarray([128, 1], nl::float32, buffer = nl::sbuf);
    nisa::memset(minus_one, -1.0);
    let total = nl::ndarray([1, 1], nl::float32, buffer = nl::psum);
    nisa::nc_matmul(total, rows, minus_one);
    let out = nl::ndarray([1, 1], nl::float32, buffer = nl::sbuf);
    nisa::tensor_copy(out, total);
    nisa::dma_copy(dsink_part.ap([[1, 1], [1, 1]], offset = bid * n + hid), out);
}

/// Sends Q, dY, LSE and D of every LNC slot to the ring successor, and the
/// queries' segment ids and bias rows when there are any.
#[nki_helper]
fn permute_all(
    sq: Hbm,
    rq: Hbm,
    sdy: Hbm,
    rdy: Hbm,
    slse: Hbm,
    rlse: Hbm,
    sdos: Hbm,
    rdos: Hbm,
    sids: Option<Hbm>,
    rids: Option<Hbm>,
    sbias: Option<Hbm>,
    rbias: Option<Hbm>,
    groups: Groups,
) {
    let rg = ncc::ReplicaGroup(groups);
    ncc::collective_permute_implicit([[sq]], [[rq]], rg);
    ncc::collective_permute_implicit([[sdy]], [[rdy]], rg);
    ncc::collective_permute_implicit([[slse]], [[rlse]], rg);
    ncc::collective_permute_implicit([[sdos]], [[rdos]], rg);
    if let Some(si) = sids {
        if let Some(ri) = rids {
            ncc::collective_permute_implicit([[si]], [[ri]], rg);
        }
    }
    if let Some(sb) = sbias {
        if let Some(rb) = rbias {
            ncc::collective_permute_implicit([[sb]], [[rb]], rg);
        }
    }
}

/// The whole ring for KV head `kvh` of batch `bid`: K and V loaded once, then one
/// ring per query head of its group (`group` heads from `kvh·group`), each adding
/// to the same dK/dV. Program `slot` uses slot `slot` of every ring buffer
/// (`[lnc, ...]`), and every program issues the same collectives.
#[nki_helper]
fn ring_bwd_item(
    q_ref: Hbm,
    k_ref: Hbm,
    v_ref: Hbm,
    o_ref: Hbm,
    dy_ref: Hbm,
    lse_ref: Hbm,
    out_dq: Hbm,
    out_dk: Hbm,
    out_dv: Hbm,
    sq: Hbm,
    rq: Hbm,
    sdy: Hbm,
    rdy: Hbm,
    slse: Hbm,
    rlse: Hbm,
    sdos: Hbm,
    rdos: Hbm,
    sdq: Hbm,
    rdq: Hbm,
    dq_scratch: Hbm,
    positions: Hbm,
    sinks: Option<Hbm>,
    dsink_part: Hbm,
    q_seg: Option<Hbm>,
    kv_seg: Option<Hbm>,
    sids: Option<Hbm>,
    rids: Option<Hbm>,
    bias: Option<Hbm>,
    sbias: Option<Hbm>,
    rbias: Option<Hbm>,
    bid: i64,
    kvh: i64,
    group: i64,
    slot: i64,
    lnc: i64,
    groups: Groups,
    nw: i64,
    causal: bool,
    striped: bool,
    zigzag: bool,
    left: i64,
    right: i64,
    chunk: i64,
    cap: f64,
    mdt: Dtype,
    scale: f64,
) {
    // Windows, chunks and zigzag blocks mask through per-row key bounds.
    let bounded = zigzag || left >= 0 || right >= 0 || chunk > 0;
    let segmented = q_seg.is_some();
    let dh = q_ref.shape()[2];
    let sl = q_ref.shape()[3];
    let kdt = q_ref.dtype();
    let (dts, dnt): (i64, i64) = head_tiles(dh);
    let qnt = sl / 128;
    let rg = ncc::ReplicaGroup(groups);

    // -LSE and D of every query head of the group, staged in HBM before K and V
    // take their SBUF (D's transposes need the room).
    let stats = nl::ndarray([group, 2, 128, qnt], mdt, buffer = nl::private_hbm);
    for qh in 0..group {
        stage_row_stats(lse_ref, o_ref, dy_ref, stats, sinks, dsink_part, bid, kvh * group + qh, qh, dts, dnt, mdt, segmented);
    }
    // Segment ids in fp32: the local keys' on every partition, the local
    // queries' as `[128, S / 128]` rows (they travel with Q).
    let k_ids = if segmented { Some(nl::ndarray([128, sl], nl::float32, buffer = nl::sbuf)) } else { None };
    let own_q_ids = if segmented { Some(nl::ndarray([128, qnt], nl::float32, buffer = nl::sbuf)) } else { None };
    if let Some(ks) = kv_seg {
        if let Some(ki) = k_ids {
            nisa::dma_copy(ki, ks.ap([[0, 128], [1, sl]], offset = bid * sl));
        }
    }
    if let Some(qs) = q_seg {
        if let Some(qi) = own_q_ids {
            nisa::dma_copy(qi, qs.ap([[1, 128], [128, qnt]], offset = bid * sl));
        }
    }
    let k_ld: Sbuf = load_head_tiles(k_ref[s![bid, kvh, .., ..]], dts, dnt, 0, sl, kdt);
    let v_ld: Sbuf = load_head_tiles(v_ref[s![bid, kvh, .., ..]], dts, dnt, 0, sl, kdt);
    let dk_r = nl::ndarray([dts, dnt, sl], mdt, buffer = nl::sbuf);
    let dv_r = nl::ndarray([dts, dnt, sl], mdt, buffer = nl::sbuf);
    nisa::memset(dk_r, 0.0);
    nisa::memset(dv_r, 0.0);
    let neg_lse = nl::ndarray([128, qnt], mdt, buffer = nl::sbuf);
    let dos = nl::ndarray([128, qnt], mdt, buffer = nl::sbuf);

    for qh in 0..group {
        let hid = kvh * group + qh;
        nisa::dma_copy(neg_lse, stats[s![qh, 0, .., ..]]);
        nisa::dma_copy(dos, stats[s![qh, 1, .., ..]]);

        // The local queries start around the ring; step 0 runs on them meanwhile.
        nisa::dma_copy(sq[s![slot, .., ..]], q_ref[s![bid, hid, .., ..]]);
        nisa::dma_copy(sdy[s![slot, .., ..]], dy_ref[s![bid, hid, .., ..]]);
        nisa::dma_copy(slse[s![slot, .., ..]], lse_ref[s![bid, hid, .., ..]]);
        nisa::dma_copy(sdos[s![slot, .., ..]], dos);
        if let Some(si) = sids {
            if let Some(qi) = own_q_ids {
                nisa::dma_copy(si[s![slot, .., ..]], qi);
            }
        }
        if let Some(bi) = bias {
            if let Some(sb) = sbias {
                nisa::dma_copy(sb[s![slot, .., ..]], bi[s![bid, hid, .., ..]]);
            }
        }
        if lnc > 1 {
            nisa::core_barrier(sq, [0, 1]);
            nisa::core_barrier(sdy, [0, 1]);
            nisa::core_barrier(slse, [0, 1]);
            nisa::core_barrier(sdos, [0, 1]);
            if let Some(si) = sids {
                nisa::core_barrier(si, [0, 1]);
            }
            if let Some(sb) = sbias {
                nisa::core_barrier(sb, [0, 1]);
            }
        }
        if nw > 1 {
            permute_all(sq, rq, sdy, rdy, slse, rlse, sdos, rdos, sids, rids, sbias, rbias, groups);
        }
        let own_bias: Option<Hbm> = own_key_columns(sbias, slot, positions, groups, striped, zigzag, nw);
        let dq_slot = dq_scratch[s![slot, .., ..]];
        let (lower0, bounds0): (Option<Sbuf>, Option<Sbuf>) =
            step_bounds(positions, groups, 0, bounded, causal, striped, zigzag, nw, sl, left, right, chunk);
        compute_step(
            sq[s![slot, .., ..]],
            sdy[s![slot, .., ..]],
            neg_lse,
            dos,
            dq_slot,
            k_ld,
            v_ld,
            dk_r,
            dv_r,
            bounds0,
            lower0,
            causal && !bounded,
            causal && !bounded,
            scale,
            sl,
            dts,
            dnt,
            mdt,
            cap,
            own_q_ids,
            k_ids,
            own_bias,
        );
        nisa::dma_copy(sdq[s![slot, .., ..]], dq_slot);
        if lnc > 1 {
            nisa::core_barrier(sdq, [0, 1]);
        }
        ncc::collective_permute_implicit([[sdq]], [[rdq]], rg);

        for step in nl::sequential_range(1, nw) {
            // Odd steps find the visiting data in the r* buffers, even steps in the s* ones.
            let odd = step % 2 == 1;
            let cur_q = if odd { rq } else { sq };
            let nxt_q = if odd { sq } else { rq };
            let cur_dy = if odd { rdy } else { sdy };
            let nxt_dy = if odd { sdy } else { rdy };
            let cur_lse = if odd { rlse } else { slse };
            let nxt_lse = if odd { slse } else { rlse };
            let cur_dos = if odd { rdos } else { sdos };
            let nxt_dos = if odd { sdos } else { rdos };
            let dq_in = if odd { rdq } else { sdq };
            let dq_fwd = if odd { sdq } else { rdq };
            let cur_ids = if odd { rids } else { sids };
            let nxt_ids = if odd { sids } else { rids };
            let cur_bias = if odd { rbias } else { sbias };
            let nxt_bias = if odd { sbias } else { rbias };
            let step_bias: Option<Hbm> = own_key_columns(cur_bias, slot, positions, groups, striped, zigzag, nw);

            let step_neg_lse: Sbuf = load_neg_lse(cur_lse[s![slot, .., ..]], mdt, segmented);
            let step_q_ids = if segmented { Some(nl::ndarray([128, qnt], nl::float32, buffer = nl::sbuf)) } else { None };
            if let Some(ci) = cur_ids {
                if let Some(qi) = step_q_ids {
                    nisa::dma_copy(qi, ci[s![slot, .., ..]]);
                }
            }
            let step_dos = nl::ndarray([128, qnt], mdt, buffer = nl::sbuf);
            nisa::dma_copy(step_dos, cur_dos[s![slot, .., ..]]);
            let (lower, bounds): (Option<Sbuf>, Option<Sbuf>) =
                step_bounds(positions, groups, step, bounded, causal, striped, zigzag, nw, sl, left, right, chunk);
            // The next step's data goes out before this step's compute.
            if step + 1 < nw {
                permute_all(cur_q, nxt_q, cur_dy, nxt_dy, cur_lse, nxt_lse, cur_dos, nxt_dos, cur_ids, nxt_ids, cur_bias, nxt_bias, groups);
            }
            // Step t shows position me - t's queries this rank's keys: the keys t
            // positions ahead of the queries, the forward's step W - t.
            let needed: bool = !bounded || step_needed(nw - step, striped, zigzag, nw, sl, causal, left, right, chunk);
            if needed {
                compute_step(
                    cur_q[s![slot, .., ..]],
                    cur_dy[s![slot, .., ..]],
                    step_neg_lse,
                    step_dos,
                    dq_slot,
                    k_ld,
                    v_ld,
                    dk_r,
                    dv_r,
                    bounds,
                    lower,
                    causal,
                    causal && striped && !bounded,
                    scale,
                    sl,
                    dts,
                    dnt,
                    mdt,
                    cap,
                    step_q_ids,
                    k_ids,
                    step_bias,
                );
                if lnc > 1 {
                    nisa::core_barrier(dq_scratch, [0, 1]);
                }
                // This rank's part of the visiting queries' dQ joins the partial sum on its way home.
                ncc::collective_permute_implicit_reduce([[dq_scratch]], [[dq_in]], [[dq_fwd]], rg, nl::add);
            } else {
                // No rank sees these keys: the partial dQ travels on unchanged.
                ncc::collective_permute_implicit([[dq_in]], [[dq_fwd]], rg);
            }
        }

        // After the last exchange the complete dQ of the local queries is back here.
        let dq_home = if nw % 2 == 0 { sdq } else { rdq };
        nisa::dma_copy(out_dq[s![bid, hid, .., ..]], dq_home[s![slot, .., ..]]);
    }

    for dt in 0..dnt {
        nisa::dma_copy(out_dk[s![bid, kvh, dt * dts..(dt + 1) * dts, ..]], dk_r[s![.., dt, ..]]);
        nisa::dma_copy(out_dv[s![bid, kvh, dt * dts..(dt + 1) * dts, ..]], dv_r[s![.., dt, ..]]);
    }
}

/// The bias of the queries in slot `slot` of `rows` (`[lnc, S, W·S]`, their
/// rows against every key at its global position) against this rank's keys,
/// `[1, S, S]` (None without a bias).
#[nki_helper]
fn own_key_columns(rows: Option<Hbm>, slot: i64, positions: Hbm, groups: Groups, striped: bool, zigzag: bool, nw: i64) -> Option<Hbm> {
    if let Some(r) = rows {
        let [lnc, sl, total] = r.shape();
        let (mine, _same): (Sbuf, Sbuf) = ring_positions_at(positions, groups, 0);
        let slots = r.reshape([lnc, 1, sl, total]);
        return Some(bias_block(slots, slot, 1, mine, striped, zigzag, nw));
    }
    None
}

/// `dsinks [N]`: the per-(batch, head) shares in `parts` (`[B, N]`) summed over the
/// batch (after both LNC programs wrote theirs).
#[nki_helper]
fn sum_sink_parts(parts: Hbm, lnc: i64, lnc_id: i64) -> Hbm {
    let [b, n] = parts.shape();
    if lnc > 1 {
        nisa::core_barrier(parts, [0, 1]);
    }
    let out = nl::ndarray([n], nl::float32, buffer = nl::shared_hbm);
    let all = nl::ndarray([1, b * n], nl::float32, buffer = nl::sbuf);
    nisa::dma_copy(all, parts.reshape([1, b * n]));
    let acc = nl::ndarray([1, n], nl::float32, buffer = nl::sbuf);
    nisa::tensor_copy(acc, all[s![.., 0..n]]);
    for bi in 1..b {
        nisa::tensor_tensor(acc, acc, all[s![.., bi * n..(bi + 1) * n]], nl::add);
    }
    if lnc_id == 0 {
        nisa::dma_copy(out.reshape([1, n]), acc);
    }
    out
}

/// Ring attention backward, a drop-in for the NKI library's
/// `ring_attention_spmd_bwd` (2.30): the gradients dQ, dK and dV of
/// `ring_attention_spmd_fwd` over a ring of `num_workers` ranks.
///
/// Every input is `[B, N, D, S]` (head-dim major, `S` tokens per rank) except
/// `lse_ref`, `[B, N, 128, S / 128]` (the forward's log-sum-exp of the scaled
/// scores, row `128 g + p` at `[.., p, g]`); `o_ref` is the normalised forward
/// output. Q is unscaled: `softmax_scale` (default `1/sqrt(D)`) is applied
/// inside. Returns fp32 dQ, dK, dV, each `[B, N, D, S]`. With `mixed_precision`
/// the accumulators, `-LSE` and `D` are fp32 (else the input dtype). `lnc_size`
/// must equal the launch's LNC degree; `(b, h)` pairs are dealt to the programs
/// round by round, and a program without a pair in the last round repeats pair
/// `(0, 0)` into throwaway outputs so the collectives stay matched. Keyword
/// arguments past the library's are the forward's features; `q_segment_ids` /
/// `kv_segment_ids` are int32 `[B, S]` (both or neither); `bias` is float32
/// `[B, N, S, num_workers·S]`, the forward's (its rows travel with Q).
#[nki_kernel]
pub fn ring_attention_spmd_bwd(
    #[dtypes(float32, bfloat16, float16)] q_ref: Hbm,
    #[dtypes(float32, bfloat16, float16)] k_ref: Hbm,
    #[dtypes(float32, bfloat16, float16)] v_ref: Hbm,
    #[dtypes(float32, bfloat16, float16)] o_ref: Hbm,
    #[dtypes(float32, bfloat16, float16)] dy_ref: Hbm,
    #[dtypes(float32, bfloat16, float16)] lse_ref: Hbm,
    #[default(false)] use_causal_mask: bool,
    #[default(true)] mixed_precision: bool,
    softmax_scale: Option<f64>,
    #[default(1)]
    #[range(>= 1)]
    num_workers: i64,
    #[default(1)]
    #[range(>= 1, <= 2)]
    lnc_size: i64,
    replica_groups: Option<Groups>,
    #[default(false)] striped_attention: bool,
    #[dtypes(float32)] sinks: Option<Hbm>,
    #[default(false)] zigzag_attention: bool,
    #[range(>= 0)] window_left: Option<i64>,
    #[range(>= 0)] window_right: Option<i64>,
    #[range(>= 1)] chunk_size: Option<i64>,
    #[range(> 0.0, <= 3.4028234663852886e38)] soft_cap: Option<f64>,
    #[dtypes(int32)] q_segment_ids: Option<Hbm>,
    #[dtypes(int32)] kv_segment_ids: Option<Hbm>,
    #[dtypes(float32)] bias: Option<Hbm>,
) -> Outputs {
    assert!(!striped_attention || use_causal_mask, "striped_attention requires use_causal_mask");
    assert!(!zigzag_attention || use_causal_mask, "zigzag_attention requires use_causal_mask");
    assert!(!(zigzag_attention && striped_attention), "striped_attention and zigzag_attention exclude each other");
    let left = window_left.unwrap_or(-1);
    let right = window_right.unwrap_or(-1);
    let chunk = chunk_size.unwrap_or(0);
    let masked = use_causal_mask || zigzag_attention || left >= 0 || right >= 0 || chunk > 0;
    let q_shape = q_ref.shape();
    assert!(q_ref.ndim() == 4, "q_ref must be [B, N, D, S], got {q_shape}");
    let [b, n, dh, sl] = q_shape;
    assert!(sl % 128 == 0, "seqlen must be divisible by 128, got {sl}");
    // The library checks none of the other inputs; mismatches would read out of bounds.
    let k_shape = k_ref.shape();
    let v_shape = v_ref.shape();
    let o_shape = o_ref.shape();
    let dy_shape = dy_ref.shape();
    let n_kv = k_shape[1];
    assert!(
        k_ref.ndim() == 4 && k_shape[0] == b && n_kv >= 1 && n % n_kv == 0 && k_shape[2] == dh && k_shape[3] == sl,
        "k_ref must be [B, N_kv, D, S] with N a multiple of N_kv (GQA), q_ref is {q_shape}, got {k_shape}"
    );
    assert!(v_shape == k_shape, "v_ref must have k_ref's shape {k_shape} ([B, N_kv, D, S]), got {v_shape}");
    assert!(o_shape == q_shape, "o_ref must have q_ref's shape {q_shape} ([B, N, D, S]), got {o_shape}");
    assert!(dy_shape == q_shape, "dy_ref must have q_ref's shape {q_shape} ([B, N, D, S]), got {dy_shape}");
    let lse_shape = lse_ref.shape();
    let n_grp = sl / 128;
    assert!(
        lse_ref.ndim() == 4 && lse_shape[0] == b && lse_shape[1] == n && lse_shape[2] == 128 && lse_shape[3] == n_grp,
        "lse_ref must be [B, N, 128, S / 128] = [{b}, {n}, 128, {n_grp}], got {lse_shape}"
    );
    let kdt = q_ref.dtype();
    let (kt, vt, ot, dyt) = (k_ref.dtype(), v_ref.dtype(), o_ref.dtype(), dy_ref.dtype());
    assert!(
        kt == kdt && vt == kdt && ot == kdt && dyt == kdt,
        "q_ref, k_ref, v_ref, o_ref and dy_ref must share one dtype, got {kdt}, {kt}, {vt}, {ot}, {dyt}"
    );
    let (dts, dnt): (i64, i64) = head_tiles(dh);
    assert!(dh % dts == 0, "Can not create tiles of equal size for given head dimension {dh}");
    let lnc_n = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
    let lnc_id = if nl::program_ndim() == 1 { nl::program_id(0) } else { 0 };
    assert!(lnc_size == lnc_n, "lnc_size is {lnc_size} but the kernel runs on {lnc_n} LNC program(s)");
    let groups = replica_groups.unwrap_or([]);
    for gi in 0..groups.len() {
        let size = groups[gi].len();
        assert!(size == num_workers, "replica group {gi} has {size} ranks but num_workers is {num_workers}");
    }

    let mdt = if mixed_precision { nl::float32 } else { kdt };
    let scale = softmax_scale.unwrap_or(1.0 / (dh as f64).powf(0.5));
    // RingBwdRule::ScaleNotFinite and RingBwdRule::CausalScale (crate::scale::MIN_MASKED_SCALE): masked scores are scaled in the exp.
    assert!(
        f32::MIN <= scale && scale <= f32::MAX && (!masked || scale >= 1e-30),
        "softmax_scale must be a finite float32, and at least 1e-30 with a mask (masked scores are FLOAT32_MIN * scale), got {scale}"
    );
    check_feature_inputs(sinks, q_segment_ids, kv_segment_ids, bias, b, n, sl, num_workers);
    let segmented = q_segment_ids.is_some();
    let biased = bias.is_some();
    let total = num_workers * sl;
    let out_dq = nl::ndarray(q_shape, nl::float32, buffer = nl::shared_hbm);
    let out_dk = nl::ndarray(k_shape, nl::float32, buffer = nl::shared_hbm);
    let out_dv = nl::ndarray(k_shape, nl::float32, buffer = nl::shared_hbm);
    // Each (batch, query head)'s share of the sink gradient, summed over the batch at the end.
    let dsink_part = nl::ndarray([b, n], nl::float32, buffer = nl::shared_hbm);

    // Ring buffers, one slot per LNC program.
    let sq = nl::ndarray([lnc_size, dh, sl], kdt, buffer = nl::shared_hbm);
    let rq = nl::ndarray([lnc_size, dh, sl], kdt, buffer = nl::shared_hbm);
    let sdy = nl::ndarray([lnc_size, dh, sl], kdt, buffer = nl::shared_hbm);
    let rdy = nl::ndarray([lnc_size, dh, sl], kdt, buffer = nl::shared_hbm);
    let slse = nl::ndarray([lnc_size, 128, sl / 128], nl::float32, buffer = nl::shared_hbm);
    let rlse = nl::ndarray([lnc_size, 128, sl / 128], nl::float32, buffer = nl::shared_hbm);
    let sdos = nl::ndarray([lnc_size, 128, sl / 128], nl::float32, buffer = nl::shared_hbm);
    let rdos = nl::ndarray([lnc_size, 128, sl / 128], nl::float32, buffer = nl::shared_hbm);
    let sdq = nl::ndarray([lnc_size, dh, sl], nl::float32, buffer = nl::shared_hbm);
    let rdq = nl::ndarray([lnc_size, dh, sl], nl::float32, buffer = nl::shared_hbm);
    let dq_scratch = nl::ndarray([lnc_size, dh, sl], nl::float32, buffer = nl::shared_hbm);
    let sids = if segmented { Some(nl::ndarray([lnc_size, 128, sl / 128], nl::float32, buffer = nl::shared_hbm)) } else { None };
    let rids = if segmented { Some(nl::ndarray([lnc_size, 128, sl / 128], nl::float32, buffer = nl::shared_hbm)) } else { None };
    // The bias rows travel with their queries.
    let sbias = if biased { Some(nl::ndarray([lnc_size, sl, total], nl::float32, buffer = nl::shared_hbm)) } else { None };
    let rbias = if biased { Some(nl::ndarray([lnc_size, sl, total], nl::float32, buffer = nl::shared_hbm)) } else { None };
    let n_rings = if groups.len() == 0 { 1 } else { groups.len() };
    let positions = nl::ndarray([1, n_rings * num_workers], nl::float32, buffer = nl::shared_hbm);
    if masked || biased {
        fill_ring_positions(positions, groups, num_workers);
    }

    let group = n / n_kv;
    let total = b * n_kv;
    let rounds = (total + lnc_size - 1) / lnc_size;
    for round in 0..rounds {
        let item = round * lnc_size + lnc_id;
        // A program without a pair in the last round repeats pair (0, 0) into
        // private scratch, so that its collectives still match its partner's.
        let spare = item >= total;
        let pair = if spare { 0 } else { item };
        let dq_out = if spare { nl::ndarray(q_shape, nl::float32, buffer = nl::private_hbm) } else { out_dq };
        let dk_out = if spare { nl::ndarray(k_shape, nl::float32, buffer = nl::private_hbm) } else { out_dk };
        let dv_out = if spare { nl::ndarray(k_shape, nl::float32, buffer = nl::private_hbm) } else { out_dv };
        let ds_out = if spare { nl::ndarray([b, n], nl::float32, buffer = nl::private_hbm) } else { dsink_part };
        ring_bwd_item(
            q_ref,
            k_ref,
            v_ref,
            o_ref,
            dy_ref,
            lse_ref,
            dq_out,
            dk_out,
            dv_out,
            sq,
            rq,
            sdy,
            rdy,
            slse,
            rlse,
            sdos,
            rdos,
            sdq,
            rdq,
            dq_scratch,
            positions,
            sinks,
            ds_out,
            q_segment_ids,
            kv_segment_ids,
            sids,
            rids,
            bias,
            sbias,
            rbias,
            pair / n_kv,
            pair % n_kv,
            group,
            lnc_id,
            lnc_size,
            groups,
            num_workers,
            use_causal_mask,
            striped_attention,
            zigzag_attention,
            left,
            right,
            chunk,
            soft_cap.unwrap_or(0.0),
            mdt,
            scale,
        );
    }
    if sinks.is_some() {
        return Outputs(out_dq, out_dk, out_dv, sum_sink_parts(dsink_part, lnc_size, lnc_id));
    }
    Outputs(out_dq, out_dk, out_dv)
}
