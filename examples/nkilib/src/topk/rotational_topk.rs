//! The NKI library's `rotational_topk`: the `k` largest values of each row of a
//! `[BxS, V]` (or `[B, S, V]`) tensor and their column indices, for
//! vocabulary-sized rows (tens to hundreds of thousands of columns).
//!
//! The Vector Engine finds 8 values per pass (`max8`) over at most 2^14 columns,
//! and a pass costs about as many cycles as it reads. Scanning a whole row `k/8`
//! times is slow for large `V`, so the library folds each row over `n_stages`
//! partitions (`stage_free_size = ceil(V / n_stages)` columns each) and lets the
//! stages pass their best candidates around a ring:
//!
//! ```text
//! per LNC program: rows [prg_id·per_lnc_BxS, +per_lnc_BxS), in tiles of tile_size rows
//! per tile:
//!     values  = folded load: row b, stage s -> partition b·n_stages + s   # [tile·n_stages, chunk + n_stages·lk]
//!     indices = global column of every loaded element (iota)              # fp32
//!     R = block-diagonal cyclic shift: partition p receives partition p+1 of its row
//!     for stage in 0..n_stages:
//!         width = chunk + lk·stage                        # own columns + what arrived so far
//!         value, local = lk rounds of max8 / find_index8 / match_replace8 over values[:, :width]
//!         global = nc_n_gather(indices, local)            # the found columns' global indices
//!         if stage < n_stages - 1:
//!             values[:, width:width+lk]  = Rᵀ·value         # nc_matmul: the found values move one
//!             indices[:, width:width+lk] = Rᵀ·global        # partition along the row's ring
//!     sorted:   flatten [tile·n_stages, lk] -> [tile, n_stages·lk] through HBM, sort it
//!               by max8 rounds (gathering the global indices), store the first k
//!     unsorted: store each row's n_stages groups of lk (padded_k == k)
//! ```
//!
//! What a stage finds is knocked out (the lowest float) where it was, so after `n_stages`
//! stages the candidates have travelled the whole ring and the `lk` values each
//! partition finds last are, together, the row's `padded_k = n_stages·lk` largest.
//!
//! The kernel is the library's `rotational_topk(inp, config)`: `config` is its
//! `RotationalTopkConfig` (the scalar fields, under the library's names), the
//! plan the library's `create_topk_config` + `create_rotational_topk_config`
//! derive from the shape, `k`, `sorted` and the LNC programs. The emitted
//! module's `rotational_topk_config_for(BxS, V, k, sorted, n_prgs)` computes it
//! on the host (a Rust caller uses [`rotational_topk_config`]; the same
//! computation as a `const fn` is [`rotational_topk_plan`], checked at compile
//! time by `rotational_topk_config!`). The kernel recomputes the plan from
//! `inp` and the launch and refuses a config that differs, naming the field:
//! it never trusts one. The plan:
//! - rows are split over the programs (`per_lnc_BxS = ceil(BxS / programs)`,
//!   one program when `BxS == 1`);
//! - `tile_size = per_lnc_BxS` up to 128 rows, else the tile minimising the
//!   library's DVE cost model (`n_tiles · (n_stages passes over the stage +
//!   the sort, penalised by 128 / tile)`);
//! - `n_stages = max(min(128 / tile_size, ceil(k / 8)), ceil(V / 2^14))`,
//!   `lk = ceil(k / n_stages)` rounded up to 8, `padded_k = n_stages·lk`; a
//!   padded `k` forces `sorted`;
//! - one stage falls back to scanning the row `ceil(k / 8)` times; `k == V`
//!   returns the input row as it is with indices `0..V` (as the library does,
//!   unsorted).
//!
//! The library's asserts are the rules: `1 <= k <= V`, the stages fit in the
//! partitions (`n_stages <= 128 / tile_size`), `stage_free_size <= 2^14` and
//! `stage_free_size + n_stages·lk <= 2^14`. The library documents `V` up to
//! 151,936, `k` up to 2,048 and `BxS` up to 1,024.
//!
//! Values are copies (the rotation multiplies by 0 and 1 in fp32), so they are
//! exact; inputs must be finite (`0·inf` is NaN in the rotation's matmul).
//! Padding (the last stage's columns past `V`) holds the
//! library's `-9948.0`. Equal values: the single-stage scan returns them lowest
//! column first; with several stages which of the equal values reach the output,
//! and in which order, follows the ring (stage order, then arrival), as in the
//! library, which documents no order (its own tests check the indices only by
//! gathering the input at them).
//!
//! Deviations, none of them numeric: the config holds the library's scalar
//! fields only (its shapes, dtypes, nested `TopkConfig` and constant cache are
//! read from `inp` or not needed), and the library's own config object, which
//! has these fields too, is accepted as well; `inp` may be `[B, S, V]`; the
//! shift matrix and the global-index table are built in SBUF with `iota`
//! instead of loaded from host-made `.npy` constants; equal values are located
//! with `nc_find_index8` before `nc_match_replace8` (the library's sort does so;
//! its top-k uses `match_replace8`'s `dst_idx`); the last stage's rotation, whose
//! result nothing reads, is skipped; the folded tile is preset to the padding
//! value as a whole, not column range by column range; found values are knocked
//! out with the lowest fp32 (see [`KNOCKED_OUT`]) rather than `-inf`; with
//! `k == V` the rows are copied to a new output rather than the input returned.

use nki::prelude::*;

pub use rotational::*;

/// The kernel with its constants, config bundle and phase helpers.
#[nki_module]
pub mod rotational {
    use crate::max::cascaded_max_utils::{predicated_folded_load_into, rows_and_vocab};
    use nki::prelude::*;

    /// Values one `max8` pass finds (the Vector Engine's ALUs).
    pub const TOPK_PER_STAGE: i64 = 8;
    /// The most elements per partition a `max8` / `nc_match_replace8` searches (2^14).
    pub const MAX_FREE_DIM: i64 = 16384;
    /// The fixed cost of one DVE instruction, in cycles (the library's cost model).
    pub const FIXED_DVE_INST_OVERHEAD: i64 = 144;
    /// SBUF partitions (`nl.tile_size.pmax`).
    pub const P_MAX: i64 = nl::tile_size::pmax;
    /// Columns per rotation matmul (`nl.tile_size.gemm_moving_fmax`).
    pub const MOVING_FMAX: i64 = nl::tile_size::gemm_moving_fmax;
    /// What pads the last stage past `V` (the library's fill, below any bf16 logit it expects).
    pub const FILL_VALUE: f64 = -9948.0;
    /// What a found value is replaced with: the lowest fp32 (the library writes
    /// `-inf`, which the DSL has no literal for; in bf16 this rounds to `-inf`).
    pub const KNOCKED_OUT: f64 = -3.4028234663852886e38;

    /// The library's `RotationalTopkConfig`: the tile plan of one call, its
    /// scalar fields under the library's names and in its order (the shapes,
    /// dtypes, nested `TopkConfig` and constant cache have no counterpart: the
    /// kernel reads them from `inp`). Get it from [`rotational_topk_config_for`]
    /// (the library's `create_topk_config` + `create_rotational_topk_config`);
    /// the kernel refuses a config that is not that plan for its `inp`.
    #[nki_object]
    #[allow(non_snake_case)]
    pub struct RotationalTopkConfig {
        /// Rows (`B·S`).
        pub BxS: i64,
        /// Columns per row (`V`).
        pub vocab_size: i64,
        /// The `k` asked for.
        pub orig_k: i64,
        /// `n_stages · local_top_k_per_stage`, the values the stages find together.
        pub padded_k: i64,
        /// LNC programs the rows are split over (1 when `BxS == 1`).
        pub n_prgs: i64,
        /// The program of the config (always 0: the kernel asks the launch grid).
        pub prg_id: i64,
        /// Rows per program.
        pub per_lnc_BxS: i64,
        /// Values each stage finds (`lk`, a multiple of 8).
        pub local_top_k_per_stage: i64,
        /// Stages (partitions) each row is folded over.
        pub n_stages: i64,
        /// Columns of the row per stage (`chunk`).
        pub stage_free_size: i64,
        /// `n_stages · stage_free_size`, `V` padded to the stages.
        pub padded_vocab_size: i64,
        /// Whether the output is sorted (forced when `k` is padded).
        pub sorted: bool,
        /// Rows per tile.
        pub tile_size: i64,
        /// Tiles per program.
        pub n_bxs_tiles: i64,
    }

    /// The stages a `tile`-row tile folds its rows over: as many as `k / 8` asks
    /// for, within the partitions, and enough that a stage is at most 2^14 wide
    /// (the result may break the partition limit: the caller checks).
    #[nki_helper]
    pub fn stages_for(vocab_size: i64, k: i64, tile: i64) -> i64 {
        let max_n_stages = P_MAX / tile;
        let ideal = k.min(vocab_size).div_ceil(TOPK_PER_STAGE);
        max_n_stages.min(ideal).max(vocab_size.div_ceil(MAX_FREE_DIM))
    }

    /// `lk`: the values each of `n_stages` stages finds, a multiple of 8.
    #[nki_helper]
    pub fn local_k(k: i64, n_stages: i64) -> i64 {
        k.div_ceil(n_stages).div_ceil(TOPK_PER_STAGE) * TOPK_PER_STAGE
    }

    /// The library's DVE cycle estimate for one `tile`-row tile over `n_stages`
    /// stages, or -1 where a stage would exceed 2^14 columns.
    #[nki_helper]
    pub fn dve_cost(vocab_size: i64, k: i64, sorted: bool, tile: i64, n_stages: i64) -> f64 {
        let chunk = vocab_size.div_ceil(n_stages);
        let lk: i64 = local_k(k, n_stages);
        let mut cost = -1.0;
        if chunk <= MAX_FREE_DIM && chunk + n_stages * lk <= MAX_FREE_DIM {
            let padded_k = lk * n_stages;
            let per_stage = lk.div_ceil(TOPK_PER_STAGE) * 2 * (chunk + FIXED_DVE_INST_OVERHEAD);
            cost = (n_stages * per_stage) as f64;
            if sorted || padded_k != k {
                // The sort runs on `tile` of the 128 partitions: the library divides by that share.
                let base = padded_k.div_ceil(TOPK_PER_STAGE) * 2 * (padded_k + FIXED_DVE_INST_OVERHEAD);
                cost = cost + base as f64 / (tile as f64 / P_MAX as f64);
            }
        }
        cost
    }

    /// The tile height (1..=128 rows) with the lowest total cost for `per_lnc`
    /// rows, the first of equal costs; tiles giving one stage are skipped (they
    /// scan). If none fits, the library's fallback `max(16, ceil(128 / min stages))`.
    #[nki_helper]
    pub fn optimal_tile_size(vocab_size: i64, k: i64, sorted: bool, per_lnc: i64) -> i64 {
        let mut best = 0;
        let mut best_cost = 0.0;
        for tile in 1..P_MAX + 1 {
            let n_stages: i64 = stages_for(vocab_size, k, tile);
            if n_stages <= P_MAX / tile && n_stages > 1 {
                let cost: f64 = dve_cost(vocab_size, k, sorted, tile, n_stages);
                let total = per_lnc.div_ceil(tile) as f64 * cost;
                if cost >= 0.0 && (best == 0 || total < best_cost) {
                    best = tile;
                    best_cost = total;
                }
            }
        }
        if best == 0 {
            best = 16.max(P_MAX.div_ceil(vocab_size.div_ceil(MAX_FREE_DIM)));
        }
        best
    }

    /// The library's `RotationalTopkConfig` for `bxs` rows of `vocab_size`
    /// columns, `k`, `sorted` and `n_prgs` LNC programs (its
    /// `create_rotational_topk_config(shape, create_topk_config(shape, dtype, k,
    /// sorted, n_prgs))`), refusing the library's asserts: `1 <= k <= V`, the
    /// stages fit beside the tile's rows, a stage and the candidates it receives
    /// fit in 2^14 columns. Plain integer arithmetic: the host calls it to build
    /// the kernel's `config`, and the kernel to check the one it is given.
    #[nki_helper]
    pub fn rotational_topk_config_for(bxs: i64, vocab_size: i64, k: i64, sorted: bool, n_prgs: i64) -> RotationalTopkConfig {
        assert!(bxs >= 1, "rotational_topk: BxS must be at least 1, got {bxs}");
        assert!(n_prgs >= 1, "rotational_topk: n_prgs must be at least 1, got {n_prgs}");
        assert!(k >= 1 && k <= vocab_size, "rotational_topk: k must be within 1..=V = {vocab_size}, got k = {k}");
        // One row is never split over programs.
        let programs = if bxs == 1 { 1 } else { n_prgs };
        let per_lnc_bxs = bxs.div_ceil(programs);
        let tile_size: i64 = if per_lnc_bxs > P_MAX { optimal_tile_size(vocab_size, k, sorted, per_lnc_bxs) } else { per_lnc_bxs };
        let n_stages: i64 = stages_for(vocab_size, k, tile_size);
        assert!(
            n_stages <= P_MAX / tile_size,
            "rotational_topk: inp: V = {vocab_size} needs {n_stages} stages of at most 2^14 columns but only {} fit beside {tile_size} rows per tile",
            P_MAX / tile_size
        );
        let lk: i64 = local_k(k, n_stages);
        let chunk = vocab_size.div_ceil(n_stages);
        assert!(
            chunk + n_stages * lk <= MAX_FREE_DIM,
            "rotational_topk: k = {k}: a stage's {chunk} columns plus the {n_stages}·{lk} candidates it receives exceed 2^14"
        );
        RotationalTopkConfig {
            BxS: bxs,
            vocab_size,
            orig_k: k,
            padded_k: lk * n_stages,
            n_prgs: programs,
            prg_id: 0,
            per_lnc_BxS: per_lnc_bxs,
            local_top_k_per_stage: lk,
            n_stages,
            stage_free_size: chunk,
            padded_vocab_size: chunk * n_stages,
            sorted: sorted || lk * n_stages != k,
            tile_size,
            n_bxs_tiles: per_lnc_bxs.div_ceil(tile_size),
        }
    }

    /// The `k` largest values of each partition of `data` (an SBUF tile it
    /// knocks them out of, see [`KNOCKED_OUT`]), descending, and their columns (`uint32`):
    /// `ceil(k / 8)` rounds of `max8`, `nc_find_index8`, `nc_match_replace8`;
    /// equal values are located lowest column first.
    #[nki_helper]
    pub fn topk_core(data: Sbuf, k: i64) -> (Sbuf, Sbuf) {
        let [rows, _] = data.shape();
        let out_vals = nl::ndarray([rows, k], data.dtype(), buffer = nl::sbuf);
        let out_inds = nl::ndarray([rows, k], nl::uint32, buffer = nl::sbuf);
        let n_fold = k.div_ceil(TOPK_PER_STAGE);
        let rem = k % TOPK_PER_STAGE;
        for fold in 0..n_fold {
            if rem != 0 && fold == n_fold - 1 {
                // The last, partial round: the first `rem` of 8, nothing to knock out after it.
                let val_buf = nl::ndarray([rows, TOPK_PER_STAGE], data.dtype(), buffer = nl::sbuf);
                let ind_buf = nl::ndarray([rows, TOPK_PER_STAGE], nl::uint32, buffer = nl::sbuf);
                nisa::max8(val_buf, data);
                nisa::nc_find_index8(ind_buf, data, val_buf);
                nisa::tensor_copy(out_vals[s![.., k - rem..k]], val_buf[s![.., 0..rem]]);
                nisa::tensor_copy(out_inds[s![.., k - rem..k]], ind_buf[s![.., 0..rem]]);
            } else {
                let cols = nl::ds(fold * TOPK_PER_STAGE, TOPK_PER_STAGE);
                nisa::max8(out_vals[s![.., cols]], data);
                nisa::nc_find_index8(out_inds[s![.., cols]], data, out_vals[s![.., cols]]);
                nisa::nc_match_replace8(data, data, out_vals[s![.., cols]], KNOCKED_OUT);
            }
        }
        (out_vals, out_inds)
    }

    /// `k == V`: the rows as they are, with indices `0..V` (the library returns
    /// its input unsorted in this case).
    #[nki_helper]
    pub fn identity_topk(cfg: RotationalTopkConfig, x: Hbm, values: Hbm, indices: Hbm) {
        let k = cfg.orig_k;
        nisa::dma_copy(values, x);
        let tile_rows = cfg.BxS.min(P_MAX);
        let idx = nl::ndarray([tile_rows, k], nl::uint32, buffer = nl::sbuf);
        nisa::iota(idx, [[1, k]]);
        for t in 0..cfg.BxS.div_ceil(tile_rows) {
            let r0 = t * tile_rows;
            let rows = (cfg.BxS - r0).min(tile_rows);
            nisa::dma_copy(indices[s![r0..r0 + rows, ..]], idx[s![0..rows, ..]]);
        }
    }

    /// One stage: the library's scan of whole rows, `tile_size = min(per_lnc_BxS, 128)`
    /// rows at a time, short tiles padded with the dtype's fill.
    #[nki_helper]
    pub fn scanning_topk(cfg: RotationalTopkConfig, x: Hbm, values: Hbm, indices: Hbm, start: i64) {
        let tile = cfg.per_lnc_BxS.min(P_MAX);
        // The library pads bf16 with its fill and other dtypes with the lowest fp32.
        let fill = if x.dtype() == nl::bfloat16 { FILL_VALUE } else { f32::MIN };
        let end = (start + cfg.per_lnc_BxS).min(cfg.BxS);
        for t in nl::sequential_range(cfg.per_lnc_BxS.div_ceil(tile)) {
            let r0 = start + t * tile;
            let rows = (end - r0).min(tile);
            let data = nl::ndarray([tile, cfg.vocab_size], x.dtype(), buffer = nl::sbuf);
            if rows < tile {
                nisa::memset(data, fill);
            }
            nisa::dma_copy(data[s![0..rows, ..]], x[s![r0..r0 + rows, ..]]);
            let (vals, inds) = topk_core(data, cfg.orig_k);
            nisa::dma_copy(values[s![r0..r0 + rows, ..]], vals[s![0..rows, ..]]);
            nisa::dma_copy(indices[s![r0..r0 + rows, ..]], inds[s![0..rows, ..]]);
        }
    }

    /// The block-diagonal cyclic shift `R` (`[P, P]` fp32, `P = tile·n_stages`):
    /// `R[p, m] = 1` where `p` is the stage after `m` in the same row
    /// (`m - m % n + (m + 1) % n`), so `Rᵀ·t` moves partition `m + 1` to `m`.
    #[nki_helper]
    pub fn shift_matrix(n_stages: i64, parts: i64) -> Sbuf {
        let col = nl::ndarray([parts, parts], nl::float32, buffer = nl::sbuf);
        nisa::iota(col, [[1, parts]]);
        let target = nl::ndarray([parts, parts], nl::float32, buffer = nl::sbuf);
        nisa::tensor_scalar(target, col, nl::add, 1.0, op1 = nl::r#mod, operand1 = n_stages as f64);
        let own = nl::ndarray([parts, parts], nl::float32, buffer = nl::sbuf);
        nisa::tensor_scalar(own, col, nl::r#mod, n_stages as f64);
        nisa::tensor_tensor(target, target, own, nl::subtract);
        nisa::tensor_tensor(target, target, col, nl::add);
        let row = nl::ndarray([parts, parts], nl::float32, buffer = nl::sbuf);
        nisa::iota(row, [[0, parts]], channel_multiplier = 1);
        let shift = nl::ndarray([parts, parts], nl::float32, buffer = nl::sbuf);
        nisa::tensor_tensor(shift, row, target, nl::equal);
        shift
    }

    /// `dst = Rᵀ·src` per [`MOVING_FMAX`] columns on the Tensor Engine.
    #[nki_helper]
    pub fn rotate(dst: Psum, src: Sbuf, shift: Sbuf) {
        let [_, width] = src.shape();
        for i in 0..width.div_ceil(MOVING_FMAX) {
            let c0 = i * MOVING_FMAX;
            let cols = (width - c0).min(MOVING_FMAX);
            nisa::nc_matmul(dst[s![.., c0..c0 + cols]], shift, src[s![.., c0..c0 + cols]]);
        }
    }

    /// The stages of one tile of `rows` rows from `r0`: each row's `lk` values
    /// per stage (`[tile·n_stages, lk]`, in `x`'s dtype) and their global
    /// columns (fp32), which together are the row's `padded_k` largest.
    #[nki_helper]
    pub fn rotated_core(cfg: RotationalTopkConfig, x: Hbm, shift: Sbuf, shift_x: Sbuf, r0: i64, rows: i64) -> (Sbuf, Sbuf) {
        let (n, chunk, lk) = (cfg.n_stages, cfg.stage_free_size, cfg.local_top_k_per_stage);
        let parts = cfg.tile_size * n;
        let width = chunk + n * lk;
        let values = nl::ndarray([parts, width], x.dtype(), buffer = nl::sbuf);
        // Stage `s` of row `b` on partition `b·n_stages + s`; the columns
        // past the stage (where the rotation lands) hold the fill too.
        predicated_folded_load_into(x, n, values, r0, rows, FILL_VALUE);
        // Global column of partition p, column j: (p % n)·chunk + j.
        let indices = nl::ndarray([parts, width], nl::float32, buffer = nl::sbuf);
        nisa::memset(indices, 0.0);
        nisa::iota(indices[s![.., 0..chunk]], [[1, chunk]], channel_multiplier = chunk);
        nisa::tensor_scalar(indices[s![.., 0..chunk]], indices[s![.., 0..chunk]], nl::r#mod, (n * chunk) as f64);
        let value = nl::ndarray([parts, lk], x.dtype(), buffer = nl::sbuf);
        let columns = nl::ndarray([parts, lk], nl::float32, buffer = nl::sbuf);
        for stage in 0..n {
            let offset = chunk + lk * stage;
            let (found, local) = topk_core(values[s![.., 0..offset]], lk);
            nisa::tensor_copy(value, found);
            nisa::nc_n_gather(columns, indices, local);
            if stage < n - 1 {
                let moved = nl::ndarray([parts, lk], nl::float32, buffer = nl::psum);
                let moved_index = nl::ndarray([parts, lk], nl::float32, buffer = nl::psum);
                rotate(moved_index, columns, shift);
                rotate(moved, value, shift_x);
                nisa::tensor_copy(values[s![.., offset..offset + lk]], moved);
                nisa::tensor_copy(indices[s![.., offset..offset + lk]], moved_index);
            }
        }
        (value, columns)
    }

    /// `[tile·n_stages, cols]` to `[tile, n_stages·cols]` (each row's stages side
    /// by side) through a private HBM buffer.
    #[nki_helper]
    pub fn unfold(src: Sbuf, n_stages: i64) -> Sbuf {
        let [parts, cols] = src.shape();
        let scratch = nl::ndarray([parts, cols], src.dtype(), buffer = nl::private_hbm);
        nisa::dma_copy(scratch, src);
        let out = nl::ndarray([parts / n_stages, n_stages * cols], src.dtype(), buffer = nl::sbuf);
        nisa::dma_copy(out, scratch.reshape([parts / n_stages, n_stages * cols]));
        out
    }

    /// Sorts each partition of `data` descending by `max8` rounds (knocking the
    /// found values out), carrying the `uint32` labels `labels` along.
    #[nki_helper]
    pub fn sort(data: Sbuf, labels: Sbuf) -> (Sbuf, Sbuf) {
        let [m, width] = data.shape();
        let vals = nl::ndarray([m, width], data.dtype(), buffer = nl::sbuf);
        let pos = nl::ndarray([m, width], nl::uint32, buffer = nl::sbuf);
        let out = nl::ndarray([m, width], nl::uint32, buffer = nl::sbuf);
        for step in nl::sequential_range(width / TOPK_PER_STAGE) {
            let cols = nl::ds(step * TOPK_PER_STAGE, TOPK_PER_STAGE);
            nisa::max8(vals[s![.., cols]], data);
            nisa::nc_find_index8(pos[s![.., cols]], data, vals[s![.., cols]]);
            nisa::nc_match_replace8(data, data, vals[s![.., cols]], KNOCKED_OUT);
            nisa::nc_n_gather(out[s![.., cols]], labels, pos[s![.., cols]]);
        }
        (vals, out)
    }

    /// `config.<field>` must be the plan's value of it.
    #[nki_helper]
    fn check_planned(field: &str, given: i64, planned: i64) {
        assert!(given == planned, "rotational_topk: config.{field} = {given}, the plan for inp [BxS, V], orig_k, n_prgs is {planned}");
    }

    /// The `k = config.orig_k` largest values of each row of `inp` (`[BxS, V]`
    /// or `[B, S, V]`, float32 or bfloat16) along its last dimension and their
    /// column indices (`uint32`), shaped like `inp` with `k` for `V`.
    /// `config.sorted` orders each row descending (the plan forces it when `k`
    /// is padded to the stages); otherwise each row holds its stages' groups of
    /// candidates.
    ///
    /// `config` is the library's `RotationalTopkConfig`, as
    /// [`rotational_topk_config_for`] computes it for `inp`'s shape, `k`,
    /// `sorted` and the launch's LNC programs; a config that is not that plan
    /// is refused naming the first field that differs. Rows are split over the
    /// LNC programs; see the module docs for the stages.
    #[nki_kernel]
    pub fn rotational_topk(#[dtypes(float32, bfloat16)] inp: Hbm, config: RotationalTopkConfig) -> (Hbm, Hbm) {
        let (bxs, vocab_size): (i64, i64) = rows_and_vocab(inp, "rotational_topk", "inp must be [BxS, V] or [B, S, V]");
        let (rank, shape) = (inp.ndim(), inp.shape());
        let k = config.orig_k;
        assert!(config.BxS == bxs, "rotational_topk: config.BxS = {} disagrees with inp, which has {bxs} rows", config.BxS);
        assert!(
            config.vocab_size == vocab_size,
            "rotational_topk: config.vocab_size = {} disagrees with inp, whose rows have {vocab_size} columns",
            config.vocab_size
        );
        assert!(k >= 1 && k <= vocab_size, "rotational_topk: config.orig_k = {k} must be within 1..=V = {vocab_size}");
        let grid = nl::program_ndim() == 1;
        let programs = if grid { nl::num_programs(0) } else { 1 };
        let program = if grid { nl::program_id(0) } else { 0 };
        // One row is never split: both programs compute it.
        let n_prgs = if bxs == 1 { 1 } else { programs };
        let prg_id = if bxs == 1 { 0 } else { program };
        assert!(
            config.n_prgs == n_prgs,
            "rotational_topk: config.n_prgs = {} disagrees with the launch, which runs {n_prgs} program(s) over {bxs} rows",
            config.n_prgs
        );
        // The plan the config must be. A config forced sorted (sorted=False, k
        // padded) is the sorted=True plan: the tile it was given costs the same
        // under both flags and no tile costs less with the sort counted.
        let plan: RotationalTopkConfig = rotational_topk_config_for(bxs, vocab_size, k, config.sorted, n_prgs);
        assert!(config.prg_id == 0, "rotational_topk: config.prg_id = {} must be 0 (the program comes from the launch)", config.prg_id);
        check_planned("per_lnc_BxS", config.per_lnc_BxS, plan.per_lnc_BxS);
        check_planned("tile_size", config.tile_size, plan.tile_size);
        check_planned("n_bxs_tiles", config.n_bxs_tiles, plan.n_bxs_tiles);
        check_planned("n_stages", config.n_stages, plan.n_stages);
        check_planned("local_top_k_per_stage", config.local_top_k_per_stage, plan.local_top_k_per_stage);
        check_planned("padded_k", config.padded_k, plan.padded_k);
        check_planned("stage_free_size", config.stage_free_size, plan.stage_free_size);
        check_planned("padded_vocab_size", config.padded_vocab_size, plan.padded_vocab_size);
        assert!(
            config.sorted == plan.sorted,
            "rotational_topk: config.sorted = {}: k = {k} is padded to {}, which forces sorted",
            config.sorted,
            plan.padded_k
        );
        let start = prg_id * config.per_lnc_BxS;
        let x = inp.reshape([bxs, vocab_size]);
        let topk_values = if rank == 3 {
            nl::ndarray([shape[0], shape[1], k], inp.dtype(), buffer = nl::shared_hbm)
        } else {
            nl::ndarray([bxs, k], inp.dtype(), buffer = nl::shared_hbm)
        };
        let topk_indices = if rank == 3 {
            nl::ndarray([shape[0], shape[1], k], nl::uint32, buffer = nl::shared_hbm)
        } else {
            nl::ndarray([bxs, k], nl::uint32, buffer = nl::shared_hbm)
        };
        let values = topk_values.reshape([bxs, k]);
        let indices = topk_indices.reshape([bxs, k]);
        if k == vocab_size {
            identity_topk(config, x, values, indices);
        } else if config.n_stages == 1 {
            scanning_topk(config, x, values, indices, start);
        } else {
            let (n, lk) = (config.n_stages, config.local_top_k_per_stage);
            let parts = config.tile_size * n;
            let shift = shift_matrix(n, parts);
            let shift_x = nl::ndarray([parts, parts], inp.dtype(), buffer = nl::sbuf);
            nisa::tensor_copy(shift_x, shift);
            let end = (start + config.per_lnc_BxS).min(bxs);
            for t in nl::sequential_range(config.n_bxs_tiles) {
                let r0 = start + t * config.tile_size;
                let rows = (end - r0).min(config.tile_size);
                let (value, found_at) = rotated_core(config, x, shift, shift_x, r0, rows);
                let global_int = nl::ndarray([parts, lk], nl::uint32, buffer = nl::sbuf);
                nisa::tensor_copy(global_int, found_at);
                if config.sorted {
                    let (sorted_val, sorted_idx) = sort(unfold(value, n), unfold(global_int, n));
                    nisa::dma_copy(values[s![r0..r0 + rows, ..]], sorted_val[s![0..rows, 0..k]]);
                    nisa::dma_copy(indices[s![r0..r0 + rows, ..]], sorted_idx[s![0..rows, 0..k]]);
                } else {
                    // padded_k == k: row b's stages are its k outputs, group by group.
                    let folded_values = values.reshape([bxs * n, lk]);
                    let folded_indices = indices.reshape([bxs * n, lk]);
                    nisa::dma_copy(folded_values[s![r0 * n..(r0 + rows) * n, ..]], value[s![0..rows * n, ..]]);
                    nisa::dma_copy(folded_indices[s![r0 * n..(r0 + rows) * n, ..]], global_int[s![0..rows * n, ..]]);
                }
            }
        }
        (topk_values, topk_indices)
    }
}

/// Why a `rotational_topk` call is refused (the library's asserts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopkRule {
    /// `k` is not in `1..=V`.
    K,
    /// `V` needs more stages of at most 2^14 columns than fit beside the tile's rows.
    StagesDoNotFit,
    /// A stage's columns plus the candidates it receives exceed 2^14.
    StageTooWide,
}

impl TopkRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            TopkRule::K => "rotational_topk: k must be within 1..=V",
            TopkRule::StagesDoNotFit => "rotational_topk: V needs more stages of at most 2^14 columns than fit in 128 partitions",
            TopkRule::StageTooWide => "rotational_topk: a stage's columns plus the n_stages·lk candidates it receives exceed 2^14",
        }
    }
}

/// The derived fields of the library's `RotationalTopkConfig` for one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RotationalPlan {
    /// Rows per program.
    pub per_lnc_bxs: i64,
    /// Rows per tile.
    pub tile_size: i64,
    /// Tiles per program.
    pub n_bxs_tiles: i64,
    /// Stages each row is folded over (1: the row is scanned).
    pub n_stages: i64,
    /// Values each stage finds (a multiple of 8).
    pub local_top_k_per_stage: i64,
    /// `n_stages · local_top_k_per_stage`.
    pub padded_k: i64,
    /// Columns per stage.
    pub stage_free_size: i64,
    /// Whether the output is sorted (forced when `padded_k != k`).
    pub sorted: bool,
}

/// [`stages_for`] as a `const fn`.
const fn stages(vocab: i64, k: i64, tile: i64) -> i64 {
    let max_n = P_MAX / tile;
    let ideal = div_ceil(if k < vocab { k } else { vocab }, TOPK_PER_STAGE);
    let n = if max_n < ideal { max_n } else { ideal };
    let min_hw = div_ceil(vocab, MAX_FREE_DIM);
    if n > min_hw { n } else { min_hw }
}

const fn div_ceil(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}

/// [`local_k`] as a `const fn`.
const fn local_k_of(k: i64, n_stages: i64) -> i64 {
    div_ceil(div_ceil(k, n_stages), TOPK_PER_STAGE) * TOPK_PER_STAGE
}

/// [`dve_cost`] as a `const fn` (`None` where a stage is too wide).
const fn cost(vocab: i64, k: i64, sorted: bool, tile: i64, n: i64) -> Option<f64> {
    let chunk = div_ceil(vocab, n);
    let lk = local_k_of(k, n);
    if chunk > MAX_FREE_DIM || chunk + n * lk > MAX_FREE_DIM {
        return None;
    }
    let padded_k = lk * n;
    let unsorted = (n * (div_ceil(lk, TOPK_PER_STAGE) * 2 * (chunk + FIXED_DVE_INST_OVERHEAD))) as f64;
    if sorted || padded_k != k {
        let base = div_ceil(padded_k, TOPK_PER_STAGE) * 2 * (padded_k + FIXED_DVE_INST_OVERHEAD);
        Some(unsorted + base as f64 / (tile as f64 / P_MAX as f64))
    } else {
        Some(unsorted)
    }
}

/// [`optimal_tile_size`] as a `const fn`.
const fn best_tile(vocab: i64, k: i64, sorted: bool, per_lnc: i64) -> i64 {
    let (mut best, mut best_cost, mut tile) = (0, 0.0, 1);
    while tile <= P_MAX {
        let n = stages(vocab, k, tile);
        if n <= P_MAX / tile
            && n > 1
            && let Some(c) = cost(vocab, k, sorted, tile, n)
        {
            let total = div_ceil(per_lnc, tile) as f64 * c;
            if best == 0 || total < best_cost {
                best = tile;
                best_cost = total;
            }
        }
        tile += 1;
    }
    if best != 0 {
        best
    } else {
        let m = div_ceil(P_MAX, div_ceil(vocab, MAX_FREE_DIM));
        if m > 16 { m } else { 16 }
    }
}

/// The library's `RotationalTopkConfig` for `bxs` rows of `vocab` columns,
/// `k`, `sorted` and `programs` LNC programs, or the first rule the call breaks
/// (the kernel computes the same when it is traced).
pub const fn rotational_topk_plan(bxs: i64, vocab: i64, k: i64, sorted: bool, programs: i64) -> Result<RotationalPlan, TopkRule> {
    if k < 1 || k > vocab || bxs < 1 || programs < 1 {
        return Err(TopkRule::K);
    }
    let per_lnc_bxs = div_ceil(bxs, if bxs == 1 { 1 } else { programs });
    let tile_size: i64 = if per_lnc_bxs > P_MAX { best_tile(vocab, k, sorted, per_lnc_bxs) } else { per_lnc_bxs };
    let n_stages = stages(vocab, k, tile_size);
    if n_stages > P_MAX / tile_size {
        return Err(TopkRule::StagesDoNotFit);
    }
    let lk = local_k_of(k, n_stages);
    let chunk = div_ceil(vocab, n_stages);
    if chunk + n_stages * lk > MAX_FREE_DIM {
        return Err(TopkRule::StageTooWide);
    }
    Ok(RotationalPlan {
        per_lnc_bxs,
        tile_size,
        n_bxs_tiles: div_ceil(per_lnc_bxs, tile_size),
        n_stages,
        local_top_k_per_stage: lk,
        padded_k: lk * n_stages,
        stage_free_size: chunk,
        sorted: sorted || lk * n_stages != k,
    })
}

/// The kernel's `config` for `bxs` rows of `vocab` columns, `k`, `sorted` and
/// `programs` LNC programs (the launch's): [`rotational_topk_plan`] as the
/// library's `RotationalTopkConfig`, or the first rule the call breaks.
pub fn rotational_topk_config(bxs: i64, vocab: i64, k: i64, sorted: bool, programs: i64) -> Result<RotationalTopkConfig, TopkRule> {
    let plan = rotational_topk_plan(bxs, vocab, k, sorted, programs)?;
    Ok(RotationalTopkConfig {
        BxS: bxs,
        vocab_size: vocab,
        orig_k: k,
        padded_k: plan.padded_k,
        n_prgs: if bxs == 1 { 1 } else { programs },
        prg_id: 0,
        per_lnc_BxS: plan.per_lnc_bxs,
        local_top_k_per_stage: plan.local_top_k_per_stage,
        n_stages: plan.n_stages,
        stage_free_size: plan.stage_free_size,
        padded_vocab_size: plan.stage_free_size * plan.n_stages,
        sorted: plan.sorted,
        tile_size: plan.tile_size,
        n_bxs_tiles: plan.n_bxs_tiles,
    })
}

/// A `rotational_topk` call checked at compile time:
/// `rotational_topk_config!(bxs = 8, vocab = 151936, k = 256, sorted = true, programs = 2)`
/// is its [`RotationalPlan`], or a compile error naming the rule it breaks.
///
/// ```
/// let plan = nkilib::rotational_topk_config!(bxs = 1, vocab = 151936, k = 256, sorted = true, programs = 2);
/// assert_eq!((plan.n_stages, plan.local_top_k_per_stage, plan.stage_free_size), (32, 8, 4748));
/// ```
///
/// ```compile_fail
/// // 64 rows per tile leave room for 2 stages of 2^14 columns; V = 40000 needs 3.
/// let plan = nkilib::rotational_topk_config!(bxs = 64, vocab = 40000, k = 8, sorted = true, programs = 1);
/// ```
#[macro_export]
macro_rules! rotational_topk_config {
    (bxs = $b:expr, vocab = $v:expr, k = $k:expr, sorted = $s:expr, programs = $p:expr) => {{
        const PLAN: $crate::topk::rotational_topk::RotationalPlan =
            match $crate::topk::rotational_topk::rotational_topk_plan($b, $v, $k, $s, $p) {
                Ok(plan) => plan,
                Err(rule) => panic!("{}", rule.message()),
            };
        PLAN
    }};
}
