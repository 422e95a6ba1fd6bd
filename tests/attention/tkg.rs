//! `attention_tkg` numerics: the emulated DSL kernel (through the typed
//! `TkgConfig` API) against the independent float64 decode reference
//! (`nki_attention::reference_tkg`) over the library's shape ranges — one token
//! and one head up to the library test matrix's 24576-position cache streamed in
//! three flash-attention tiles, GQA ratios 1 to 32, speculative decoding, both `k_prior` layouts, sinks,
//! masks with holes, extra cache batches — in both precision modes; and the
//! library's features at its test configurations: fused RoPE (float64 rotation
//! in `reference_tkg::rope`), masks from positions with sliding windows
//! (`reference_tkg::position_mask`), the in-SBUF tensor layouts, one pass
//! without flash-attention tiles.
//!
//! Tolerances: `Precision::Fp32` must hold `max|a-b| <= 1e-5 max|ref| + 1e-6`;
//! `Precision::Hardware` the library test's `1e-5 + 2e-2 max|ref|` (inputs
//! rounded to their dtype before the reference).

use crate::common::tkg::{config, data, reference, shape, tensors};
use crate::common::tkg_features::{Blocks, Case, Features, as_block_cache, case};
use crate::common::{FP32_ATOL, FP32_RTOL, assert_close};
use nki::attention::reference_tkg::Shape;
use nki::{Dtype, Launch, Precision};

const HW_RTOL: f64 = 2e-2;
const HW_ATOL: f64 = 1e-5;

/// Runs one case in both precision modes (bf16 data in hardware mode) and LNC 2.
fn check(name: &str, s: Shape, tp_k_prior: bool, sink: bool, holes: bool) {
    for (precision, dtype, atol, rtol) in
        [(Precision::Fp32, Dtype::F32, FP32_ATOL, FP32_RTOL), (Precision::Hardware, Dtype::Bf16, HW_ATOL, HW_RTOL)]
    {
        let x = data(name, s, sink, holes, dtype);
        let t = tensors(&x, tp_k_prior, dtype);
        let (out, _) =
            config(s, tp_k_prior, sink).launch(&Launch::new().lnc(2).precision(precision), &t.inputs()).expect("attention_tkg runs");
        assert_eq!(out.shape(), &[s.bs, s.q_head, s.d, s.s_active]);
        assert_eq!(out.dtype(), dtype, "the output has q's dtype");
        assert_close(&format!("{name} {precision:?}"), &out.to_f32_vec(), &reference(&x, tp_k_prior), atol, rtol);
    }
}

#[test]
fn smallest_one_token_one_head_one_tile() {
    check("smallest", shape(1, 1, 1, 128, 128, 16), false, false, false);
}

#[test]
fn typical_decode_gqa_8_and_both_k_prior_layouts() {
    let s = shape(4, 8, 1, 2048, 4096, 128);
    check("typical", s, false, false, false);
    check("typical tp_k_prior", s, true, false, true);
}

#[test]
fn speculative_tokens_sinks_holes_and_spare_cache_batches() {
    check("speculative", shape(3, 4, 4, 1024, 1536, 64), false, true, true);
    check("spare cache batch", Shape { cache_bs: 3, ..shape(2, 2, 3, 640, 640, 32) }, true, true, false);
}

#[test]
fn gqa_ratios_from_1_to_32() {
    for (q_head, s_active) in [(1, 2), (4, 1), (16, 2), (32, 4)] {
        check(&format!("gqa {q_head}"), shape(2, q_head, s_active, 512, 512, 64), false, q_head == 16, q_head == 4);
    }
}

#[test]
fn largest_cache_streams_two_flash_attention_tiles() {
    // 16384 positions: two 8192-key tiles with the running max and sum between them.
    check("largest", shape(2, 8, 2, 16384, 16384, 128), true, true, true);
}

#[test]
fn configurations_of_the_library_test_matrix() {
    // AttnTKGConfig(bs, q_head, s_active, curr_sprior, full_sprior, d_head) rows of
    // the library's tests (without fused RoPE): a ragged last tile of 512 keys,
    // d 64 over two full tiles, and the largest cache, three tiles of 8192.
    check("library 4,2,7,8704", shape(4, 2, 7, 8704, 10240, 128), true, false, false);
    check("library 4,3,7,16384 d64", shape(4, 3, 7, 16384, 16384, 64), true, true, false);
    check("library 4,1,5,24576", shape(4, 1, 5, 24576, 24576, 128), false, false, true);
}

/// Runs a case of the library's features in both precision modes on LNC 2 and
/// checks `out` and `k_out`. The RoPE angles are formed and range-reduced in
/// float32, so both bounds grow by `8·2⁻²⁴·max_angle` relative.
fn check_features(name: &str, s: Shape, f: Features) {
    check_cache(name, s, f, None);
}

/// [`check_features`] with the cache as a block cache when `blocks` says so.
fn check_cache(name: &str, s: Shape, f: Features, blocks: Option<Blocks>) {
    for (precision, dtype, atol, rtol) in
        [(Precision::Fp32, Dtype::F32, FP32_ATOL, FP32_RTOL), (Precision::Hardware, Dtype::Bf16, HW_ATOL, HW_RTOL)]
    {
        let c = case(name, s, f, dtype);
        let c = match blocks {
            Some(b) => as_block_cache(c, b),
            None => c,
        };
        let t = c.tensors();
        let (out, k_out) = c.config().launch(&Launch::new().lnc(2).precision(precision), &Case::inputs(&t)).expect("attention_tkg runs");
        let rtol = rtol + 8.0 * 2f64.powi(-24) * c.max_angle;
        assert_close(&format!("{name} {precision:?} out"), &out.to_f32_vec(), &c.out, atol, rtol);
        assert_close(&format!("{name} {precision:?} k_out"), &k_out.to_f32_vec(), &c.k_out, atol, rtol);
        let (d, cols) = (s.d, s.bs * s.q_head * s.s_active);
        let want = if f.out_in_sb { vec![d, cols] } else { vec![s.bs, s.q_head, d, s.s_active] };
        assert_eq!(out.shape(), want.as_slice());
        let want = if f.k_out_in_sb { vec![d, s.bs * s.s_active] } else { vec![s.bs, 1, d, s.s_active] };
        assert_eq!(k_out.shape(), want.as_slice());
    }
}

#[test]
fn fused_rope_with_the_mask_from_positions() {
    // AttnTKGConfig(4, 2, 7, 512, 16384, 64) with use_pos_id and fuse_rope, q / k in HBM.
    let f = Features { rope: true, pos_id: true, qk_hbm: true, ..Features::default() };
    check_features("rope pid", shape(4, 2, 7, 512, 16384, 64), f);
    // (8, 8, 1, 1024, 10240, 64) with k_prior transposed and a sink.
    let f = Features { tp_k_prior: true, sink: true, ..f };
    check_features("rope pid tp sink", shape(8, 8, 1, 1024, 10240, 64), f);
}

#[test]
fn sliding_windows_from_start_positions_wrap_around_the_cache() {
    // (4, 1, 5, 1024, 10240, 128), a 128-position window: every token's window starts
    // inside the cache; with a window longer than the positions it wraps around.
    let f = Features { tp_k_prior: true, rope: true, pos_id: true, window: Some(128), qk_hbm: true, ..Features::default() };
    check_features("window", shape(4, 1, 5, 1024, 10240, 128), f);
    let f = Features { rope: false, qk_hbm: false, window: Some(900), sink: true, ..f };
    check_features("window wraps", shape(2, 4, 3, 1024, 1024, 64), f);
}

#[test]
fn in_sbuf_layouts_and_one_pass_without_flash_attention_tiles() {
    // (4, 1, 5, 10240, 10240, 128) with q, k, out and k_out in the in-SBUF layouts: two FA tiles.
    let f = Features { rope: true, out_in_sb: true, k_out_in_sb: true, ..Features::default() };
    check_features("rope sb layouts", shape(4, 1, 5, 10240, 10240, 128), f);
    // The same cache in one pass (enable_fa_s_prior_tiling=False), k_out the active keys as given.
    let f = Features { sink: true, no_fa_tiling: true, out_in_sb: true, ..Features::default() };
    check_features("one pass", shape(2, 2, 5, 10240, 10240, 64), f);
}

#[test]
fn block_caches_read_through_the_table_with_the_mask_in_fold_order() {
    // (4, 8, 7, 3072, 10240, 64) with 16-position blocks and a sink: 4·8·7 > 128 query
    // columns shard batches on LNC2, so one core holds all 3072 keys and the library
    // reduces the block length to gcd(16, 3072 / 128) = 8.
    let f = Features { tp_k_prior: true, sink: true, ..Features::default() };
    check_cache("block", shape(4, 8, 7, 3072, 10240, 64), f, Some(Blocks { block_len: 16, folds: (3072, 8) }));
    // (2, 1, 5, 1024) on LNC2: s_prior sharded (512 keys a core), reduced block length
    // gcd(32, 512 / 128) = 4; and a block cache with the mask from positions and a window.
    check_cache("block sharded", shape(2, 1, 5, 1024, 1024, 64), f, Some(Blocks { block_len: 32, folds: (512, 4) }));
    let f = Features { tp_k_prior: true, pos_id: true, window: Some(300), ..Features::default() };
    check_cache("block window", shape(2, 2, 3, 1024, 1024, 64), f, Some(Blocks { block_len: 16, folds: (0, 0) }));
}

#[test]
fn more_query_columns_than_partitions_run_a_group_of_heads_at_a_time() {
    // 48 heads of 3 tokens: 144 columns a batch, groups of 42 heads (126 columns) and 6.
    check("groups", shape(2, 48, 3, 1024, 1024, 64), false, true, true);
    // 256 heads of one token (the library's KVDP-16 rows gather 16 heads from each of
    // 16 ranks): two full groups, k_prior transposed.
    check("groups 256", shape(1, 256, 1, 512, 512, 64), true, false, false);
    // The mask from positions with a sliding window, the in-SBUF output layout and a
    // sink over groups of 18 heads of 7 tokens.
    let f = Features { pos_id: true, window: Some(200), sink: true, out_in_sb: true, ..Features::default() };
    check_features("groups window sb", shape(2, 20, 7, 512, 1024, 64), f);
    // A block cache read through the table, its mask in fold order, over two groups.
    let f = Features { tp_k_prior: true, sink: true, ..Features::default() };
    check_cache("groups block", shape(2, 40, 4, 1024, 1024, 64), f, Some(Blocks { block_len: 16, folds: (1024, 8) }));
}
