//! `gen_mask_tkg_hbm`: the NKI library's standalone mask generation for
//! token-generation attention, written in the DSL.
//!
//! The kernel builds, in HBM, the `(s_prior, bs, q_head, s_active)` float32 mask
//! `attention_tkg` reads when the mask is not generated inside it: 1 where query
//! `(b, h, t)` sees a key, 0 elsewhere. Key `k` of batch `b` is visible when
//! `k < pos_ids[b·s_active]` (every token of the batch sees its first token's
//! prefix), or with a sliding window (`start_pos_hbm` given) per query when
//! `start <= k < end` for `start = start_pos[b·s_active + t] <= end = pos_ids[..]`
//! and `k >= start or k < end` for a window wrapping around the cache. An
//! optional active mask `(s_active, bs, q_head, s_active)` overrides the last
//! `s_active` keys: key `s_prior - s_active + j` takes `active_mask[j, b, h, t]`.
//!
//! Layout (the attention kernel's K-cache order): the `s_prior` keys are `N =
//! s_prior / 128` tiles of 128 partitions and row `T·128 + p` of the output holds
//! key `k(p, T)`:
//! - flat cache (`block_len = 0`, the library's strided MM1): `k = p·N + T`;
//! - block cache: with the library's reduced block length `L`
//!   (`resize_cache_block_len_for_attention_tkg_kernel`,
//!   [`mask_folds`](crate::tkg::attention_tkg::mask_folds)), tiles
//!   come in folds of `L`, `T = F·L + r`, and `k = F·L·128 + p·L + r`.
//!
//! Phases (the library's names), per LNC program:
//!
//! 1. `load_positions`: `pos_ids` (and `start_pos`) broadcast to the 128
//!    partitions as fp32 columns, one per query token.
//! 2. For each batch of the program (the library's batch sharding gives each of
//!    two programs half the batches, its s_prior sharding half the tiles) and
//!    each chunk of at most [`MASK_CHUNK_ELEMS`] values a partition (whole folds),
//!    `gen_mask_tkg`:
//!    - `generate_iota_tensor`: the chunk's key indices `(128, cols)` by `nisa.iota`;
//!    - `create_batch_masks`: the comparison of
//!      [`prior_mask`](crate::tkg::attention_tkg::prior_mask) (shared with
//!      `attention_tkg`) per token, copied to the query columns it serves;
//!    - `load_active_mask`: the active keys' cells that fall in the chunk, by DMA;
//!
//!    then `store_mask`: the chunk to its rows of the output, tile-major.

use nki::prelude::*;

pub use masks::*;

use super::attention_tkg::P_MAX;

/// The kernel with its tile constants, its layout bundle and its phase helpers.
#[nki_module]
pub mod masks {
    use crate::tkg::attention_tkg::{P_MAX, as_float32, is_batch_sharded, mask_folds, prior_mask};
    use nki::prelude::*;

    /// fp32 values a partition of one batch's mask chunk holds (64 KiB): the
    /// chunk is `cols` key tiles of `q_head · s_active` query columns.
    pub const MASK_CHUNK_ELEMS: i64 = 16384;

    /// `GenMaskRule::DimsPositive`.
    pub const DIMS_POSITIVE: &str = "gen_mask_tkg_hbm: bs, q_head and s_active must be strictly positive";
    /// `GenMaskRule::SpriorTiles`.
    pub const SPRIOR_TILES: &str = "gen_mask_tkg_hbm: s_prior must be a positive multiple of 128 (p_max)";
    /// `GenMaskRule::ActiveFits`.
    pub const ACTIVE_FITS: &str = "gen_mask_tkg_hbm: the active tokens are the last keys: s_active must be at most s_prior";
    /// `GenMaskRule::BlockLen`.
    pub const BLOCK_LEN: &str = "gen_mask_tkg_hbm: block_len must be 0 (a flat cache) or a positive divisor of s_prior";
    /// `GenMaskRule::ChunkFits`.
    pub const CHUNK_FITS: &str =
        "gen_mask_tkg_hbm: q_head * s_active * max(block_len, 1) must be at most 16384 (one fold of a batch's mask in 64 KiB a partition)";
    /// A block cache split over two LNC programs (the library's block resize assert).
    pub const BLOCK_SHARDS: &str =
        "gen_mask_tkg_hbm: with a block cache and s_prior split over the LNC programs, s_prior must be a multiple of 128 per program";

    /// The tile space of the mask: which key each `(partition, tile)` cell holds.
    #[nki_object]
    pub struct MaskLayout {
        /// Batch size.
        pub bs: i64,
        /// Query heads.
        pub q_head: i64,
        /// Active tokens per sequence.
        pub s_active: i64,
        /// Keys (the cache positions in use, the active tokens last).
        pub s_prior: i64,
        /// Key tiles, `s_prior / P_MAX`: the stride of a flat cache's partitions.
        pub n_tiles: i64,
        /// The reduced block length of a block cache (tiles per fold); 0 for a flat cache.
        pub fold_len: i64,
    }

    /// The library's argument checks, and this kernel's chunk limit, on the
    /// shapes of `layout` (its fold length is not read).
    #[nki_helper]
    fn check_args(pos_ids: Hbm, start_pos: Option<Hbm>, active_mask: Option<Hbm>, layout: MaskLayout, block_len: i64) {
        let (bs, q_head, s_active, s_prior) = (layout.bs, layout.q_head, layout.s_active, layout.s_prior);
        assert!(bs > 0 && q_head > 0 && s_active > 0, DIMS_POSITIVE);
        assert!(s_prior > 0 && s_prior % P_MAX == 0, SPRIOR_TILES);
        assert!(s_active <= s_prior, ACTIVE_FITS);
        assert!(block_len == 0 || (block_len > 0 && s_prior % block_len == 0), BLOCK_LEN);
        // Each factor within the limit first, so the product cannot overflow.
        let fits = q_head <= MASK_CHUNK_ELEMS && s_active <= MASK_CHUNK_ELEMS && block_len <= MASK_CHUNK_ELEMS;
        assert!(fits && q_head * s_active * block_len.max(1) <= MASK_CHUNK_ELEMS, CHUNK_FITS);
        let shape = pos_ids.shape();
        assert!(pos_ids.ndim() == 2 && shape[0] == 1 && shape[1] == bs * s_active, "pos_ids_hbm must be (1, bs * s_active), got {shape}");
        if let Some(st) = start_pos {
            let st_shape = st.shape();
            assert!(
                st.ndim() == 2 && st_shape[0] == 1 && st_shape[1] == bs * s_active,
                "start_pos_hbm must be (1, bs * s_active), got {st_shape}"
            );
        }
        if let Some(am) = active_mask {
            let a = am.shape();
            assert!(
                am.ndim() == 4 && a[0] == s_active && a[1] == bs && a[2] == q_head && a[3] == s_active,
                "active_mask must be (s_active, bs, q_head, s_active), got {a}"
            );
        }
    }

    /// `src` `(1, cols)` broadcast to the `(P_MAX, cols)` fp32 tile `dst` (the
    /// library's DMA and `stream_shuffle_broadcast`).
    #[nki_helper]
    fn load_positions(dst: Sbuf, src: Hbm) {
        let cols = dst.shape()[1];
        let raw = nl::ndarray([P_MAX, cols], src.dtype(), buffer = nl::sbuf);
        nisa::dma_copy(raw, src.ap([[0, P_MAX], [1, cols]]));
        nisa::tensor_copy(dst, as_float32(raw));
    }

    /// The library's `_generate_iota_tensor`: the key index of every cell of tiles
    /// `[t0, t0 + cols)`, `(P_MAX, cols)` fp32 (exact below 2²⁴).
    #[nki_helper]
    fn generate_iota_tensor(layout: MaskLayout, t0: i64, cols: i64) -> Sbuf {
        let keys = nl::ndarray([P_MAX, cols], nl::float32, buffer = nl::sbuf);
        let fl = layout.fold_len;
        if fl > 0 {
            // Fold F, offset r, partition p: F·L·128 + p·L + r (t0 starts a fold).
            nisa::iota(keys, [[P_MAX * fl, cols / fl], [1, fl]], offset = t0 * P_MAX, channel_multiplier = fl);
        } else {
            nisa::iota(keys, [[1, cols]], offset = t0, channel_multiplier = layout.n_tiles);
        }
        keys
    }

    /// The library's `_create_batch_masks` and `_create_batch_masks_swa` for
    /// batch `b` into `mask` `(P_MAX, cols, q_head·s_active)`: without a window
    /// one comparison with the first token's position fills every query column;
    /// with one, token `t`'s window fills the columns `h·s_active + t`.
    #[nki_helper]
    fn create_batch_masks(mask: Sbuf, keys: Sbuf, ends: Sbuf, starts: Sbuf, window: bool, layout: MaskLayout, b: i64) {
        let (q_head, s_a) = (layout.q_head, layout.s_active);
        let (cols, n) = (keys.shape()[1], q_head * s_a);
        let tokens = if window { s_a } else { 1 };
        let reps = if window { q_head } else { n };
        let rep_step = if window { s_a } else { 1 };
        for t in 0..tokens {
            let c = b * s_a + t;
            let visible = nl::ndarray([P_MAX, cols], nl::float32, buffer = nl::sbuf);
            prior_mask(visible, keys, starts[s![.., c..c + 1]], ends[s![.., c..c + 1]], window);
            let dst = mask.ap([[cols * n, P_MAX], [n, cols], [rep_step, reps]], offset = t);
            nisa::tensor_copy(dst, visible.ap([[cols, P_MAX], [1, cols], [0, reps]]));
        }
    }

    /// The `(partition, tile)` cell holding key `k` (the inverse of
    /// [`generate_iota_tensor`]'s order).
    #[nki_helper]
    fn key_cell(layout: MaskLayout, k: i64) -> (i64, i64) {
        let fl = layout.fold_len;
        let fold = P_MAX * fl.max(1);
        let within = k % fold;
        let p = if fl > 0 { within / fl } else { k / layout.n_tiles };
        let t = if fl > 0 { k / fold * fl + within % fl } else { k % layout.n_tiles };
        (p, t)
    }

    /// The library's `_load_active_mask`: key `s_prior - s_active + j` of batch
    /// `b` takes `active_mask[j, b]` `(q_head, s_active)` when its tile is one of
    /// the chunk's, `[t0, t0 + cols)`.
    #[nki_helper]
    fn load_active_mask(mask: Sbuf, active_mask: Hbm, layout: MaskLayout, b: i64, t0: i64) {
        let (s_a, bs, cols) = (layout.s_active, layout.bs, mask.shape()[1]);
        let n = layout.q_head * s_a;
        for j in 0..s_a {
            let (p, t): (i64, i64) = key_cell(layout, layout.s_prior - s_a + j);
            if t >= t0 && t < t0 + cols {
                let src = active_mask.ap([[n, 1], [n, 1], [1, n]], offset = (j * bs + b) * n);
                nisa::dma_copy(mask[s![p..p + 1, t - t0..t - t0 + 1, ..]], src);
            }
        }
    }

    /// The library's `gen_mask_tkg` for batch `b` and the tiles `[t0, t0 + cols)`
    /// of `mask_out` `(P_MAX, cols, q_head·s_active)`: the key indices, their
    /// comparison with the positions `pos_ids` (and window starts `start_pos`,
    /// with `window`), then the active keys' cells from `active_mask`.
    #[nki_helper]
    pub fn gen_mask_tkg(
        pos_ids: Sbuf,
        mask_out: Sbuf,
        start_pos: Sbuf,
        window: bool,
        active_mask: Option<Hbm>,
        layout: MaskLayout,
        b: i64,
        t0: i64,
    ) {
        let keys: Sbuf = generate_iota_tensor(layout, t0, mask_out.shape()[1]);
        create_batch_masks(mask_out, keys, pos_ids, start_pos, window, layout, b);
        if let Some(am) = active_mask {
            load_active_mask(mask_out, am, layout, b, t0);
        }
    }

    /// Stores batch `b`'s chunk of tiles `[t0, t0 + cols)` to rows `T·P_MAX + p`
    /// of `out` `(s_prior, bs, q_head, s_active)`.
    #[nki_helper]
    fn store_mask(out: Hbm, mask: Sbuf, layout: MaskLayout, b: i64, t0: i64) {
        let (cols, n) = (mask.shape()[1], layout.q_head * layout.s_active);
        let row = layout.bs * n;
        nisa::dma_copy(out.ap([[row, P_MAX], [P_MAX * row, cols], [1, n]], offset = t0 * P_MAX * row + b * n), mask);
    }

    /// Builds the attention mask of a decode step in HBM: the library's
    /// `gen_mask_tkg_hbm`, with its signature and defaults.
    ///
    /// `pos_ids_hbm` `(1, bs·s_active)` holds each query token's position (the
    /// end of its visible cache keys), `start_pos_hbm` (same shape) the start of
    /// a per-query sliding window, `active_mask` `(s_active, bs, q_head, s_active)`
    /// the active keys' block; `block_len > 0` lays the keys out for a block KV
    /// cache, re-tiled as `attention_tkg` re-tiles it (`enable_fa_s_prior_tiling`
    /// as passed to it). With two LNC programs the batches or the key tiles are
    /// split between them as the library splits them.
    ///
    /// Returns the `(s_prior, bs, q_head, s_active)` float32 mask, row `T·128 + p`
    /// holding key `k(p, T)` of the module's layout.
    #[nki_kernel]
    pub fn gen_mask_tkg_hbm(
        #[dtypes(float32, int32)] pos_ids_hbm: Hbm,
        bs: i64,
        q_head: i64,
        s_active: i64,
        s_prior: i64,
        #[dtypes(float32, int32)] start_pos_hbm: Option<Hbm>,
        #[default(0)] block_len: i64,
        #[dtypes(float32)] active_mask: Option<Hbm>,
        #[default(true)] enable_fa_s_prior_tiling: bool,
    ) -> Hbm {
        let grid = nl::program_ndim() == 1;
        let shard = if grid { nl::program_id(0) } else { 0 };
        let programs = if grid { nl::num_programs(0) } else { 1 };
        let n_tiles = s_prior / P_MAX;
        // The shapes are checked before the block re-tiling searches its divisors.
        let dims = MaskLayout { bs, q_head, s_active, s_prior, n_tiles, fold_len: 0 };
        check_args(pos_ids_hbm, start_pos_hbm, active_mask, dims, block_len);
        let (fold_len, per): (i64, i64) = mask_folds(bs, q_head, s_active, s_prior, block_len, enable_fa_s_prior_tiling, programs);
        let fl = if block_len > 0 { fold_len } else { 0 };
        let layout = MaskLayout { bs, q_head, s_active, s_prior, n_tiles, fold_len: fl };
        let sprior_sharded = per < s_prior;
        assert!(fl == 0 || !sprior_sharded || per % P_MAX == 0, BLOCK_SHARDS);
        let n = q_head * s_active;
        let out = nl::ndarray([s_prior, bs, q_head, s_active], nl::float32, buffer = nl::shared_hbm);
        let ends = nl::ndarray([P_MAX, bs * s_active], nl::float32, buffer = nl::sbuf);
        load_positions(ends, pos_ids_hbm);
        let starts = nl::ndarray([P_MAX, bs * s_active], nl::float32, buffer = nl::sbuf);
        if let Some(st) = start_pos_hbm {
            load_positions(starts, st);
        }
        // The library's LNC sharding: half the key tiles, or half the batches, per
        // program; without either, program 0 builds the whole mask.
        let batch_sharded = programs > 1 && is_batch_sharded(bs, q_head, s_active, s_prior);
        let share = if sprior_sharded { (n_tiles + programs - 1) / programs } else { n_tiles };
        let t_begin = if sprior_sharded { shard * share } else { 0 };
        let t_end = if sprior_sharded || batch_sharded || shard == 0 { (t_begin + share).min(n_tiles) } else { t_begin };
        let batches = if batch_sharded { bs / programs } else { bs };
        let b_begin = if batch_sharded { shard * batches } else { 0 };
        // Chunks of whole folds within MASK_CHUNK_ELEMS values a partition.
        let unit = fl.max(1);
        let step = (MASK_CHUNK_ELEMS / n / unit).max(1) * unit;
        for b in b_begin..b_begin + batches {
            for t0 in (t_begin..t_end).step_by(step) {
                let cols = (t_end - t0).min(step);
                let mask = nl::ndarray([P_MAX, cols, n], nl::float32, buffer = nl::sbuf);
                gen_mask_tkg(ends, mask, starts, start_pos_hbm.is_some(), active_mask, layout, b, t0);
                store_mask(out, mask, layout, b, t0);
            }
        }
        out
    }
}

/// One `gen_mask_tkg_hbm` call's shapes, whose rules are checked at compile time
/// when it is a constant (see [`gen_mask_config!`](crate::gen_mask_config)):
///
/// ```compile_fail
/// use nki_attention::{gen_mask_config, tkg::gen_mask_tkg::GenMaskConfig};
/// // The cache length must be a multiple of 128.
/// let cfg = gen_mask_config!(GenMaskConfig { bs: 4, q_head: 1, s_active: 5, s_prior: 1000, block_len: 0 });
/// ```
///
/// ```
/// use nki_attention::{gen_mask_config, tkg::gen_mask_tkg::GenMaskConfig};
/// let cfg = gen_mask_config!(GenMaskConfig { bs: 4, q_head: 1, s_active: 5, s_prior: 32768, block_len: 128 });
/// assert_eq!(cfg.s_prior, 32768);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenMaskConfig {
    /// Batch size (`bs`).
    pub bs: i64,
    /// Query heads (`q_head`).
    pub q_head: i64,
    /// Active tokens per sequence (`s_active`), the last keys.
    pub s_active: i64,
    /// Keys (`s_prior`).
    pub s_prior: i64,
    /// Block length of a block KV cache (`block_len`); 0: a flat cache.
    pub block_len: i64,
}

/// One rule of `gen_mask_tkg_hbm`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GenMaskRule {
    /// `bs`, `q_head`, `s_active` positive.
    DimsPositive,
    /// `s_prior` a positive multiple of 128.
    SpriorTiles,
    /// `s_active <= s_prior`: the active tokens are the last keys.
    ActiveFits,
    /// `block_len` 0 or a positive divisor of `s_prior`.
    BlockLen,
    /// One fold of a batch's mask fits a chunk: `q_head · s_active · max(block_len, 1) <= MASK_CHUNK_ELEMS`.
    ChunkFits,
}

impl GenMaskRule {
    /// The rule in words (a `const` string, usable in compile-time panics).
    pub const fn message(self) -> &'static str {
        match self {
            GenMaskRule::DimsPositive => DIMS_POSITIVE,
            GenMaskRule::SpriorTiles => SPRIOR_TILES,
            GenMaskRule::ActiveFits => ACTIVE_FITS,
            GenMaskRule::BlockLen => BLOCK_LEN,
            GenMaskRule::ChunkFits => CHUNK_FITS,
        }
    }
}

rules_of!(GenMaskConfig, GenMaskRule);

impl GenMaskConfig {
    /// The first broken rule, if any.
    pub const fn violation(&self) -> Option<GenMaskRule> {
        if self.bs <= 0 || self.q_head <= 0 || self.s_active <= 0 {
            return Some(GenMaskRule::DimsPositive);
        }
        if self.s_prior <= 0 || self.s_prior % P_MAX != 0 {
            return Some(GenMaskRule::SpriorTiles);
        }
        if self.s_active > self.s_prior {
            return Some(GenMaskRule::ActiveFits);
        }
        if self.block_len < 0 || (self.block_len > 0 && self.s_prior % self.block_len != 0) {
            return Some(GenMaskRule::BlockLen);
        }
        // Each factor at most the limit first, so the product cannot overflow.
        let fold = if self.block_len > 0 { self.block_len } else { 1 };
        let limit = MASK_CHUNK_ELEMS;
        if self.q_head > limit || self.s_active > limit || fold > limit || self.q_head * self.s_active * fold > limit {
            return Some(GenMaskRule::ChunkFits);
        }
        None
    }

    /// The error of `rule`, naming its parameter and value.
    pub fn rule_error(&self, rule: GenMaskRule) -> nki::NkiError {
        let (param, value) = match rule {
            GenMaskRule::DimsPositive => ("bs", format!("{} with q_head = {}, s_active = {}", self.bs, self.q_head, self.s_active)),
            GenMaskRule::SpriorTiles => ("s_prior", self.s_prior.to_string()),
            GenMaskRule::ActiveFits => ("s_active", format!("{} with s_prior = {}", self.s_active, self.s_prior)),
            GenMaskRule::BlockLen => ("block_len", format!("{} with s_prior = {}", self.block_len, self.s_prior)),
            GenMaskRule::ChunkFits => {
                ("q_head", format!("{} with s_active = {}, block_len = {}", self.q_head, self.s_active, self.block_len))
            }
        };
        nki::NkiError::argument(param, value, rule.message())
    }
}

/// A checked [`GenMaskConfig`] constant: breaking one of `gen_mask_tkg_hbm`'s
/// rules is a compile error naming the rule.
#[macro_export]
macro_rules! gen_mask_config {
    ($cfg:expr) => {
        $crate::__checked_config!($crate::tkg::gen_mask_tkg::GenMaskConfig, $cfg)
    };
}
