//! The typed configuration of `attention_tkg` (the library's `AttnTKGConfig`
//! fields this kernel implements), whose rules are checked at compile time when
//! the configuration is a constant (see [`tkg_config!`](crate::tkg_config)).

use super::attention_tkg::{FA_TILE_SIZE, P_MAX};

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
    /// `q_head * s_active <= 128`: a batch's query columns fit the partitions.
    ColumnsFit,
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
            TkgRule::ColumnsFit => "attention_tkg: q_head * s_active must be at most 128 (one batch's query columns on the partitions)",
        }
    }
}

rules_of!(TkgConfig, TkgRule);

impl TkgConfig {
    /// The library's defaults for the flags: `k_prior` not transposed, no sink.
    pub const fn new(dims: TkgDims) -> TkgConfig {
        TkgConfig { dims, tp_k_prior: false, sink: false }
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
        let last = d.curr_sprior - (d.curr_sprior - 1) / FA_TILE_SIZE * FA_TILE_SIZE;
        if last < d.s_active {
            return Some(TkgRule::LastTileActive);
        }
        // Both at most 128 by now unless q_head is huge: compare without overflow.
        if d.q_head > P_MAX || d.q_head * d.s_active > P_MAX {
            return Some(TkgRule::ColumnsFit);
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
