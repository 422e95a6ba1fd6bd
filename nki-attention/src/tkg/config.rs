//! The typed configuration of `attention_tkg` (the library's `AttnTKGConfig`
//! fields this kernel implements), whose rules are checked at compile time when
//! the configuration is a constant (see [`tkg_config!`](crate::tkg_config)).

use super::attention_tkg::{BLOCK_KV, FA_TILE_SIZE, MAX_SPRIOR_ROPE, P_MAX, QK_LAYOUT, ROPE_HEAD_EVEN, ROPE_SPRIOR, WINDOW_NEEDS_POS_ID};

/// The shapes of a decode step: the `AttnTKGConfig` shape fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TkgDims {
    /// Batch size (`bs`).
    pub bs: i64,
    /// Query heads sharing the KV head (`q_head`; the GQA ratio).
    pub q_head: i64,
    /// Active tokens per sequence (`s_active`; more than 1 with speculative decoding).
    pub s_active: i64,
    /// Cache positions in use, the active tokens last (`curr_sprior`).
    pub curr_sprior: i64,
    /// Cache capacity, the sequence length of `k_prior` / `v_prior` (`full_sprior`).
    pub full_sprior: i64,
    /// Head dimension (`d_head`).
    pub d_head: i64,
}

/// One `attention_tkg` call: its shapes and flags.
///
/// Built with `const fn`s so a configuration can be a constant; wrapped in
/// [`tkg_config!`](crate::tkg_config) its rules become compile errors:
///
/// ```compile_fail
/// use nki_attention::{tkg_config, tkg::{TkgConfig, TkgDims}};
/// // The cache length must be a multiple of 128.
/// const D: TkgDims = TkgDims { bs: 8, q_head: 4, s_active: 1, curr_sprior: 1000, full_sprior: 1024, d_head: 128 };
/// let cfg = tkg_config!(TkgConfig::new(D));
/// ```
///
/// ```
/// use nki_attention::{tkg_config, tkg::{TkgConfig, TkgDims}};
/// const D: TkgDims = TkgDims { bs: 8, q_head: 4, s_active: 1, curr_sprior: 1024, full_sprior: 2048, d_head: 128 };
/// let cfg = tkg_config!(TkgConfig::new(D).tp_k_prior(true).sink(true));
/// assert!(cfg.tp_k_prior);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TkgConfig {
    /// The shapes.
    pub dims: TkgDims,
    /// `k_prior` is `(B+, 1, full_sprior, d)` and is transposed while loading
    /// (else `(B+, 1, d, full_sprior)`).
    pub tp_k_prior: bool,
    /// A sink logit per query head is given.
    pub sink: bool,
    /// RoPE of `q` and `k_active` by `inv_freqs` and `rope_pos_ids` in the kernel
    /// (and `q` scaled by `1/sqrt(d_head)`); `k_out` holds the rotated keys.
    pub fuse_rope: bool,
    /// The cached keys' mask is generated from `rope_pos_ids` (key `j` visible
    /// when `j < rope_pos_ids[b, 0]`); the mask input is the active keys' block.
    pub use_pos_id: bool,
    /// A per-query sliding window (with `use_pos_id`): `start_pos_ids` is given and
    /// key `j` is visible when `start <= j < end` (`end = rope_pos_ids[b, t]`),
    /// or `j >= start or j < end` when the window wraps (`start > end`).
    pub window: bool,
    /// `q` is `(d, bs·q_head·s_active)` and `k_active` `(d, bs·s_active)` (the
    /// library's SBUF layouts), else `(bs, q_head, s_active, d)` and `(bs, 1, s_active, d)`.
    pub qk_in_sb: bool,
    /// `out` is `(d, bs·q_head·s_active)`, else `(bs, q_head, d, s_active)`.
    pub out_in_sb: bool,
    /// `k_out` is `(d, bs·s_active)`, else `(bs, 1, d, s_active)`.
    pub k_out_in_sb: bool,
    /// The library's strided K load for QK (a DMA pattern; the result does not depend on it).
    pub strided_mm1: bool,
    /// Caches longer than `FA_TILE_SIZE` keys are streamed tile by tile (else one pass).
    pub fa_tiling: bool,
    /// Block length of a block KV cache (`k_prior` / `v_prior` `(blocks, block_len, d)`
    /// and `active_blocks_table`); 0: a flat cache.
    pub block_len: i64,
}

/// One rule of `attention_tkg` (the library's asserts, and this kernel's layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TkgRule {
    /// `bs > 0`.
    BatchPositive,
    /// `q_head > 0`.
    QHeadPositive,
    /// `s_active > 0`.
    SActivePositive,
    /// `0 < curr_sprior <= full_sprior`.
    CurrSpriorRange,
    /// `0 < d_head <= 128`.
    DHeadRange,
    /// `curr_sprior % 128 == 0` (the library's "s_prior divisible by p_max").
    SpriorTiles,
    /// The last flash-attention tile holds at least the active tokens.
    LastTileActive,
    /// `s_active <= 128`: a query head's columns fit the partitions (a batch's
    /// heads are taken as many at a time as fit).
    ColumnsFit,
    /// Without fused RoPE, `q` and `k_active` come in the `qk_in_sb` layouts.
    QkLayout,
    /// Fused RoPE rotates the halves of the head dimension: `d_head` even.
    RopeHeadEven,
    /// Fused RoPE reduces its angles in float32: `curr_sprior <= 131072`.
    RopeSprior,
    /// A sliding window (`start_pos_ids`) is part of the generated mask: it needs `use_pos_id`.
    WindowNeedsPosId,
    /// A block cache: `tp_k_prior`, `qk_in_sb`, `curr_sprior` whole blocks.
    BlockKv,
}

impl TkgRule {
    /// The rule in words (a `const` string, usable in compile-time panics).
    pub const fn message(self) -> &'static str {
        match self {
            TkgRule::BatchPositive => "attention_tkg: the batch size bs must be strictly positive",
            TkgRule::QHeadPositive => "attention_tkg: the number of query heads q_head must be strictly positive",
            TkgRule::SActivePositive => "attention_tkg: the number of decode tokens s_active must be strictly positive",
            TkgRule::CurrSpriorRange => "attention_tkg: curr_sprior must be within [1, full_sprior]",
            TkgRule::DHeadRange => "attention_tkg: d_head must be within [1, 128]",
            TkgRule::SpriorTiles => "attention_tkg: curr_sprior must be a multiple of 128 (p_max)",
            TkgRule::LastTileActive => "attention_tkg: the last 8192-key flash-attention tile must hold at least s_active keys",
            TkgRule::ColumnsFit => "attention_tkg: s_active must be at most 128 (a query head's columns on the partitions)",
            TkgRule::QkLayout => QK_LAYOUT,
            TkgRule::RopeHeadEven => ROPE_HEAD_EVEN,
            TkgRule::RopeSprior => ROPE_SPRIOR,
            TkgRule::WindowNeedsPosId => WINDOW_NEEDS_POS_ID,
            TkgRule::BlockKv => BLOCK_KV,
        }
    }
}

rules_of!(TkgConfig, TkgRule);

impl TkgConfig {
    /// The flags' defaults: `k_prior` not transposed, no sink, no fused RoPE, the
    /// mask given, `q` / `k_active` / `out` / `k_out` in the `*_in_sb` layouts, the
    /// library's `strided_mm1` and flash-attention tiling.
    pub const fn new(dims: TkgDims) -> TkgConfig {
        TkgConfig {
            dims,
            tp_k_prior: false,
            sink: false,
            fuse_rope: false,
            use_pos_id: false,
            window: false,
            qk_in_sb: true,
            out_in_sb: false,
            k_out_in_sb: false,
            strided_mm1: true,
            fa_tiling: true,
            block_len: 0,
        }
    }

    /// Sets [`TkgConfig::block_len`].
    pub const fn block_len(mut self, len: i64) -> Self {
        self.block_len = len;
        self
    }

    /// Sets [`TkgConfig::fuse_rope`].
    pub const fn fuse_rope(mut self, on: bool) -> Self {
        self.fuse_rope = on;
        self
    }

    /// Sets [`TkgConfig::use_pos_id`].
    pub const fn use_pos_id(mut self, on: bool) -> Self {
        self.use_pos_id = on;
        self
    }

    /// Sets [`TkgConfig::window`].
    pub const fn window(mut self, on: bool) -> Self {
        self.window = on;
        self
    }

    /// Sets [`TkgConfig::qk_in_sb`].
    pub const fn qk_in_sb(mut self, on: bool) -> Self {
        self.qk_in_sb = on;
        self
    }

    /// Sets [`TkgConfig::out_in_sb`].
    pub const fn out_in_sb(mut self, on: bool) -> Self {
        self.out_in_sb = on;
        self
    }

    /// Sets [`TkgConfig::k_out_in_sb`].
    pub const fn k_out_in_sb(mut self, on: bool) -> Self {
        self.k_out_in_sb = on;
        self
    }

    /// Sets [`TkgConfig::strided_mm1`].
    pub const fn strided_mm1(mut self, on: bool) -> Self {
        self.strided_mm1 = on;
        self
    }

    /// Sets [`TkgConfig::fa_tiling`].
    pub const fn fa_tiling(mut self, on: bool) -> Self {
        self.fa_tiling = on;
        self
    }

    /// Keys per flash-attention tile: [`FA_TILE_SIZE`], or the whole cache without tiling.
    pub const fn fa_tile(&self) -> i64 {
        if self.fa_tiling { FA_TILE_SIZE } else { self.dims.curr_sprior }
    }

    /// Sets [`TkgConfig::tp_k_prior`].
    pub const fn tp_k_prior(mut self, on: bool) -> Self {
        self.tp_k_prior = on;
        self
    }

    /// Sets [`TkgConfig::sink`].
    pub const fn sink(mut self, on: bool) -> Self {
        self.sink = on;
        self
    }

    /// The first broken rule, if any.
    pub const fn violation(&self) -> Option<TkgRule> {
        let d = self.dims;
        if d.bs <= 0 {
            return Some(TkgRule::BatchPositive);
        }
        if d.q_head <= 0 {
            return Some(TkgRule::QHeadPositive);
        }
        if d.s_active <= 0 {
            return Some(TkgRule::SActivePositive);
        }
        if d.curr_sprior <= 0 || d.curr_sprior > d.full_sprior {
            return Some(TkgRule::CurrSpriorRange);
        }
        if d.d_head <= 0 || d.d_head > P_MAX {
            return Some(TkgRule::DHeadRange);
        }
        if d.curr_sprior % P_MAX != 0 {
            return Some(TkgRule::SpriorTiles);
        }
        let tile = self.fa_tile();
        let last = d.curr_sprior - (d.curr_sprior - 1) / tile * tile;
        if last < d.s_active {
            return Some(TkgRule::LastTileActive);
        }
        if d.s_active > P_MAX {
            return Some(TkgRule::ColumnsFit);
        }
        if !self.qk_in_sb && !self.fuse_rope {
            return Some(TkgRule::QkLayout);
        }
        if self.fuse_rope && d.d_head % 2 != 0 {
            return Some(TkgRule::RopeHeadEven);
        }
        if self.fuse_rope && d.curr_sprior > MAX_SPRIOR_ROPE {
            return Some(TkgRule::RopeSprior);
        }
        if self.window && !self.use_pos_id {
            return Some(TkgRule::WindowNeedsPosId);
        }
        if self.block_len < 0 || (self.block_len > 0 && !(self.tp_k_prior && self.qk_in_sb && d.curr_sprior % self.block_len == 0)) {
            return Some(TkgRule::BlockKv);
        }
        None
    }
}

/// A checked [`TkgConfig`] constant: breaking one of `attention_tkg`'s rules is a
/// compile error naming the rule.
///
/// ```
/// use nki_attention::{tkg_config, tkg::{TkgConfig, TkgDims}};
/// const D: TkgDims = TkgDims { bs: 1, q_head: 8, s_active: 4, curr_sprior: 128, full_sprior: 128, d_head: 64 };
/// assert!(tkg_config!(TkgConfig::new(D)).violation().is_none());
/// ```
#[macro_export]
macro_rules! tkg_config {
    ($cfg:expr) => {
        $crate::__checked_config!($crate::tkg::TkgConfig, $cfg)
    };
}
