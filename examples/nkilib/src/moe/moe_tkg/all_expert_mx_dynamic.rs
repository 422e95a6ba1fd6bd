//! The all-expert path with MX weights in its dynamic form (trn3): the
//! library's `_all_expert_mx_dynamic`, which computes each local expert only
//! on the blocks of tokens routed to it, with the projections of the static
//! form ([`all_expert_mx_impl`](crate::moe::moe_tkg::all_expert_mx_impl)).
//!
//! Per expert, `nonzero_with_count` compacts the positions of the tokens
//! whose masked affinity is nonzero (the rest padded with -1) and counts
//! them. The compacted positions are cut into blocks of `block_size`
//! tokens: the first block is always computed (traced), the others in a
//! loop on the device that runs while the next block starts below the
//! count (a register loaded from a decision vector after each block). A
//! block gathers its tokens' hidden rows and affinities with indirect DMAs
//! and scatters its output rows back to the same tokens; the padding
//! positions (-1) are out of bounds, so those rows are skipped:
//!
//! ```text
//! aff = mask_expert_affinities                      [T, E_L]
//! output[:, half_p] = 0                             # tokens routed to no expert
//! for e in 0..E_L:                                  # E_L = 1, as the library
//!   idx, count = nonzero_with_count(aff[:, e])      [T] positions, -1 padded
//!   decision[k] = N_STATIC_BLOCKS·bs + k·bs < count
//!   for b in 0..N_STATIC_BLOCKS:       block(idx[b·bs ..])
//!   k = 0; while decision[k]:          block(idx[(N_STATIC_BLOCKS + k)·bs ..]); k += 1
//!
//! block(ids):                                        bs tokens, in tiles of 128
//!   x = hidden[ids]                                  # gather, -1 skipped (rows 0)
//!   xq, xs = quantize_mx(pre-shuffled x)             [128, H/512, bs]
//!   o = act(gate) · up, down projection, + b_down    [128, H/128, bs] bf16 (static form's)
//!   o = o · aff[ids, e]                              # bf16
//!   (shard_on_I) o[:, half_p] += the other program's o[:, half_p]
//!   output[ids, half_p] = o[:, half_p]ᵀ              # scatter, -1 skipped
//! ```
//!
//! LNC2 splits `I` as the static form does, and the two programs exchange
//! their halves of each block (both run the same blocks: the routing is
//! the same). With one local expert each routed token's output is the
//! static form's exactly; a token no expert takes keeps the zero written
//! first (the library leaves its row as the output held it).
//!
//! Where this differs from the library's code: the library moves the
//! block's positions onto the partitions with Tensor Engine transposes in
//! float32 and loads the hidden rows interleaved for its swizzle; here DMAs
//! move them, and the gathered rows go through private HBM into the static
//! form's layout adapter. The library keeps the dynamic blocks' positions in
//! shared HBM (each program writing half, then a barrier); here each
//! program writes all of them to its private HBM. The library's decision
//! vector starts at `N_STATIC_BLOCKS·bs + 1`, so a dynamic block holding
//! only one routed token (the count one past a block boundary) is skipped
//! and that token's row left unwritten; here a block runs when it holds
//! any routed token.

pub use kernel::*;

/// The MX all-expert dynamic strategy.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_parameters::H0;
    use crate::mlp::mlp_tkg::mlp_tkg_mx::{layout_adapter_mx, quantize_hidden_mx};
    use crate::mlp::mlp_tkg::projection_mx_constants::{ProjConfig, proj_config};
    use crate::moe::moe_tkg::all_expert_mx_impl::{
        AllExpertMxDims, ExpertWeightsMx, all_expert_mx_dims, compute_expert_mlp_mx, load_expert_mx, masked_affinities_hbm,
        reduce_and_store_output, scale_and_accumulate,
    };
    use crate::moe::moe_tkg::moe_tkg_utils::{MoeTkgOptions, MoeTkgTensors};
    use nki::prelude::*;

    /// Blocks always computed before the loop on the device (the library's
    /// `_NUM_DYNAMIC_ALGO_STATIC_BLOCKS`).
    pub const N_STATIC_BLOCKS: i64 = 1;
    /// The padding of `nonzero_with_count`: an out-of-bounds row, which the
    /// gathers and scatters skip.
    pub const NONZERO_WITH_COUNT_PAD_VAL: i64 = -1;
    /// Tokens of a block per gather/scatter tile (they sit on partitions).
    pub const BLK_TILE_T: i64 = nl::tile_size::pmax;

    /// The library's `AllExpertMXDynamismConfig`: the blocks of `T` tokens.
    #[nki_object]
    pub struct AllExpertMxDynamismConfig {
        /// Tokens `T`.
        pub t: i64,
        /// Tokens per block.
        pub block_size: i64,
        /// Blocks after the static ones: `T / block_size - N_STATIC_BLOCKS`.
        pub n_dynamic_blocks: i64,
        /// Partitions of a gather tile, `min(block_size, 128)`.
        pub blk_tile_t: i64,
        /// Gather tiles per block.
        pub blk_n_t_tiles: i64,
    }

    /// The blocks of `t` tokens in blocks of `block_size` (which divides
    /// `t` into at least two blocks; checked by the kernel's rules).
    #[nki_helper]
    pub fn all_expert_mx_dynamism_config(t: i64, block_size: i64) -> AllExpertMxDynamismConfig {
        AllExpertMxDynamismConfig {
            t,
            block_size,
            n_dynamic_blocks: t / block_size - N_STATIC_BLOCKS,
            blk_tile_t: block_size.min(BLK_TILE_T),
            blk_n_t_tiles: block_size.div_ceil(BLK_TILE_T),
        }
    }

    /// Where a block's results go: the masked affinities `[T, E_L]`, the
    /// output `[T, H]`, this program's half of the columns and the columns
    /// its down bias covers.
    #[nki_object]
    pub struct AllExpertMxBlockIo {
        /// This rank's masked affinities in private HBM.
        pub aff: Tensor,
        /// The kernel's output.
        pub output: Tensor,
        /// This program's half of the output columns (all on one program).
        pub half: ProjConfig,
        /// The columns of the down bias this program adds.
        pub bias_cols: ProjConfig,
    }

    /// The library's `_find_expert_routed_tokens`: `[128, T + 1]` whose
    /// partition 0 holds the positions of the tokens with a nonzero
    /// affinity for expert `e` (then -1s, then their count), and the
    /// decision vector `[1, n_dynamic_blocks + 1]`: 1 where dynamic block
    /// `k` starts below the count (the last always 0, ending the loop).
    #[nki_helper]
    pub fn find_expert_routed_tokens(aff: Hbm, e: i64, cfg: AllExpertMxDynamismConfig) -> (Sbuf, Sbuf) {
        let (t, e_l) = (cfg.t, aff.shape()[1]);
        let pmax = nl::tile_size::pmax;
        // `nonzero_with_count` reads partitions 0, 16, ..: the others zero.
        let aff_t = nl::ndarray([pmax, t], nl::float32, buffer = nl::sbuf);
        nisa::memset(aff_t, 0.0);
        nisa::dma_copy(aff_t[s![0..1, ..]], aff.ap([[t * e_l, 1], [e_l, t]], offset = e));
        let routed = nl::ndarray([pmax, t + 1], nl::int32, buffer = nl::sbuf);
        nisa::nonzero_with_count(routed, aff_t, padding_val = NONZERO_WITH_COUNT_PAD_VAL);
        let count = nl::ndarray([1, 1], nl::float32, buffer = nl::sbuf);
        nisa::tensor_copy(count, routed[s![0..1, t..t + 1]]);
        let n = cfg.n_dynamic_blocks + 1;
        let decision = nl::ndarray([1, n], nl::int32, buffer = nl::sbuf);
        nisa::iota(decision, [[cfg.block_size, n]], offset = N_STATIC_BLOCKS * cfg.block_size);
        nisa::tensor_scalar(decision, decision, nl::less, count);
        (routed, decision)
    }

    /// The library's `_init_dynamic_block_indices_hbm`: the dynamic blocks'
    /// positions `[n_dynamic_blocks, block_size]` and the decision vector
    /// in private HBM, for the loop's indirect loads.
    #[nki_helper]
    pub fn init_dynamic_block_indices_hbm(routed: Sbuf, decision: Sbuf, cfg: AllExpertMxDynamismConfig) -> (Hbm, Hbm) {
        let (bs, n) = (cfg.block_size, cfg.n_dynamic_blocks);
        let indices = nl::ndarray([n, bs], nl::int32, buffer = nl::private_hbm);
        let t0 = N_STATIC_BLOCKS * bs;
        nisa::dma_copy(indices.reshape([1, n * bs]), routed[s![0..1, t0..t0 + n * bs]]);
        let decision_hbm = nl::ndarray([1, n + 1], nl::int32, buffer = nl::private_hbm);
        nisa::dma_copy(decision_hbm, decision);
        (indices, decision_hbm)
    }

    /// The library's `_get_block_token_position_to_id`: the positions
    /// `row[0, start .. start + block_size]` on the partitions, `[min(bs,
    /// 128), ⌈bs / 128⌉]` (position `j·128 + p` at `(p, j)`).
    #[nki_helper]
    pub fn get_block_token_position_to_id(row: Sbuf, start: i64, cfg: AllExpertMxDynamismConfig) -> Sbuf {
        let ids = nl::ndarray([cfg.blk_tile_t, cfg.blk_n_t_tiles], nl::int32, buffer = nl::sbuf);
        for j in 0..cfg.blk_n_t_tiles {
            let (p0, rows) = (start + j * BLK_TILE_T, (cfg.block_size - j * BLK_TILE_T).min(BLK_TILE_T));
            nisa::dma_copy(ids[s![0..rows, j..j + 1]], row[s![0..1, p0..p0 + rows]]);
        }
        ids
    }

    /// Dynamic block `block_idx` (`[1, 1]` in SBUF)'s positions `[1,
    /// block_size]`, read from `indices` `[n_dynamic_blocks, block_size]`.
    #[nki_helper]
    pub fn load_dynamic_block_positions(indices: Hbm, block_idx: Sbuf, cfg: AllExpertMxDynamismConfig) -> Sbuf {
        let bs = cfg.block_size;
        let row = nl::ndarray([1, bs], nl::int32, buffer = nl::sbuf);
        nisa::dma_copy(row, indices.ap([[bs, 1], [1, bs]], offset = 0, scalar_offset = block_idx, indirect_dim = 0));
        row
    }

    /// Element `block_idx` (`[1, 1]` in SBUF) of the decision vector
    /// `decision` `[1, n_dynamic_blocks + 1]`: whether that block runs.
    #[nki_helper]
    pub fn load_next_decision(decision: Hbm, block_idx: Sbuf) -> Sbuf {
        let n = decision.shape()[1];
        let next = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
        nisa::dma_copy(next, decision.ap([[n, 1], [1, 1]], offset = 0, scalar_offset = block_idx, indirect_dim = 1));
        next
    }

    /// The library's `_layout_adapter_qmx_hbm` on a block: the hidden rows
    /// of the tokens `ids` gathered (a -1 position leaves its row zero),
    /// then swizzled and quantized to MXFP8 as the static form's rows:
    /// `[128, H/512, block_size]` values and scales.
    #[nki_helper(target = "trn3")]
    pub fn layout_adapter_qmx_block(hidden: Hbm, ids: Sbuf, cfg: AllExpertMxDynamismConfig) -> (Sbuf, Sbuf) {
        let (bs, h) = (cfg.block_size, hidden.shape()[1]);
        let rows_hbm = nl::ndarray([bs, h], hidden.dtype(), buffer = nl::private_hbm);
        for j in 0..cfg.blk_n_t_tiles {
            let (t0, rows) = (j * BLK_TILE_T, (bs - j * BLK_TILE_T).min(BLK_TILE_T));
            let x = nl::ndarray([rows, h], hidden.dtype(), buffer = nl::sbuf);
            nisa::memset(x, 0.0);
            nisa::dma_copy(
                x,
                hidden.ap([[h, rows], [1, h]], offset = 0, vector_offset = ids[s![0..rows, j..j + 1]], indirect_dim = 0),
                oob_mode = nisa::oob_mode::skip,
            );
            nisa::dma_copy(rows_hbm[s![t0..t0 + rows, ..]], x);
        }
        let cfg_x: ProjConfig = proj_config(h, 1, bs, 1, 0);
        let sw = layout_adapter_mx(rows_hbm, false, None, 0.0, bs, cfg_x);
        let xq = nl::ndarray([H0, cfg_x.n_h512_tile, bs], nl::float8_e4m3fn_x4, buffer = nl::sbuf);
        let xs = nl::ndarray([H0, cfg_x.n_h512_tile, bs], nl::uint8, buffer = nl::sbuf);
        quantize_hidden_mx(sw, xq, xs);
        (xq, xs)
    }

    /// The library's `_load_block_expert_affinities`: the affinities of
    /// the tokens `ids` for expert `e`, `[128, H/128, block_size]` (each
    /// token's along every partition and output tile; 0 for a -1 position).
    #[nki_helper]
    pub fn load_block_expert_affinities(aff: Hbm, ids: Sbuf, e: i64, cfg: AllExpertMxDynamismConfig, h1: i64) -> Sbuf {
        let (bs, e_l) = (cfg.block_size, aff.shape()[1]);
        let block_aff = nl::ndarray([bs, 1], aff.dtype(), buffer = nl::private_hbm);
        for j in 0..cfg.blk_n_t_tiles {
            let (t0, rows) = (j * BLK_TILE_T, (bs - j * BLK_TILE_T).min(BLK_TILE_T));
            let a = nl::ndarray([rows, 1], aff.dtype(), buffer = nl::sbuf);
            nisa::memset(a, 0.0);
            nisa::dma_copy(
                a,
                aff.ap([[e_l, rows], [1, 1]], offset = e, vector_offset = ids[s![0..rows, j..j + 1]], indirect_dim = 0),
                oob_mode = nisa::oob_mode::skip,
            );
            nisa::dma_copy(block_aff[s![t0..t0 + rows, ..]], a);
        }
        let a_bc = nl::ndarray([H0, h1, bs], aff.dtype(), buffer = nl::sbuf);
        nisa::dma_copy(a_bc, block_aff.ap([[0, H0], [0, h1], [1, bs]], offset = 0));
        a_bc
    }

    /// The rows of `block_out` `[block_size, H]` in this program's half of
    /// the columns scattered to the tokens `ids` of `output` (a -1
    /// position is skipped).
    #[nki_helper]
    pub fn scatter_block_output(block_out: Hbm, ids: Sbuf, io: AllExpertMxBlockIo, cfg: AllExpertMxDynamismConfig) {
        let (h, hs) = (io.half.h, io.half.h_sharded);
        let c0 = io.half.prg_id * hs;
        for j in 0..cfg.blk_n_t_tiles {
            let (t0, rows) = (j * BLK_TILE_T, (cfg.block_size - j * BLK_TILE_T).min(BLK_TILE_T));
            let o = nl::ndarray([rows, hs], block_out.dtype(), buffer = nl::sbuf);
            nisa::dma_copy(o, block_out[s![t0..t0 + rows, c0..c0 + hs]]);
            let output: Hbm = io.output;
            nisa::dma_copy(
                output.ap([[h, rows], [1, hs]], offset = c0, vector_offset = ids[s![0..rows, j..j + 1]], indirect_dim = 0),
                o,
                oob_mode = nisa::oob_mode::skip,
            );
        }
    }

    /// The library's `_compute_block`: expert `e` (`ex`, on this program's
    /// `I` tiles `d`) on the block of tokens `ids`, its output times the
    /// tokens' affinities scattered into `io.output` (module docs).
    #[nki_helper(target = "trn3")]
    pub fn compute_block(
        hidden: Hbm,
        ex: ExpertWeightsMx,
        opts: MoeTkgOptions,
        d: AllExpertMxDims,
        cfg: AllExpertMxDynamismConfig,
        io: AllExpertMxBlockIo,
        e: i64,
        ids: Sbuf,
    ) {
        let (bs, h) = (cfg.block_size, io.half.h);
        let h1 = h / H0;
        let (xq, xs) = layout_adapter_qmx_block(hidden, ids, cfg);
        let o = compute_expert_mlp_mx(xq, xs, ex, opts, d.i_local, io.bias_cols);
        let a_bc = load_block_expert_affinities(io.aff, ids, e, cfg, h1);
        let scaled = nl::ndarray([H0, h1, bs], nl::bfloat16, buffer = nl::sbuf);
        scale_and_accumulate(scaled, o, a_bc, scaled, true, 0, bs);
        let block_out = nl::ndarray([bs, h], io.output.dtype(), buffer = nl::private_hbm);
        reduce_and_store_output(scaled, block_out, bs, d.shard_on_i, io.half);
        scatter_block_output(block_out, ids, io, cfg);
    }

    /// This program's half of the columns of `output` set to zero: the
    /// rows of tokens no block scatters to.
    #[nki_helper]
    pub fn zero_output_columns(output: Hbm, half: ProjConfig) {
        let t = output.shape()[0];
        let (hs, c0) = (half.h_sharded, half.prg_id * half.h_sharded);
        let zeros = nl::ndarray([t.min(BLK_TILE_T), hs], output.dtype(), buffer = nl::sbuf);
        nisa::memset(zeros, 0.0);
        for j in 0..t.div_ceil(BLK_TILE_T) {
            let (t0, rows) = (j * BLK_TILE_T, (t - j * BLK_TILE_T).min(BLK_TILE_T));
            nisa::dma_copy(output[s![t0..t0 + rows, c0..c0 + hs]], zeros[s![0..rows, ..]]);
        }
    }

    /// The library's `_all_expert_mx_dynamic`: `output[t] = Σ_e
    /// affinity[t, e] · expert_e(hidden[t])`, each local expert computed
    /// on the blocks of `block_size` tokens routed to it (module docs).
    #[nki_helper(target = "trn3")]
    pub fn _all_expert_mx_dynamic(w: MoeTkgTensors, opts: MoeTkgOptions, rank_id: Hbm, block_size: i64, output: Hbm) {
        let [t, h] = output.shape();
        let [e_l, _, _, _, i] = w.expert_gate_up_weights.shape();
        let n = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        let pid = if n > 1 { nl::program_id(0) } else { 0 };
        let d = all_expert_mx_dims(i, n, pid);
        let half: ProjConfig = proj_config(h, i, block_size, n, pid);
        let bias_cols = if d.shard_on_i { half } else { proj_config(h, i, block_size, 1, 0) };
        let cfg = all_expert_mx_dynamism_config(t, block_size);
        let aff = nl::ndarray([t, e_l], w.expert_affinities.dtype(), buffer = nl::private_hbm);
        masked_affinities_hbm(w, opts, rank_id, aff);
        let io = AllExpertMxBlockIo { aff, output, half, bias_cols };
        zero_output_columns(output, half);
        let b_sb = nl::ndarray([H0, bias_cols.h1_sharded, 1], nl::bfloat16, buffer = nl::sbuf);
        for e in 0..e_l {
            let ex = load_expert_mx(w, e, d, bias_cols, b_sb, output);
            let (routed, decision) = find_expert_routed_tokens(aff, e, cfg);
            for b in 0..N_STATIC_BLOCKS {
                let ids = get_block_token_position_to_id(routed, b * block_size, cfg);
                compute_block(w.hidden_input, ex, opts, d, cfg, io, e, ids);
            }
            let (indices, decision_hbm) = init_dynamic_block_indices_hbm(routed, decision, cfg);
            let next_block = nisa::register_alloc();
            nisa::register_load(next_block, decision[s![0..1, 0..1]]);
            let block_idx = nl::ndarray([1, 1], nl::int32, buffer = nl::sbuf);
            nisa::memset(block_idx, 0.0);
            nl::while_loop(next_block, |r| {
                let ids = get_block_token_position_to_id(load_dynamic_block_positions(indices, block_idx, cfg), 0, cfg);
                compute_block(w.hidden_input, ex, opts, d, cfg, io, e, ids);
                nisa::tensor_scalar(block_idx, block_idx, nl::add, 1.0);
                nisa::register_load(r, load_next_decision(decision_hbm, block_idx));
                r
            });
        }
    }
}
