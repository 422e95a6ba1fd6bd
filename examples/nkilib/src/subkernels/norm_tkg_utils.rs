//! What the decode-phase norms (`rmsnorm_tkg`, `layernorm_tkg`) share: the
//! `[128, B·S, H/128]` output layout, the part of it a program works on, and
//! the loads of the rows and of gamma (or beta) into that layout.
//!
//! For `n` hidden shards (`H2 = H/128/n`) element `h` of a row lands in column
//! `c` of partition `p` with `h = (c / H2)·(H/n) + p·H2 + c % H2`; with
//! `hidden_dim_tp` (one shard) `h = c·128 + p`. A program holds `held` shards
//! starting at `first`: all of them, or its own one when the hidden dim is
//! split over the programs (`shard_on_h`). The loads are strided DMAs whose
//! access patterns are these layouts. The kernels' shared rules are
//! [`norm_tkg_violation`], checked at compile time by [`norm_tkg_config!`](crate::norm_tkg_config).

use nki::prelude::*;

pub use helpers::*;

/// Why an `rmsnorm_tkg` or `layernorm_tkg` configuration or shape is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormTkgRule {
    /// `H` is not a multiple of the 128 partitions.
    HiddenTiles,
    /// `B·S` is zero.
    Tokens,
    /// `hidden_actual` is outside `1..=H`.
    HiddenActual,
    /// `eps` is negative or not finite.
    Eps,
    /// `shard_on_h` without a launch of two programs.
    ShardOnHNeedsLnc2,
    /// `shard_on_h` together with `hidden_dim_tp` or `single_core_forced`.
    ShardOnHAlone,
    /// The 128-column tiles of `H` do not split evenly over the hidden shards.
    HiddenShards,
}

impl NormTkgRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            NormTkgRule::HiddenTiles => "H must be a multiple of 128 (the partitions)",
            NormTkgRule::Tokens => "B * S must be positive",
            NormTkgRule::HiddenActual => "hidden_actual must be in 1..=H",
            NormTkgRule::Eps => "eps must be finite and non-negative",
            NormTkgRule::ShardOnHNeedsLnc2 => "shard_on_h needs a launch of 2 programs (LNC2)",
            NormTkgRule::ShardOnHAlone => "shard_on_h is incompatible with hidden_dim_tp and single_core_forced",
            NormTkgRule::HiddenShards => "H / 128 must split evenly over the hidden shards (the LNC size)",
        }
    }
}

/// A tkg norm call: the shape of `input` and the options the rules read
/// (`layernorm_tkg` has no `hidden_actual`, `hidden_dim_tp` or
/// `single_core_forced`: 0 and false).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NormTkgShape {
    /// `B · S`, the token rows.
    pub bxs: i64,
    /// `H`, the (padded) hidden size.
    pub hidden: i64,
    /// `hidden_actual`, 0 for none.
    pub hidden_actual: i64,
    /// `eps`.
    pub eps: f64,
    /// `hidden_dim_tp`.
    pub hidden_dim_tp: bool,
    /// `single_core_forced`.
    pub single_core_forced: bool,
    /// `shard_on_h`.
    pub shard_on_h: bool,
    /// The programs of the launch (its LNC size), 1 without a grid.
    pub programs: i64,
}

/// The hidden shards of the output layout: the LNC size unless
/// `hidden_dim_tp` or `single_core_forced` ask for the single-core layout.
pub const fn hidden_shards(programs: i64, hidden_dim_tp: bool, single_core_forced: bool) -> i64 {
    if hidden_dim_tp || single_core_forced { 1 } else { programs }
}

/// The first rule `c` breaks.
pub const fn norm_tkg_violation(c: NormTkgShape) -> Option<NormTkgRule> {
    if c.hidden <= 0 || c.hidden % H0 != 0 {
        return Some(NormTkgRule::HiddenTiles);
    }
    if c.bxs <= 0 {
        return Some(NormTkgRule::Tokens);
    }
    if c.hidden_actual < 0 || c.hidden_actual > c.hidden {
        return Some(NormTkgRule::HiddenActual);
    }
    if !c.eps.is_finite() || c.eps < 0.0 {
        return Some(NormTkgRule::Eps);
    }
    if c.shard_on_h && c.programs != 2 {
        return Some(NormTkgRule::ShardOnHNeedsLnc2);
    }
    if c.shard_on_h && (c.hidden_dim_tp || c.single_core_forced) {
        return Some(NormTkgRule::ShardOnHAlone);
    }
    if (c.hidden / H0) % hidden_shards(c.programs, c.hidden_dim_tp, c.single_core_forced) != 0 {
        return Some(NormTkgRule::HiddenShards);
    }
    None
}

/// An `rmsnorm_tkg` or `layernorm_tkg` call checked at compile time, or a
/// compile error naming the rule it breaks.
///
/// ```
/// let c = nkilib::norm_tkg_config!(bxs = 16, hidden = 8192, programs = 2);
/// assert_eq!((c.bxs, c.hidden, c.programs), (16, 8192, 2));
/// let c = nkilib::norm_tkg_config!(bxs = 1, hidden = 4096, programs = 1, hidden_actual = 3072, hidden_dim_tp = true);
/// assert!(c.hidden_dim_tp);
/// ```
///
/// ```compile_fail
/// // shard_on_h splits H over the two programs of an LNC2 launch.
/// let c = nkilib::norm_tkg_config!(bxs = 1, hidden = 8192, programs = 1, shard_on_h = true);
/// ```
#[macro_export]
macro_rules! norm_tkg_config {
    (bxs = $b:expr, hidden = $h:expr, programs = $p:expr $(, $field:ident = $v:expr)* $(,)?) => {{
        const CALL: $crate::subkernels::norm_tkg_utils::NormTkgShape = $crate::subkernels::norm_tkg_utils::NormTkgShape {
            bxs: $b,
            hidden: $h,
            programs: $p,
            $($field: $v,)*
            ..$crate::subkernels::norm_tkg_utils::NormTkgShape {
                bxs: 0,
                hidden: 0,
                hidden_actual: 0,
                eps: 1e-6,
                hidden_dim_tp: false,
                single_core_forced: false,
                shard_on_h: false,
                programs: 1,
            }
        };
        const _: () = if let Some(rule) = $crate::subkernels::norm_tkg_utils::norm_tkg_violation(CALL) {
            panic!("{}", rule.message());
        };
        CALL
    }};
}

/// The loads into the layout.
#[nki_module]
pub mod helpers {
    use crate::utils::kernel_helpers::check_hidden_row;
    use nki::prelude::*;

    /// Partitions of the output layout: `H` is spread over them.
    pub const H0: i64 = 128;
    /// Rows per tile: a tile's row sums over the partitions are one matmul
    /// whose moving operand, `[128, rows]` fp32, fills at most one PSUM bank
    /// (512 columns).
    pub const BXS_FULL_TILE_SIZE: i64 = 512;
    /// The dtype of the squares, sums, moments and scaled rows.
    pub const INTER_DTYPE: Dtype = nl::float32;
    /// The DMA queue `shard_on_h` exchanges the partial sums over.
    pub const PIPE_ID: i64 = 0;

    /// Where a program's rows and hidden columns sit: its rows `row0..row0 +
    /// rows` of the `[B·S, H]` input, and the `shards` hidden shards of the
    /// layout, of which it holds `held` starting at `first`.
    #[nki_object]
    pub struct NormTkgPart {
        /// First row of the program.
        pub row0: i64,
        /// Rows of the program.
        pub rows: i64,
        /// Hidden shards of the output layout.
        pub shards: i64,
        /// First hidden shard the program holds.
        pub first: i64,
        /// Hidden shards the program holds (all, or its one with `shard_on_h`).
        pub held: i64,
        /// The `hidden_dim_tp` layout (`h = c·128 + p`).
        pub hidden_dim_tp: bool,
        /// Whether the partial sums are exchanged with the other program.
        pub shard_on_h: bool,
    }

    /// The library's `validate_shapes` (its weight and output part): `gamma`
    /// and `beta` (when given) `[1, H]`, `output` `[128, B·S, H/128]` for the
    /// rows `[B·S, H]` of `input` `[B, S, H]`, which it returns; asserted with
    /// the words of `kernel`.
    #[nki_helper]
    pub fn validate_shapes(kernel: &str, input: Hbm, gamma: Hbm, beta: Option<Hbm>, output: Hbm) -> Hbm {
        let [b, sl, h] = input.shape();
        let (pmax, bxs) = (nl::tile_size::pmax, b * sl);
        check_hidden_row(Some(gamma), kernel, "gamma", h);
        check_hidden_row(beta, kernel, "beta", h);
        let o_shape = output.shape();
        assert!(
            output.ndim() == 3 && o_shape[0] == pmax && o_shape[1] == bxs && o_shape[2] == h / pmax,
            "{kernel}: output must be [128, B*S, H/128] = [128, {bxs}, {}], got {o_shape}",
            h / pmax
        );
        input.reshape([bxs, h])
    }

    /// Whether a launch of `programs` splits `bxs` rows between two programs
    /// (`shard_on_bxs`): more than `threshold` of them, an even count.
    #[nki_helper]
    pub fn splits_rows(bxs: i64, programs: i64, threshold: i64) -> bool {
        programs == 2 && bxs > threshold && bxs % programs == 0
    }

    /// This program's part when the rows are split (`shard_on_bxs`): over a
    /// launch of two `programs` when `split_allowed` and there are more than
    /// `threshold` rows of the `bxs`, an even count (else every row), each
    /// program holding all `shards` hidden shards.
    #[nki_helper]
    pub fn bxs_part(bxs: i64, programs: i64, threshold: i64, split_allowed: bool, shards: i64, hidden_dim_tp: bool) -> NormTkgPart {
        let split = split_allowed && splits_rows(bxs, programs, threshold);
        let rows = if split { bxs / programs } else { bxs };
        let row0 = if split { nl::program_id(0) * rows } else { 0 };
        NormTkgPart { row0, rows, shards, first: 0, held: shards, hidden_dim_tp, shard_on_h: false }
    }

    /// This program's part when the hidden dim is split (`shard_on_h`): every
    /// one of the `bxs` rows on each of the two programs, program `p` holding
    /// hidden shard `p` and exchanging the partial sums.
    #[nki_helper]
    pub fn h_part(bxs: i64) -> NormTkgPart {
        NormTkgPart { row0: 0, rows: bxs, shards: 2, first: nl::program_id(0), held: 1, hidden_dim_tp: false, shard_on_h: true }
    }

    /// Loads rows `row0..row0 + rows` of `src` (`[rows, H]`: the input's rows,
    /// or gamma's one) into `dst` `[128, rows, cols]`: in the `hidden_dim_tp`
    /// layout, or the `held` hidden shards from `first` of a layout of `shards`.
    #[nki_helper]
    pub fn load_input_to_sbuf(src: Hbm, dst: Sbuf, row0: i64, rows: i64, shards: i64, first: i64, held: i64, hidden_dim_tp: bool) {
        let h = src.shape()[1];
        if hidden_dim_tp {
            let h1 = h / H0;
            nisa::dma_copy(dst[s![.., 0..rows, ..]], src.ap([[1, H0], [h, rows], [H0, h1]], offset = row0 * h));
        } else {
            let shard = h / shards;
            let h2 = shard / H0;
            for i in nl::affine_range(held) {
                nisa::dma_copy(
                    dst[s![.., 0..rows, i * h2..(i + 1) * h2]],
                    src.ap([[h2, H0], [h, rows], [1, h2]], offset = row0 * h + (first + i) * shard),
                );
            }
        }
    }

    /// A `[1, H]` weight (gamma or beta) in the layout of
    /// `load_input_to_sbuf`, `[128, 1, cols]`.
    #[nki_helper]
    pub fn load_gamma_to_sbuf(gamma: Hbm, cols: i64, shards: i64, first: i64, held: i64, hidden_dim_tp: bool) -> Sbuf {
        let g = nl::ndarray([H0, 1, cols], gamma.dtype(), buffer = nl::sbuf);
        load_input_to_sbuf(gamma, g, 0, 1, shards, first, held, hidden_dim_tp);
        g
    }
}
