//! `gen_mask_tkg_hbm` against a float64 reference at every configuration of the
//! library's test (flat and block KV caches, sliding windows, active masks,
//! flash-attention tiling, LNC 1 and 2), in both precision modes; its refusals.
//!
//! The reference: the visibility of each key by the documented rules
//! (`reference_tkg::position_mask`), laid out as the library documents its K-cache
//! order — row `T·128 + p` holds key `p·N + T` of a flat cache (`N = s_prior /
//! 128`), key `F·L·128 + p·L + r` (`T = F·L + r`) of a block cache re-tiled to
//! block length `L` by the library's `resize_cache_block_len_for_attention_tkg_kernel`.
//! A mask is exact: every value must equal the reference's 0 or 1. The emitted
//! kernel under the NumPy executor (LNC 1 and 2) gives the emulator's values.

use crate::common;

use crate::common::attention::{run_numpy_kwargs, run_numpy_refused};
use crate::common::{Arg, seed_of, tensor, uniform};
use nki::attention::reference_tkg::{Shape, position_mask};
use nki::attention::tkg::gen_mask_tkg::{ACTIVE_FITS, BLOCK_LEN, CHUNK_FITS, SPRIOR_TILES, gen_mask_tkg_hbm};
use nki::{Dtype, Launch, Precision};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const P: usize = 128;
/// The library's flash-attention tile (`_FA_TILE_SIZE`), which block re-tiling respects.
const FA_TILE: usize = 8192;

/// One call: shapes, block length, sliding window (0: none), an active mask, LNC.
#[derive(Clone, Copy, Debug)]
struct Case {
    bs: usize,
    q_head: usize,
    s_prior: usize,
    s_active: usize,
    block_len: usize,
    window: usize,
    active: bool,
    lnc: usize,
}

const fn case(bs: usize, q_head: usize, s_prior: usize, s_active: usize, block_len: usize, lnc: usize) -> Case {
    Case { bs, q_head, s_prior, s_active, block_len, window: 0, active: false, lnc }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The block length the library re-tiles a block cache to: the largest divisor
/// of `block_len` dividing each core's tiles (two cores split `s_prior` on LNC2
/// unless the batch is split: an even batch of more than 128 query columns, or
/// fewer than 256 keys), its 8192-key flash-attention tiles and their remainder.
fn reduced_block_len(c: Case) -> usize {
    let batch_split = c.bs.is_multiple_of(2) && (c.bs * c.q_head * c.s_active > P || c.s_prior < 2 * P);
    let cores = if c.lnc == 2 && !batch_split && c.s_prior >= 2 * P { 2 } else { 1 };
    let per = c.s_prior / cores;
    let mut div = per / P;
    if per > FA_TILE {
        div = gcd(div, FA_TILE / P);
        if !per.is_multiple_of(FA_TILE) {
            div = gcd(div, per % FA_TILE / P);
        }
    }
    gcd(c.block_len, div)
}

/// The library test's inputs: a cache length per batch (below `s_prior - s_active`
/// with a window), each token's end position (the length, or length + t with a
/// window), window starts wrapping around a flat cache and clamped at 0 for a
/// block cache; a random 0/1 active block.
fn inputs(c: Case, name: &str) -> (Vec<f64>, Option<Vec<f64>>, Option<Vec<f64>>) {
    let hi = if c.window > 0 { c.s_prior - c.s_active } else { c.s_prior };
    let lens: Vec<f64> = uniform(c.bs, seed_of(name), 1.0, hi as f64).iter().map(|v| v.floor()).collect();
    let step = if c.window > 0 { 1.0 } else { 0.0 };
    let ends: Vec<f64> = (0..c.bs * c.s_active).map(|i| lens[i / c.s_active] + step * (i % c.s_active) as f64).collect();
    let starts = (c.window > 0).then(|| {
        let w = c.window as f64;
        let sp = c.s_prior as f64;
        ends.iter().map(|&e| if c.block_len > 0 { (e - w + 1.0).max(0.0) } else { (e - w + 1.0).rem_euclid(sp) }).collect()
    });
    let n_active = c.s_active * c.bs * c.q_head * c.s_active;
    let active = c.active.then(|| uniform(n_active, seed_of(&format!("{name} active")), 0.0, 2.0).iter().map(|v| v.floor()).collect());
    (ends, starts, active)
}

/// The expected output: the key-order reference mask in the kernel's row order.
fn expected(c: Case, ends: &[f64], starts: Option<&[f64]>, active: Option<&[f64]>) -> Vec<f64> {
    let s =
        Shape { bs: c.bs, q_head: c.q_head, s_active: c.s_active, curr_sprior: c.s_prior, full_sprior: c.s_prior, d: 1, cache_bs: c.bs };
    let by_key = position_mask(s, ends, starts, active);
    let (n_tiles, cols) = (c.s_prior / P, c.bs * c.q_head * c.s_active);
    let l = if c.block_len > 0 { reduced_block_len(c) } else { 0 };
    let mut out = vec![f64::NAN; by_key.len()];
    for t in 0..n_tiles {
        for p in 0..P {
            let k = if l > 0 { (t - t % l) * P + p * l + t % l } else { p * n_tiles + t };
            out[(t * P + p) * cols..][..cols].copy_from_slice(&by_key[k * cols..][..cols]);
        }
    }
    out
}

/// The emulated kernel's output for `c` on these inputs.
fn launch(c: Case, ends: &[f64], starts: Option<&[f64]>, active: Option<&[f64]>, precision: Precision) -> Vec<f32> {
    let cols = c.bs * c.s_active;
    let pos = tensor(&[1, cols], ends, Dtype::F32);
    let start = starts.map(|v| tensor(&[1, cols], v, Dtype::F32));
    let act = active.map(|v| tensor(&[c.s_active, c.bs, c.q_head, c.s_active], v, Dtype::F32));
    let mut call =
        gen_mask_tkg_hbm::Call::new(&pos, c.bs as i64, c.q_head as i64, c.s_active as i64, c.s_prior as i64).block_len(c.block_len as i64);
    if let Some(t) = &start {
        call = call.start_pos_hbm(t);
    }
    if let Some(t) = &act {
        call = call.active_mask(t);
    }
    let out = call.launch(&Launch::new().lnc(c.lnc).precision(precision)).expect("gen_mask_tkg_hbm runs");
    assert_eq!((out.shape(), out.dtype()), (&[c.s_prior, c.bs, c.q_head, c.s_active][..], Dtype::F32));
    out.to_f32_vec()
}

/// Asserts that every value of `got` equals the reference's.
fn assert_exact(what: &str, c: Case, got: &[f32], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: output size");
    let bad = got.iter().zip(want).position(|(&g, &w)| f64::from(g) != w);
    let row = c.bs * c.q_head * c.s_active;
    assert!(bad.is_none(), "{what} {c:?}: row {} differs", bad.unwrap_or(0) / row);
}

/// Runs `c` in both precision modes and checks every value.
fn check(name: &str, c: Case) {
    let (ends, starts, active) = inputs(c, name);
    let want = expected(c, &ends, starts.as_deref(), active.as_deref());
    for precision in [Precision::Fp32, Precision::Hardware] {
        let got = launch(c, &ends, starts.as_deref(), active.as_deref(), precision);
        assert_exact(&format!("{name} {precision:?}"), c, &got, &want);
    }
}

/// The LNC2 block caches (bs, q_head, s_prior, s_active, block_len, lnc) the
/// library tests both without and with an active mask.
const LNC2_BLOCK_CASES: [(usize, usize, usize, usize, usize, usize); 5] =
    [(4, 1, 8192, 5, 16, 2), (4, 1, 8192, 5, 128, 2), (4, 1, 32768, 5, 128, 2), (8, 8, 4096, 5, 16, 2), (8, 8, 4096, 5, 128, 2)];

#[test]
fn flat_and_block_caches_of_the_library_tests() {
    // (bs, q_head, s_prior, s_active, block_len, lnc): flat on LNC1, s_prior-split
    // (b·h·s <= 128) and batch-split (> 128) LNC2; block lengths re-tiled or not.
    let flat = [(4, 1, 256, 1, 1), (4, 1, 1024, 5, 1), (4, 2, 2048, 7, 1), (16, 4, 4096, 5, 1), (8, 2, 4096, 7, 1)];
    let flat2 = [(4, 1, 4096, 5, 2), (4, 2, 16384, 7, 2), (8, 8, 4096, 5, 2)];
    for (bs, h, sp, sa, lnc) in flat.into_iter().chain(flat2) {
        check(&format!("flat {bs} {h} {sp} {sa} lnc{lnc}"), case(bs, h, sp, sa, 0, lnc));
    }
    let block = [(4, 1, 256, 5, 16, 1), (4, 1, 2048, 5, 32, 1), (8, 2, 4096, 7, 16, 1), (4, 1, 4096, 5, 128, 1), (4, 1, 32768, 5, 128, 1)];
    for (bs, h, sp, sa, bl, lnc) in block.into_iter().chain(LNC2_BLOCK_CASES) {
        check(&format!("block {bs} {h} {sp} {sa} {bl} lnc{lnc}"), case(bs, h, sp, sa, bl, lnc));
    }
}

#[test]
fn active_masks_of_the_library_tests() {
    let rows = [
        (4, 1, 256, 5, 0, 1),
        (4, 2, 512, 5, 0, 1),
        (4, 1, 256, 1, 0, 1),
        (4, 1, 2048, 5, 16, 1),
        (4, 2, 4096, 5, 16, 1),
        (4, 1, 4096, 5, 128, 1),
        (4, 1, 32768, 5, 128, 1),
        (16, 4, 4096, 5, 0, 1),
        (8, 2, 4096, 7, 16, 1),
        (4, 2, 4096, 5, 0, 2),
        (8, 8, 256, 5, 0, 2),
    ];
    for (bs, h, sp, sa, bl, lnc) in rows.into_iter().chain(LNC2_BLOCK_CASES) {
        check(&format!("active {bs} {h} {sp} {sa} {bl} lnc{lnc}"), Case { active: true, ..case(bs, h, sp, sa, bl, lnc) });
    }
}

#[test]
fn sliding_windows_of_the_library_tests_with_and_without_active_masks() {
    // (bs, q_head, s_prior, s_active, window, block_len, lnc, active)
    let rows = [
        (4, 1, 1024, 5, 128, 0, 1, false),
        (4, 1, 1024, 5, 256, 0, 1, false),
        (4, 2, 2048, 7, 512, 0, 1, false),
        (4, 2, 2048, 7, 256, 0, 1, false),
        (4, 1, 2048, 5, 128, 16, 1, false),
        (4, 1, 2048, 5, 256, 16, 1, false),
        (4, 1, 4096, 5, 256, 128, 1, false),
        (4, 1, 4096, 5, 128, 0, 2, false),
        (4, 1, 8192, 5, 256, 128, 2, false),
        (8, 8, 4096, 5, 128, 0, 2, false),
        (8, 8, 4096, 5, 256, 128, 2, false),
        (4, 1, 12288, 5, 128, 16, 2, false),
        (4, 2, 1024, 5, 256, 0, 1, true),
        (4, 1, 1024, 5, 128, 0, 1, true),
        (4, 1, 4096, 5, 256, 128, 1, true),
        (4, 2, 4096, 5, 128, 0, 2, true),
        (4, 1, 8192, 5, 256, 128, 2, true),
    ];
    for (bs, h, sp, sa, w, bl, lnc, active) in rows {
        let c = Case { window: w, active, ..case(bs, h, sp, sa, bl, lnc) };
        check(&format!("window {bs} {h} {sp} {sa} {w} {bl} lnc{lnc} {active}"), c);
    }
}

#[test]
fn flash_attention_tiled_caches_of_the_library_tests() {
    // Several chunks per batch, block lengths re-tiled to the 8192-key tiles.
    let rows = [
        (8, 8, 8192, 5, 0, 1, false),
        (8, 8, 8192, 7, 0, 1, true),
        (8, 8, 8192, 5, 16, 1, true),
        (8, 8, 8192, 5, 128, 1, false),
        (8, 8, 32768, 5, 128, 1, true),
        (8, 8, 8192, 5, 0, 2, true),
        (4, 4, 32768, 7, 0, 2, true),
        (4, 4, 65536, 5, 128, 2, true),
        (8, 8, 32768, 5, 128, 2, true),
    ];
    for (bs, h, sp, sa, bl, lnc, active) in rows {
        check(&format!("fa {bs} {h} {sp} {sa} {bl} lnc{lnc}"), Case { active, ..case(bs, h, sp, sa, bl, lnc) });
    }
}

#[test]
fn many_query_columns_take_several_chunks() {
    // 256 query columns: 64 tiles a chunk (two chunks of 128 tiles on each of two programs for
    // the flat cache; two folds of 32 a chunk for the block cache).
    check("chunks flat", Case { window: 300, active: true, ..case(2, 32, 32768, 8, 0, 2) });
    check("chunks block", Case { active: true, ..case(1, 32, 16384, 8, 32, 1) });
}

#[test]
fn int32_positions_and_an_odd_tile_count_split_over_two_programs() {
    // 384 keys on LNC2: three tiles, two for program 0 and one for program 1.
    let c = Case { active: true, ..case(1, 2, 384, 3, 0, 2) };
    check("odd tiles", c);
    let (ends, _, _) = inputs(c, "int32");
    let want = expected(c, &ends, None, None);
    let pos = tensor(&[1, 3], &ends, Dtype::I32);
    let out = gen_mask_tkg_hbm::Call::new(&pos, 1, 2, 3, 384).launch(&Launch::new().lnc(2)).expect("int32 positions run");
    let got: Vec<f64> = out.to_f32_vec().iter().map(|&v| f64::from(v)).collect();
    assert_eq!(got, want);
}

#[test]
fn broken_rules_are_refused_by_name() {
    let pos = tensor(&[1, 2], &[5.0, 5.0], Dtype::F32);
    let refused = |sa: i64, sp: i64, bl: i64, q_head: i64| {
        let pos = if sa == 2 { pos.clone() } else { tensor(&[1, sa as usize], &vec![5.0; sa as usize], Dtype::F32) };
        let e = gen_mask_tkg_hbm::Call::new(&pos, 1, q_head, sa, sp).block_len(bl).launch(&Launch::new()).unwrap_err();
        e.to_string()
    };
    assert!(refused(2, 200, 0, 1).contains(SPRIOR_TILES));
    assert!(refused(2, 256, 48, 1).contains(BLOCK_LEN));
    assert!(refused(129, 128, 0, 1).contains(ACTIVE_FITS));
    assert!(refused(2, 8192, 256, 64).contains(CHUNK_FITS));
}

/// The emitted package holding `gen_mask_tkg_hbm` and the `attention_tkg` helpers it imports.
fn package() -> &'static Path {
    static PKG: OnceLock<PathBuf> = OnceLock::new();
    PKG.get_or_init(|| common::package_of("gen_mask_pkg", &[&gen_mask_tkg_hbm::INFO]))
}

/// `c` under the NumPy executor: the same values as the emulator and the reference.
fn np_case(name: &str, c: Case) {
    let (ends, starts, active) = inputs(c, name);
    let want = expected(c, &ends, starts.as_deref(), active.as_deref());
    let emulated = launch(c, &ends, starts.as_deref(), active.as_deref(), Precision::Fp32);
    let int = |v: usize| Arg::Int(v as i64);
    let args = [Arg::Tensor(vec![1, c.bs * c.s_active], ends, Dtype::F32), int(c.bs), int(c.q_head), int(c.s_active), int(c.s_prior)];
    let mut kwargs = vec![("block_len", int(c.block_len))];
    if let Some(v) = starts {
        kwargs.push(("start_pos_hbm", Arg::Tensor(vec![1, c.bs * c.s_active], v, Dtype::F32)));
    }
    if let Some(v) = active {
        kwargs.push(("active_mask", Arg::Tensor(vec![c.s_active, c.bs, c.q_head, c.s_active], v, Dtype::F32)));
    }
    let numpy = run_numpy_kwargs(package(), "gen_mask_tkg_hbm", &args, &kwargs, c.lnc, "fp32");
    assert_eq!(numpy.len(), 1, "{name}: one output");
    assert_eq!(numpy[0], emulated, "{name}: NumPy and the emulator differ");
    assert_exact(&format!("{name} NumPy"), c, &numpy[0], &want);
}

#[test]
fn numpy_executor_agrees_with_the_emulator() {
    // Flat, s_prior split over two programs, a window and an active block.
    np_case("np flat window", Case { window: 128, active: true, ..case(4, 2, 1024, 5, 0, 2) });
    // Block cache re-tiled to 2 on LNC2 (s_prior split), active block.
    np_case("np block", Case { active: true, ..case(4, 1, 512, 3, 16, 2) });
    // Batches split over two programs, a window over a block cache.
    np_case("np batch split", Case { window: 100, ..case(8, 8, 512, 3, 16, 2) });
    // Two chunks of 64 tiles (two folds of 32) for 256 query columns, the active keys in the second.
    np_case("np chunks", Case { active: true, ..case(1, 32, 16384, 8, 32, 1) });
}

#[test]
fn the_emitted_kernel_refuses_a_broken_rule_by_name() {
    let pos = Arg::Tensor(vec![1, 2], vec![5.0, 5.0], Dtype::F32);
    let args = [pos, Arg::Int(1), Arg::Int(1), Arg::Int(2), Arg::Int(200)];
    let e = run_numpy_refused(package(), "gen_mask_tkg_hbm", &args, &[]);
    assert!(e.contains(&format!("AssertionError: {SPRIOR_TILES}")), "{e}");
}
