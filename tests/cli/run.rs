//! `nki run KERNEL` / `nki profile KERNEL`: every registered kernel runs from the
//! command line on generated `.npy` inputs and writes exactly what the Rust API
//! returns for the same inputs; every one profiles; refused inputs give one line
//! naming the parameter, exit code 2 and no output.

use crate::common;

use nki::emit::{ArgValue, FunctionInfo, ParamInfo, ParamKind};
use nki::io::npy::{NpyType, read_npy, read_tensor_npy, write_npy};
use nki::spec::contract::{Bound, either, range_rule};
use nki::{Dtype, Launch, Tensor};
use nki_examples::{layernorm::layernorm, topk::topk};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A generated input: a float32 tensor of uniform values in `[-1, 1)`, an int32
/// tensor of values in `[0, max)`, or a scalar as text.
#[derive(Clone, Copy)]
enum In {
    F32(&'static [usize]),
    Ids(&'static [usize], u32),
    /// `Ids` as uint32, as the library's signatures take indices.
    UIds(&'static [usize], u32),
    /// A uint8 mask of random 0s and 1s.
    Mask(&'static [usize]),
    /// Token positions of blocks of `block` positions, each block listing
    /// the tokens `0..tokens` once, then the padding row `tokens` (int32): no
    /// token twice in a block, as the library's routing guarantees (tiles of a
    /// block that the programs share would race on its row otherwise).
    Blocks(&'static [usize], usize, usize),
    /// A bfloat16 tensor of uniform values in `[-1, 1)` whose last `n` columns
    /// are zero (a packed index of 0 in every row).
    Bf16ZeroTail(&'static [usize], usize),
    /// MXFP4 weights as `uint16` words of four `float4_e2m1fn` codes (every
    /// code a finite value).
    Fp4Words(&'static [usize]),
    /// MX block scales: `uint8` `float8_e8m0fnu` exponents near 1.0 (120-130).
    Scales(&'static [usize]),
    Text(&'static str),
}

/// One command-line case per registered kernel: its ranks and parameters.
struct Case {
    kernel: &'static str,
    ranks: usize,
    params: &'static [(&'static str, In)],
}

use In::{Bf16ZeroTail, Blocks, F32, Fp4Words, Ids, Mask, Scales, Text, UIds};

const QKV: &[usize] = &[1, 1, 64, 128];

/// Kernels only trn3 has the instructions of: run with `--target trn3`.
const TRN3_ONLY: &[&str] =
    &["temperature_softmax", "bwmm_shard_on_block_mx", "blockwise_mm_shard_intermediate_mx", "blockwise_mm_shard_intermediate_mx_hybrid"];

/// The generation a case runs on.
fn target_of(case: &Case) -> &'static str {
    if TRN3_ONLY.contains(&case.kernel) { "trn3" } else { "trn2" }
}

const CASES: &[Case] = &[
    Case { kernel: "axpy", ranks: 1, params: &[("x", F32(&[128, 64])), ("y", F32(&[128, 64])), ("alpha", Text("0.5"))] },
    Case { kernel: "cumsum", ranks: 1, params: &[("x", F32(&[128, 300]))] },
    Case {
        kernel: "cross_entropy_forward",
        ranks: 1,
        // A partial last batch and chunk.
        params: &[
            ("logits_hbm", F32(&[37, 1000])),
            ("targets_hbm", Ids(&[37], 1000)),
            ("positions_per_batch", Text("16")),
            ("chunk_size", Text("384")),
            ("dtype", Text("float32")),
        ],
    },
    Case {
        kernel: "cross_entropy_backward",
        ranks: 1,
        params: &[
            ("logits_hbm", F32(&[37, 1000])),
            ("targets_hbm", Ids(&[37], 1000)),
            ("lse_state_hbm", F32(&[37])),
            ("reduction", Text("sum")),
            ("positions_per_batch", Text("16")),
            ("chunk_size", Text("384")),
            ("dtype", Text("float32")),
            ("inplace", Text("false")),
        ],
    },
    Case { kernel: "dropout", ranks: 1, params: &[("x", F32(&[128, 64])), ("seed", Ids(&[1, 1], 1000)), ("rate", Text("0.25"))] },
    Case { kernel: "embedding", ranks: 1, params: &[("table", F32(&[200, 64])), ("ids", Ids(&[128, 1], 200))] },
    Case { kernel: "gemm_bias_gelu", ranks: 1, params: &[("x", F32(&[128, 128])), ("w", F32(&[128, 128])), ("bias", F32(&[1, 128]))] },
    Case {
        kernel: "layernorm",
        ranks: 1,
        params: &[("x", F32(&[128, 64])), ("gamma", F32(&[1, 64])), ("beta", F32(&[1, 64])), ("eps", Text("0.01"))],
    },
    Case {
        kernel: "find_nonzero_indices",
        ranks: 1,
        // A 0/1 mask of 256 tokens by 16 columns over trn2's 2 programs, in two chunks.
        params: &[("input_tensor", Ids(&[256, 16], 2)), ("chunk_size", Text("128"))],
    },
    Case {
        kernel: "fine_grained_allgather",
        ranks: 4,
        // Each rank's 256 rows over trn2's 2 programs and 2 ring channels, the SBUF path.
        params: &[("lhs", F32(&[256, 512])), ("tp_degree", Text("4")), ("num_groups", Text("1"))],
    },
    Case {
        kernel: "allgather_compute_matmul",
        ranks: 4,
        // Each rank's 256 rows times its own [512, 256] shard over trn2's 2 programs and 2 ring channels.
        params: &[("lhs", F32(&[256, 512])), ("rhs", F32(&[512, 256])), ("tp_degree", Text("4")), ("num_groups", Text("1"))],
    },
    Case {
        kernel: "allgather_sb2sb",
        ranks: 4,
        // Two groups of two ranks, the ncc.ReplicaGroup given by its rings.
        params: &[("inp", F32(&[128, 96])), ("replica_groups", Text("0,1;2,3")), ("tp_degree", Text("2"))],
    },
    Case {
        kernel: "allgather_sb2sb_tiled",
        ranks: 4,
        // Two row tiles, one per program of trn2's two.
        params: &[("inp", F32(&[256, 64])), ("replica_groups", Text("0,1,2,3")), ("tp_degree", Text("4"))],
    },
    Case {
        kernel: "topk_reduce",
        ranks: 1,
        // Every row of token 0: its output is the sum of the first 4 rows.
        params: &[("input", Bf16ZeroTail(&[32, 66], 2)), ("T", Text("1")), ("K", Text("4"))],
    },
    Case {
        kernel: "conv1d",
        ranks: 1,
        // Uneven padding, stride 2 and dilation 2 over a partial C_in tile, a bias and GELU.
        params: &[
            ("x_in", F32(&[2, 40, 100])),
            ("filters", F32(&[3, 40, 48])),
            ("bias", F32(&[48])),
            ("stride", Text("2")),
            ("padding", Text("1,2")),
            ("dilation", Text("2")),
            ("activation_fn", Text("GELU")),
        ],
    },
    Case {
        kernel: "depthwise_conv1d_implicit_gemm",
        ranks: 1,
        // 4 channels split over trn2's 2 programs, W padded by (2, 1), stride_w 2.
        params: &[
            ("img_ref", F32(&[2, 4, 1, 50])),
            ("filter_ref", F32(&[4, 1, 1, 5])),
            ("padding", Text("(0,0),(2,1)")),
            ("stride", Text("1,2")),
            ("feature_group_count", Text("4")),
        ],
    },
    Case {
        kernel: "indexed_flatten",
        ranks: 1,
        // 3 rows of 16 blocks of 128 at random block offsets (overlapping, some cut at the end).
        params: &[
            ("input_tensor", Ids(&[3, 2048], 100_000)),
            ("f_len", Text("128")),
            ("output_len", Text("4096")),
            ("row_offsets", Ids(&[3], 32)),
        ],
    },
    Case {
        kernel: "layernorm_tkg",
        ranks: 1,
        // 32 rows over trn2's 2 programs (above the sharding threshold), H = 512 in 2 hidden shards.
        params: &[("input", F32(&[2, 16, 512])), ("gamma", F32(&[1, 512])), ("output", F32(&[128, 32, 4])), ("beta", F32(&[1, 512]))],
    },
    Case { kernel: "logsumexp", ranks: 1, params: &[("x", F32(&[128, 1024]))] },
    Case { kernel: "mamba_v1", ranks: 1, params: MAMBA },
    Case { kernel: "mamba_v2", ranks: 1, params: MAMBA },
    Case { kernel: "mamba_v3", ranks: 1, params: MAMBA_TILED },
    Case { kernel: "masked_softmax", ranks: 1, params: &[("x", F32(&[128, 64])), ("mask", F32(&[128, 64])), ("scale", Text("0.5"))] },
    Case { kernel: "matmul", ranks: 1, params: &[("a_t", F32(&[128, 128])), ("b", F32(&[128, 512]))] },
    Case { kernel: "matmul_k_outer", ranks: 1, params: &[("a_t", F32(&[128, 128])), ("b", F32(&[128, 1024]))] },
    Case { kernel: "matmul_hoisted", ranks: 1, params: &[("a_t", F32(&[128, 128])), ("b", F32(&[128, 512]))] },
    Case {
        kernel: "matmul_blocked",
        ranks: 1,
        params: &[("a_t", F32(&[128, 256])), ("b", F32(&[128, 512])), ("tiles_m", Text("2")), ("tiles_n", Text("1"))],
    },
    Case { kernel: "rmsnorm", ranks: 1, params: &[("x", F32(&[128, 64])), ("w", F32(&[1, 64]))] },
    Case {
        kernel: "rmsnorm_quant_kernel",
        ranks: 1,
        params: &[
            ("hidden", F32(&[1, 4, 64])),
            ("ln_w", F32(&[64])),
            ("kargs.eps", Text("1e-5")),
            ("kargs.lower_bound", Text("0.5")),
            ("kargs.norm_type", Text("RMS_NORM")),
        ],
    },
    Case {
        kernel: "rmsnorm_tkg",
        ranks: 1,
        // 32 rows over trn2's 2 programs (above the sharding threshold), H = 512 in 2 hidden shards.
        params: &[("input", F32(&[2, 16, 512])), ("gamma", F32(&[1, 512])), ("output", F32(&[128, 32, 4])), ("hidden_actual", Text("500"))],
    },
    Case {
        kernel: "mlp",
        ranks: 1,
        // 6 tokens over trn2's 2 programs (H split in two), RMSNorm, a residual add
        // stored beside the output, GELU with a clamped gate and a partial I tile.
        params: &[
            ("hidden_tensor", F32(&[2, 3, 256])),
            ("gate_proj_weights_tensor", F32(&[256, 200])),
            ("up_proj_weights_tensor", F32(&[256, 200])),
            ("down_proj_weights_tensor", F32(&[200, 256])),
            ("normalization_weights_tensor", F32(&[1, 256])),
            ("fused_add_tensor", F32(&[2, 3, 256])),
            ("store_fused_add_result", Text("true")),
            ("normalization_type", Text("RMS_NORM")),
            ("activation_fn", Text("GELU")),
            ("gate_clamp_upper_limit", Text("0.5")),
        ],
    },
    Case {
        kernel: "moe_tkg",
        ranks: 1,
        // Selective: 3 tokens split over trn2's 2 programs, each through its top 2
        // of 4 experts (ids read on the device), affinity-weighted, biases, Swish.
        params: &[
            ("hidden_input", F32(&[3, 256])),
            ("expert_gate_up_weights", F32(&[4, 256, 2, 96])),
            ("expert_down_weights", F32(&[4, 96, 256])),
            ("expert_affinities", F32(&[3, 4])),
            ("expert_index", Ids(&[3, 2], 4)),
            ("is_all_expert", Text("false")),
            ("expert_gate_up_bias", F32(&[4, 2, 96])),
            ("expert_down_bias", F32(&[4, 256])),
            ("expert_affinities_scaling_mode", Text("POST_SCALE")),
            ("activation_fn", Text("Swish")),
        ],
    },
    Case {
        kernel: "moe_block_tkg",
        ranks: 1,
        // RMSNorm, the router's top 2 of 8 experts (softmax after the top-k) for
        // 3 tokens shared by trn2's 2 programs, then each token's experts.
        params: &[
            ("inp", F32(&[1, 3, 256])),
            ("gamma", F32(&[1, 256])),
            ("router_weights", F32(&[256, 8])),
            ("expert_gate_up_weights", F32(&[8, 256, 2, 64])),
            ("expert_down_weights", F32(&[8, 64, 256])),
            ("router_bias", F32(&[1, 8])),
            ("top_k", Text("2")),
            ("router_act_fn", Text("SOFTMAX")),
            ("router_pre_norm", Text("false")),
            ("expert_affinities_scaling_mode", Text("POST_SCALE")),
            ("router_mm_dtype", Text("float32")),
        ],
    },
    Case {
        kernel: "bwmm_shard_on_block",
        ranks: 1,
        // 2 blocks of 128 positions (one per program) over 128 tokens and the
        // padding row, 2 experts; weights skipped where a block's expert repeats.
        params: MOE_CTE_BLOCKS,
    },
    Case {
        kernel: "moe_cte",
        ranks: 1,
        // `bwmm_shard_on_block`'s case through the dispatcher, the spec's
        // nested `ShardOnBlockConfig` given by a field.
        params: &[
            ("hidden_states", F32(&[129, 512])),
            ("expert_affinities_masked", F32(&[258, 1])),
            ("gate_up_proj_weight", F32(&[2, 512, 2, 128])),
            ("down_proj_weight", F32(&[2, 128, 512])),
            ("token_position_to_id", Ids(&[256], 129)),
            ("block_to_expert", Ids(&[2, 1], 2)),
            ("block_size", Text("128")),
            ("spec.implementation", Text("shard_on_block")),
            ("spec.shard_on_block.block_sharding_strategy", Text("PING_PONG")),
            ("skip_dma.skip_weight", Text("true")),
        ],
    },
    Case {
        kernel: "blockwise_mm_baseline_shard_intermediate",
        ranks: 1,
        // 2 blocks of 256 positions, every block on both programs, each
        // computing half of the 256 intermediate rows.
        params: &rows::<7, 1, 8>(SHARD_ON_I_BLOCKS, [("skip_dma.skip_token", Text("false"))]),
    },
    Case {
        kernel: "blockwise_mm_baseline_shard_intermediate_hybrid",
        ranks: 1,
        // The same 2 blocks, the first traced as a static block and
        // `conditions` all zero, so the device loop adds none.
        params: &rows::<8, 1, 9>(rows::<1, 7, 8>([("conditions", Ids(&[3], 1))], SHARD_ON_I_BLOCKS), [("num_static_block", Text("1"))]),
    },
    Case {
        kernel: "bwmm_shard_on_block_mx",
        ranks: 1,
        // 2 blocks of 128 positions (one per program), each every one of the 128
        // tokens, 2 experts; MXFP4 weights as uint16 words, H 512, I 128.
        params: &[
            ("hidden_states", F32(&[129, 512])),
            ("expert_affinities_masked", F32(&[258, 1])),
            ("gate_up_proj_weight", Fp4Words(&[2, 128, 2, 1, 128])),
            ("down_proj_weight", Fp4Words(&[2, 32, 1, 512])),
            ("token_position_to_id", Blocks(&[256], 128, 128)),
            ("block_to_expert", Ids(&[2, 1], 2)),
            ("gate_up_proj_scale", Scales(&[2, 16, 2, 1, 128])),
            ("down_proj_scale", Scales(&[2, 4, 1, 512])),
            ("block_size", Text("128")),
        ],
    },
    Case {
        kernel: "blockwise_mm_shard_intermediate_mx",
        ranks: 1,
        // 2 blocks of 256 positions, every block on both programs, each
        // computing half of the 1024 intermediate columns; MXFP4 weights.
        params: &SHARD_ON_I_MX,
    },
    Case {
        kernel: "blockwise_mm_shard_intermediate_mx_hybrid",
        ranks: 1,
        // The same, both blocks traced as static blocks and `conditions` all
        // zero, so the device loop adds none.
        params: &rows::<1, 11, 12>([("conditions", Ids(&[3], 1))], rows::<10, 1, 11>(SHARD_ON_I_MX, [("num_static_block", Text("2"))])),
    },
    Case {
        kernel: "blockwise_mm_shard_intermediate_dropping",
        ranks: 1,
        // One block of 1024 positions per expert (2 experts), each the 128
        // tokens then the padding row, cut into 1024-position tiles; not
        // accumulating, so every padding position stores the same row.
        params: &[
            ("hidden_states", F32(&[129, 512])),
            ("expert_affinities_masked", F32(&[258, 1])),
            ("gate_up_proj_weight", F32(&[2, 512, 2, 256])),
            ("down_proj_weight", F32(&[2, 256, 512])),
            ("block_size", Text("1024")),
            ("token_position_to_id", Blocks(&[2048], 128, 1024)),
            ("block_to_expert", Ids(&[2, 1], 2)),
            ("is_tensor_update_accumulating", Text("false")),
        ],
    },
    Case {
        kernel: "blockwise_mm_bwd",
        ranks: 1,
        // 2 blocks of 128 positions over 128 tokens and the padding row, 2
        // experts, H split over trn2's 2 programs; the up projection clamped
        // from above only (the other limits None).
        params: MOE_BWD,
    },
    Case {
        kernel: "attention_block_tkg",
        ranks: 1,
        // 2 batches of one new token on trn2's 2 programs: RMSNorm, 2 query heads
        // of 64, RoPE, attention over a random mask of 256 cached keys in a
        // block cache (8 blocks of 32 positions, each batch reading 8 of them
        // through its table row), the new tokens written to the pool slots
        // read on the device, the output projection.
        params: &[
            ("X", F32(&[2, 1, 256])),
            ("rmsnorm_X_enabled", Text("true")),
            ("rmsnorm_X_gamma", F32(&[1, 256])),
            ("W_qkv", F32(&[256, 256])),
            ("quantization_type_qkv", Text("NONE")),
            ("rmsnorm_QK_pre_rope_enabled", Text("false")),
            ("rmsnorm_QK_pre_rope_eps", Text("1e-5")),
            ("cos", F32(&[32, 2, 1])),
            ("sin", F32(&[32, 2, 1])),
            ("rope_contiguous_layout", Text("true")),
            ("rmsnorm_QK_post_rope_enabled", Text("false")),
            ("rmsnorm_QK_post_rope_eps", Text("1e-5")),
            ("K_cache_transposed", Text("false")),
            ("active_blocks_table", UIds(&[2, 8], 8)),
            ("K_cache", F32(&[8, 32, 64])),
            ("V_cache", F32(&[8, 32, 64])),
            ("attention_mask", Mask(&[256, 2, 2, 1])),
            ("update_cache", Text("true")),
            ("kv_cache_update_idx", UIds(&[2, 1], 256)),
            ("W_out", F32(&[128, 256])),
            ("quantization_type_out", Text("NONE")),
            ("transposed_out", Text("false")),
            ("out_in_sb", Text("false")),
        ],
    },
    Case {
        kernel: "qkv_tkg",
        ranks: 1,
        // 4 tokens over trn2's 2 programs (H split in two), RMSNorm with fused add, 4 heads of 64 stored head by head.
        params: &[
            ("hidden", F32(&[2, 2, 512])),
            ("qkv_w", F32(&[512, 256])),
            ("norm_w", F32(&[1, 512])),
            ("fused_add", Text("true")),
            ("mlp_prev", F32(&[2, 2, 512])),
            ("attn_prev", F32(&[2, 2, 512])),
            ("d_head", Text("64")),
            ("output_layout", Text("NBSd")),
            ("qkv_bias", F32(&[1, 256])),
        ],
    },
    Case {
        kernel: "qkv",
        ranks: 1,
        params: &[
            ("input", F32(&[1, 3, 256])),
            ("fused_qkv_weights", F32(&[256, 384])),
            ("fused_norm_type", Text("LAYER_NORM")),
            ("gamma_norm_weights", F32(&[1, 256])),
            ("layer_norm_bias", F32(&[1, 256])),
        ],
    },
    Case {
        kernel: "qkv_cte",
        ranks: 1,
        // 130 rows over trn2's 2 programs (65 each), RMSNorm with a residual add,
        // a bias and RoPE on 2 query and 1 key head of 64 (one value head), BSD.
        params: &[
            ("input", F32(&[1, 130, 256])),
            ("fused_qkv_weights", F32(&[256, 256])),
            ("bias", F32(&[1, 256])),
            ("fused_residual_add", Text("true")),
            ("mlp_prev", F32(&[1, 130, 256])),
            ("attention_prev", F32(&[1, 130, 256])),
            ("fused_norm_type", Text("RMS_NORM")),
            ("gamma_norm_weights", F32(&[1, 256])),
            ("fused_rope", Text("true")),
            ("cos_cache", F32(&[1, 130, 64])),
            ("sin_cache", F32(&[1, 130, 64])),
            ("num_q_heads", Text("2")),
            ("num_kv_heads", Text("1")),
        ],
    },
    Case {
        kernel: "RoPE",
        ranks: 1,
        params: &[
            ("x_in", F32(&[64, 1, 2, 8])),
            ("cos", F32(&[32, 1, 8])),
            ("sin", F32(&[32, 1, 8])),
            ("contiguous_layout", Text("false")),
        ],
    },
    Case {
        kernel: "rope_hf",
        ranks: 1,
        // 256 positions over trn2's 2 programs, a packed cache shared by the batches, backward.
        params: &[
            ("q", F32(&[2, 2, 256, 64])),
            ("k", F32(&[2, 1, 256, 64])),
            ("q_out", F32(&[2, 2, 256, 64])),
            ("k_out", F32(&[2, 1, 256, 64])),
            ("rope_cache", F32(&[256, 128])),
            ("backward", Text("true")),
        ],
    },
    Case {
        kernel: "cascaded_max",
        ranks: 1,
        // 5 rows over trn2's 2 programs (3 and 2), V = 1000 folded over 7 stages of 143 columns.
        params: &[("input_tensor", F32(&[5, 1000]))],
    },
    Case {
        kernel: "output_projection_tkg",
        ranks: 1,
        // 4 heads of 64 packed in pairs, H = 512 over trn2's 2 programs, the transposed layout.
        params: &[
            ("attention", F32(&[64, 2, 4, 3])),
            ("weight", F32(&[256, 512])),
            ("bias", F32(&[1, 512])),
            ("TRANSPOSE_OUT", Text("true")),
        ],
    },
    Case {
        kernel: "output_projection_cte",
        ranks: 1,
        // 3 heads of 64 (no packing), a ragged 600-position sequence, H = 640 over 2 programs.
        params: &[("attention", F32(&[1, 3, 64, 600])), ("weight", F32(&[192, 640])), ("bias", F32(&[1, 640]))],
    },
    Case {
        kernel: "router_topk",
        ranks: 1,
        params: &[
            ("x", F32(&[128, 16])),
            ("w", F32(&[128, 32])),
            ("w_bias", F32(&[1, 32])),
            ("router_logits", F32(&[16, 32])),
            ("expert_affinities", F32(&[16, 32])),
            ("expert_index", UIds(&[16, 4], 32)),
            ("act_fn", Text("SOFTMAX")),
            ("k", Text("4")),
            ("x_hbm_layout", Text("0")),
            ("x_sb_layout", Text("0")),
            ("router_pre_norm", Text("false")),
        ],
    },
    Case {
        kernel: "rotational_topk",
        ranks: 1,
        // k = 16 over trn2's 2 programs: 2 rows each, 2 stages of 500 columns finding 8 each.
        params: &[
            ("inp", F32(&[4, 1000])),
            ("config.BxS", Text("4")),
            ("config.vocab_size", Text("1000")),
            ("config.orig_k", Text("16")),
            ("config.padded_k", Text("16")),
            ("config.n_prgs", Text("2")),
            ("config.prg_id", Text("0")),
            ("config.per_lnc_BxS", Text("2")),
            ("config.local_top_k_per_stage", Text("8")),
            ("config.n_stages", Text("2")),
            ("config.stage_free_size", Text("500")),
            ("config.padded_vocab_size", Text("1000")),
            ("config.sorted", Text("true")),
            ("config.tile_size", Text("2")),
            ("config.n_bxs_tiles", Text("1")),
        ],
    },
    Case { kernel: "softmax", ranks: 1, params: &[("x", F32(&[128, 96]))] },
    Case { kernel: "temperature_softmax", ranks: 1, params: &[("x", F32(&[128, 64])), ("inv_temp", Text("2.0"))] },
    Case { kernel: "tensor_add", ranks: 1, params: &[("a", F32(&[128, 64])), ("b", F32(&[128, 64]))] },
    Case { kernel: "topk", ranks: 1, params: &[("x", F32(&[128, 64])), ("k", Text("8"))] },
    Case { kernel: "tp_matmul", ranks: 4, params: &[("x_t", F32(&[32, 512])), ("w1", F32(&[128, 128])), ("w2", F32(&[128, 512]))] },
    Case { kernel: "transpose", ranks: 1, params: &[("x", F32(&[128, 256]))] },
    Case {
        kernel: "attention_cte",
        ranks: 1,
        params: &[("q", F32(&[1, 128, 16])), ("k", F32(&[1, 16, 128])), ("v", F32(&[1, 128, 16])), ("causal_mask", Text("false"))],
    },
    Case {
        kernel: "attention_tkg",
        ranks: 1,
        params: &[
            ("q", F32(&[64, 2])),
            ("k_active", F32(&[64, 1])),
            ("v_active", F32(&[1, 1, 1, 64])),
            ("k_prior", F32(&[1, 1, 64, 128])),
            ("v_prior", F32(&[1, 1, 128, 64])),
            ("mask", Mask(&[128, 1, 2, 1])),
            ("cfg.bs", Text("1")),
            ("cfg.q_head", Text("2")),
            ("cfg.s_active", Text("1")),
            ("cfg.curr_sprior", Text("128")),
            ("cfg.full_sprior", Text("128")),
            ("cfg.d_head", Text("64")),
            ("cfg.qk_in_sb", Text("true")),
        ],
    },
    Case {
        kernel: "attention_bwd",
        ranks: 1,
        params: &[
            ("q_ref", F32(QKV)),
            ("k_ref", F32(QKV)),
            ("v_ref", F32(QKV)),
            ("o_ref", F32(QKV)),
            ("dy_ref", F32(QKV)),
            ("lse_ref", F32(&[1, 1, 128, 1])),
            ("sinks_ref", F32(&[1, 1, 2])),
            ("use_causal_mask", Text("true")),
            ("sliding_window", Text("64")),
        ],
    },
    Case {
        kernel: "gen_mask_tkg_hbm",
        ranks: 1,
        // 256 keys split over trn2's 2 programs, a block cache, a sliding window and an active block.
        params: &[
            ("pos_ids_hbm", Ids(&[1, 6], 256)),
            ("bs", Text("2")),
            ("q_head", Text("2")),
            ("s_active", Text("3")),
            ("s_prior", Text("256")),
            ("start_pos_hbm", Ids(&[1, 6], 256)),
            ("block_len", Text("16")),
            ("active_mask", F32(&[3, 2, 2, 3])),
        ],
    },
    Case {
        kernel: "ring_attention_spmd_fwd",
        ranks: 2,
        params: &[
            ("q", F32(QKV)),
            ("k", F32(QKV)),
            ("v", F32(&[1, 1, 128, 64])),
            ("num_workers", Text("2")),
            ("training", Text("true")),
            ("lse_dtype", Text("bfloat16")),
        ],
    },
    Case {
        kernel: "ring_attention_spmd_bwd",
        ranks: 1,
        // Two heads: one (batch, head) pair per LNC program.
        params: &[
            ("q_ref", F32(&[1, 2, 64, 128])),
            ("k_ref", F32(&[1, 2, 64, 128])),
            ("v_ref", F32(&[1, 2, 64, 128])),
            ("o_ref", F32(&[1, 2, 64, 128])),
            ("dy_ref", F32(&[1, 2, 64, 128])),
            ("lse_ref", F32(&[1, 2, 128, 1])),
            ("lnc_size", Text("2")),
        ],
    },
];

const MAMBA: &[(&str, In)] = &[
    ("delta", F32(&[1, 128, 256])),
    ("u", F32(&[1, 128, 256])),
    ("a", F32(&[128, 2])),
    ("b", F32(&[1, 2, 256])),
    ("c", F32(&[1, 2, 256])),
];

const MAMBA_TILED: &[(&str, In)] = &[
    ("delta", F32(&[1, 128, 256])),
    ("u", F32(&[1, 128, 256])),
    ("a", F32(&[128, 2])),
    ("b", F32(&[1, 2, 256])),
    ("c", F32(&[1, 2, 256])),
    ("seq_tile", Text("128")),
];

/// `bwmm_shard_on_block`'s case: `skip_dma` given by one field.
const MOE_CTE_BLOCKS: &[(&str, In)] = &[
    ("hidden_states", F32(&[129, 512])),
    ("expert_affinities_masked", F32(&[258, 1])),
    ("gate_up_proj_weight", F32(&[2, 512, 2, 128])),
    ("down_proj_weight", F32(&[2, 128, 512])),
    ("block_size", Text("128")),
    ("token_position_to_id", Ids(&[256], 129)),
    ("block_to_expert", Ids(&[2, 1], 2)),
    ("skip_dma.skip_weight", Text("true")),
];

/// The MX shard-on-intermediate kernels' inputs: 2 blocks of 256 positions
/// over 128 tokens and the padding row, 2 experts, H 512, I 1024 (MXFP4 words,
/// `uint8` scales), the affinity on the output.
const SHARD_ON_I_MX: [(&str, In); 10] = [
    ("hidden_states", F32(&[129, 512])),
    ("expert_affinities_masked", F32(&[258, 1])),
    ("gate_up_proj_weight", Fp4Words(&[2, 128, 2, 1, 1024])),
    ("down_proj_weight", Fp4Words(&[2, 128, 2, 512])),
    ("token_position_to_id", Blocks(&[512], 128, 256)),
    ("block_to_expert", Ids(&[2, 1], 2)),
    ("gate_up_proj_scale", Scales(&[2, 16, 2, 1, 1024])),
    ("down_proj_scale", Scales(&[2, 16, 2, 512])),
    ("block_size", Text("256")),
    ("expert_affinities_scaling_mode", Text("POST_SCALE")),
];

/// The shard-on-intermediate kernels' tensors and block size: 2 blocks of 256
/// positions over 128 tokens and the padding row, 2 experts.
const SHARD_ON_I_BLOCKS: [(&str, In); 7] = [
    ("hidden_states", F32(&[129, 512])),
    ("expert_affinities_masked", F32(&[258, 1])),
    ("gate_up_proj_weight", F32(&[2, 512, 2, 256])),
    ("down_proj_weight", F32(&[2, 256, 512])),
    ("block_size", Text("256")),
    ("token_position_to_id", Blocks(&[512], 128, 256)),
    ("block_to_expert", Ids(&[2, 1], 2)),
];

/// The parameters `head` then `tail` (`N = H + T`): one case's rows around
/// those it shares with another, in the order the seeds follow.
const fn rows<const H: usize, const T: usize, const N: usize>(
    head: [(&'static str, In); H],
    tail: [(&'static str, In); T],
) -> [(&'static str, In); N] {
    assert!(H + T == N, "rows: N must be H + T");
    let mut out = [("", Text("")); N];
    let mut k = 0;
    while k < N {
        out[k] = if k < H { head[k] } else { tail[k - H] };
        k += 1;
    }
    out
}

/// `blockwise_mm_bwd`'s case: `clamp_limits` given by one field.
const MOE_BWD: &[(&str, In)] = &[
    ("hidden_states", F32(&[129, 256])),
    ("expert_affinities_masked", F32(&[258, 1])),
    ("gate_up_proj_weight", F32(&[2, 256, 2, 128])),
    ("down_proj_weight", F32(&[2, 128, 256])),
    ("gate_up_proj_act_checkpoint_T", F32(&[2, 2, 128, 128])),
    ("down_proj_act_checkpoint", F32(&[2, 128, 256])),
    ("token_position_to_id", Ids(&[256], 129)),
    ("block_to_expert", Ids(&[2, 1], 2)),
    ("output_hidden_states_grad", F32(&[129, 256])),
    ("block_size", Text("128")),
    ("clamp_limits.linear_clamp_upper_limit", Text("0.5")),
];

fn nki_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nki")).args(args).current_dir(dir).output().expect("running nki")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The file a generated tensor input is written to (`{rank}` in a per-rank pattern).
fn file_name(kernel: &str, param: &str, rank: Option<usize>) -> String {
    match rank {
        Some(r) => format!("{kernel}.{param}.{r}.npy"),
        None => format!("{kernel}.{param}.npy"),
    }
}

/// Writes the case's inputs under `dir` (one file per rank for tensors of a
/// multi-rank case) and returns the command-line flags naming them.
fn write_inputs(dir: &Path, case: &Case) -> Vec<String> {
    let mut flags = Vec::new();
    for (i, (param, input)) in case.params.iter().enumerate() {
        flags.push(format!("--{}", param.replace('_', "-")));
        let seed = common::seed_of(case.kernel) + i as u64;
        let write = |rank: Option<usize>, seed: u64| {
            let path = dir.join(file_name(case.kernel, param, rank));
            match *input {
                F32(shape) => write_npy(&path, shape, &common::uniform(shape.iter().product(), seed, -1.0, 1.0), NpyType::F32).unwrap(),
                Ids(shape, max) | UIds(shape, max) => {
                    let ids: Vec<f64> =
                        common::uniform(shape.iter().product(), seed, 0.0, f64::from(max)).iter().map(|v| v.floor()).collect();
                    let ty = if matches!(*input, UIds(..)) { NpyType::U32 } else { NpyType::I32 };
                    write_npy(&path, shape, &ids, ty).unwrap();
                }
                Blocks(shape, tokens, block) => {
                    let ids: Vec<f64> = (0..shape.iter().product()).map(|i: usize| (i % block).min(tokens) as f64).collect();
                    write_npy(&path, shape, &ids, NpyType::I32).unwrap();
                }
                Mask(shape) => {
                    let bits: Vec<f64> = common::uniform(shape.iter().product(), seed, 0.0, 2.0).iter().map(|v| v.floor()).collect();
                    write_npy(&path, shape, &bits, NpyType::U8).unwrap();
                }
                Bf16ZeroTail(shape, n) => {
                    let cols = shape[shape.len() - 1];
                    let mut v = common::uniform(shape.iter().product(), seed, -1.0, 1.0);
                    v.iter_mut().enumerate().filter(|(i, _)| i % cols >= cols - n).for_each(|(_, x)| *x = 0.0);
                    write_npy(&path, shape, &v, NpyType::Bf16).unwrap();
                }
                Fp4Words(shape) => {
                    let words: Vec<f64> = common::uniform(shape.iter().product(), seed, 0.0, 65536.0).iter().map(|v| v.floor()).collect();
                    write_npy(&path, shape, &words, NpyType::U16).unwrap();
                }
                Scales(shape) => {
                    let exps: Vec<f64> = common::uniform(shape.iter().product(), seed, 120.0, 131.0).iter().map(|v| v.floor()).collect();
                    write_npy(&path, shape, &exps, NpyType::U8).unwrap();
                }
                Text(_) => unreachable!("scalars are not files"),
            }
        };
        match *input {
            Text(t) => flags.push(t.to_string()),
            _ if case.ranks == 1 => {
                write(None, seed);
                flags.push(file_name(case.kernel, param, None));
            }
            _ => {
                (0..case.ranks).for_each(|r| write(Some(r), seed + 100 * r as u64));
                flags.push(format!("{}.{param}.{{rank}}.npy", case.kernel));
            }
        }
    }
    flags
}

/// The case's outputs per rank from the Rust API: the kernel's registry entry
/// called in-process on the same files.
fn rust_outputs(dir: &Path, case: &Case, info: &FunctionInfo) -> Vec<Vec<Tensor>> {
    let args: Vec<Vec<Option<ArgValue>>> = (0..case.ranks)
        .map(|rank| {
            info.params
                .iter()
                .map(|p| {
                    let (_, input) = case.params.iter().find(|(n, _)| *n == p.name)?;
                    Some(match *input {
                        Text(t) => match p.kind {
                            nki::emit::ParamKind::Int => ArgValue::Int(t.parse().unwrap()),
                            nki::emit::ParamKind::Float => ArgValue::Float(t.parse().unwrap()),
                            nki::emit::ParamKind::Bool => ArgValue::Bool(t.parse().unwrap()),
                            nki::emit::ParamKind::Dtype => ArgValue::Dtype(nki::Dtype::from_python_name(t).unwrap()),
                            nki::emit::ParamKind::Enum { .. } => ArgValue::Member(t.to_string()),
                            nki::emit::ParamKind::Str => ArgValue::Str(t.to_string()),
                            nki::emit::ParamKind::ReplicaGroup => {
                                ArgValue::Groups(t.split(';').map(|g| g.split(',').map(|r| r.parse().unwrap()).collect()).collect())
                            }
                            nki::emit::ParamKind::Tuple { items } => {
                                let mut ints = t.split(',').map(|v| v.trim_matches(|c| "() ".contains(c)).parse().unwrap());
                                int_tuple(items, &mut ints)
                            }
                            other => panic!("no text case for {other:?}"),
                        },
                        _ => {
                            let r = (case.ranks > 1).then_some(rank);
                            ArgValue::Tensor(read_tensor_npy(dir.join(file_name(case.kernel, p.name, r))).unwrap())
                        }
                    })
                })
                .collect()
        })
        .collect();
    let entry = info.entry.expect("a kernel's entry");
    let generation = nki::profile::Target::parse(target_of(case)).unwrap();
    // `nki run` launches on the target's default LNC (2 on trn2 and trn3).
    Launch::new().generation(generation).lnc(2).ranks(case.ranks).run_ranks(|ctx| entry(ctx, &args[ctx.rank()])).unwrap()
}

/// A tuple of ints (or of tuples of them) holding `ints` in order.
fn int_tuple(items: &[ParamKind], ints: &mut dyn Iterator<Item = i64>) -> ArgValue {
    let item = |kind: &ParamKind, ints: &mut dyn Iterator<Item = i64>| match kind {
        ParamKind::Tuple { items } => int_tuple(items, ints),
        _ => ArgValue::Int(ints.next().unwrap()),
    };
    ArgValue::Tuple(items.iter().map(|k| item(k, &mut *ints)).collect())
}

#[test]
fn mlp_context_encoding_runs_from_the_command_line_as_from_rust() {
    // 130 tokens (above the decode threshold, a partial row tile) split over
    // trn2's 2 programs, LayerNorm with beta, a stored residual add, biases.
    let case = Case {
        kernel: "mlp",
        ranks: 1,
        params: &[
            ("hidden_tensor", F32(&[2, 65, 256])),
            ("gate_proj_weights_tensor", F32(&[256, 200])),
            ("up_proj_weights_tensor", F32(&[256, 200])),
            ("down_proj_weights_tensor", F32(&[200, 256])),
            ("normalization_weights_tensor", F32(&[1, 256])),
            ("normalization_bias_tensor", F32(&[1, 256])),
            ("gate_proj_bias_tensor", F32(&[1, 200])),
            ("up_proj_bias_tensor", F32(&[1, 200])),
            ("down_proj_bias_tensor", F32(&[1, 256])),
            ("fused_add_tensor", F32(&[2, 65, 256])),
            ("store_fused_add_result", Text("true")),
            ("normalization_type", Text("LAYER_NORM")),
        ],
    };
    runs_as_from_rust(&common::scratch("cli_run_mlp_cte"), &case);
}

#[test]
fn moe_tkg_all_expert_runs_from_the_command_line_as_from_rust() {
    // All-expert: 2 local experts of rank 0 over 130 tokens (two token tiles),
    // H split over trn2's 2 programs, affinity-weighted, masked by the top-1 ids.
    let case = Case {
        kernel: "moe_tkg",
        ranks: 1,
        params: &[
            ("hidden_input", F32(&[130, 256])),
            ("expert_gate_up_weights", F32(&[2, 256, 2, 64])),
            ("expert_down_weights", F32(&[2, 64, 256])),
            ("expert_affinities", F32(&[130, 2])),
            ("expert_index", Ids(&[130, 1], 2)),
            ("is_all_expert", Text("true")),
            ("rank_id", Ids(&[1, 1], 1)),
            ("mask_unselected_experts", Text("true")),
            ("expert_affinities_scaling_mode", Text("POST_SCALE")),
        ],
    };
    runs_as_from_rust(&common::scratch("cli_run_moe_tkg_all"), &case);
}

#[test]
fn every_registered_kernel_runs_from_the_command_line_as_from_rust() {
    let dir = common::scratch("cli_run_all");
    let registered: Vec<&str> = nki::registry().iter().filter(|k| k.entry.is_some()).map(|k| k.name).collect();
    let cased: Vec<&str> = CASES.iter().map(|c| c.kernel).collect();
    assert_eq!(registered.iter().filter(|k| !cased.contains(k)).collect::<Vec<_>>(), Vec::<&&str>::new(), "kernels without a case");
    for case in CASES {
        runs_as_from_rust(&dir, case);
    }
}

/// Runs `case` through `nki run` and `nki profile` in `dir`: the output files
/// equal the Rust API's results, exactly the outputs are written, and the
/// profile counts instructions.
fn runs_as_from_rust(dir: &Path, case: &Case) {
    let info = nki::registry().into_iter().find(|k| k.name == case.kernel).unwrap();
    let flags = write_inputs(dir, case);
    let out = dir.join(case.kernel);
    std::fs::create_dir(&out).unwrap();
    let ranks = case.ranks.to_string();
    let mut args = vec!["run", case.kernel, "--out", case.kernel, "--ranks", &ranks, "--target", target_of(case)];
    args.extend(flags.iter().map(String::as_str));
    let o = nki_in(dir, &args);
    assert!(o.status.success(), "{}: {}", case.kernel, stderr(&o));
    let want = rust_outputs(dir, case, info);
    let mut files = 0;
    for (rank, outs) in want.iter().enumerate() {
        for (i, t) in outs.iter().enumerate() {
            let name = if case.ranks == 1 { format!("out{i}.npy") } else { format!("out{i}.rank{rank}.npy") };
            let got = read_npy(out.join(&name)).unwrap_or_else(|e| panic!("{}: {name}: {e}", case.kernel));
            assert_eq!(got.shape, t.shape(), "{} {name}", case.kernel);
            let want: Vec<f64> = t.to_f32_vec().into_iter().map(f64::from).collect();
            assert!(got.data == want, "{} {name}: the file differs from the Rust API's result", case.kernel);
            files += 1;
        }
    }
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), files, "{}: exactly the outputs are written", case.kernel);

    // The same inputs profile.
    let mut prof = vec!["profile", case.kernel, "--json", "--ranks", &ranks, "--target", target_of(case)];
    prof.extend(flags.iter().map(String::as_str));
    let o = nki_in(dir, &prof);
    assert!(o.status.success(), "profile {}: {}", case.kernel, stderr(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(report["estimated_seconds"].as_f64().unwrap() > 0.0, "{}: {report}", case.kernel);
    assert!(report["instructions"].as_u64().unwrap() > 0, "{}: {report}", case.kernel);
}

#[test]
fn the_registry_entry_runs_the_typed_api_with_defaults_and_overrides() {
    let x = common::tensor(&[128, 64], &common::uniform(128 * 64, 5, -1.0, 1.0), nki::Dtype::F32);
    let row = common::tensor(&[1, 64], &common::uniform(64, 6, 0.5, 1.5), nki::Dtype::F32);
    let launch = Launch::new();
    let run = |info: &FunctionInfo, args: Vec<Option<ArgValue>>| launch.run(|ctx| (info.entry.unwrap())(ctx, &args)).unwrap();
    let t = |t: &Tensor| Some(ArgValue::Tensor(t.clone()));
    // `eps` omitted takes the Python default; given, it is passed on.
    for (eps, want) in [(None, layernorm::Call::new(&x, &row, &row)), (Some(0.5), layernorm::Call::new(&x, &row, &row).eps(0.5))] {
        let got = run(&layernorm::INFO, vec![t(&x), t(&row), t(&row), eps.map(ArgValue::Float)]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].to_f32_vec(), want.launch(&launch).unwrap().to_f32_vec());
    }
    // A tuple result is the outputs in order.
    let got = run(&topk::INFO, vec![t(&x), Some(ArgValue::Int(8))]);
    let (values, indices) = topk::Call::new(&x, 8).launch(&launch).unwrap();
    assert_eq!((got[0].to_f32_vec(), got[1].to_f32_vec()), (values.to_f32_vec(), indices.to_f32_vec()));
    // A value of the wrong kind is refused naming the parameter.
    let e = launch.run(|ctx| (topk::INFO.entry.unwrap())(ctx, &[t(&x), Some(ArgValue::Float(4.5))])).unwrap_err();
    assert_eq!(e.to_string(), "invalid k = 4.5: k takes an int");
    assert_eq!(layernorm::INFO.params[3].default, Some("1e-5"));
}

/// Runs `kernel`'s case with each `(extra flags, expected error parts)` of
/// `refusals` (an extra flag replaces the case's own): each is refused in one
/// line with exit code 2 and writes nothing. Returns the scratch directory.
fn assert_refused(kernel: &str, refusals: &[(&[&str], &[&str])]) -> PathBuf {
    let dir = common::scratch(&format!("cli_run_bundle_{kernel}"));
    std::fs::create_dir(dir.join("out")).unwrap();
    let case = CASES.iter().find(|c| c.kernel == kernel).unwrap();
    let flags = write_inputs(&dir, case);
    let run = |extra: &[&str]| {
        let mut args: Vec<&str> = vec!["run", kernel, "--out", "out"];
        // The case's flag-value pairs, less those `extra` overrides.
        let kept = flags.chunks(2).filter(|pair| !extra.iter().any(|e| e.split('=').next() == Some(pair[0].as_str())));
        args.extend(kept.flatten().map(String::as_str));
        args.extend(extra);
        nki_in(&dir, &args)
    };
    for (extra, want) in refusals {
        let before = files(&dir);
        let o = run(extra);
        let err = stderr(&o);
        assert_eq!((o.status.code(), err.lines().count()), (Some(2), 1), "{extra:?}: {err}");
        for w in *want {
            assert!(err.contains(w), "{extra:?}: `{w}` missing from {err}");
        }
        assert!(files(&dir) == before && std::fs::read_dir(dir.join("out")).unwrap().count() == 0, "{extra:?} wrote something");
    }
    dir
}

#[test]
fn a_configuration_object_is_given_field_by_field() {
    let refusals: &[(&[&str], &[&str])] = &[
        (
            &["--cfg.fuse-rope"],
            &["attention_tkg refused its inputs", "inv_freqs (d_head // 2, 1) must be given exactly when cfg.fuse_rope=True"],
        ),
        (&["--cfg.block-len", "16"], &["a block KV cache (block_len > 0) needs active_blocks_table"]),
        (&["--cfg.qk-in-sb=false"], &["without fuse_rope, q and k_active come in the qk_in_sb layouts"]),
        (&["--cfg.bss", "1"], &["--cfg.bss is not a parameter of attention_tkg", "did you mean --cfg.bs?"]),
        (&["--cfg.q-head=two"], &["--cfg.q-head two: expected an int"]),
    ];
    let dir = assert_refused("attention_tkg", refusals);
    let help = nki_in(&dir, &["run", "attention_tkg", "--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    for w in
        ["--cfg.bs VALUE", "an int, a field of AttnTKGConfig (default 0)", "--cfg.strided-mm1 VALUE", "(default True)", "--cfg.FIELD VALUE"]
    {
        assert!(help.status.success() && text.contains(w), "`{w}` missing from {text}");
    }
}

#[test]
fn a_replica_group_is_given_by_its_rings() {
    let refusals: &[(&[&str], &[&str])] = &[
        (&["--replica-groups", "0,x"], &["--replica-groups 0,x: expected a replica group's rings such as 0,1,2,3 or 0,1;2,3"]),
        (&["--replica-groups", "0,1;2,4", "--ranks", "4"], &["ranks must be distinct and in 0..4; rank 4 is not"]),
        // A group of four where tp_degree says two: the gathered tile is too narrow.
        (&["--replica-groups", "0,1,2,3", "--ranks", "4"], &["must have shape [128, 384] (the 4 srcs concatenated along dim 1)"]),
    ];
    let dir = assert_refused("allgather_sb2sb", refusals);
    let help = nki_in(&dir, &["run", "allgather_sb2sb", "--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(help.status.success() && text.contains("--replica-groups VALUE") && text.contains("an ncc.ReplicaGroup (required)"), "{text}");
}

#[test]
fn a_tuple_is_given_by_its_items() {
    let refusals: &[(&[&str], &[&str])] = &[
        (&["--padding", "1,2,3"], &["--padding 1,2,3: expected a tuple (int, int) such as 1,1"]),
        (&["--padding", "1,x"], &["--padding 1,x: expected a tuple (int, int) such as 1,1"]),
        // Read as a pair, refused by the kernel's rule.
        (&["--padding", "(-1, 0)"], &["conv1d refused its inputs", "Padding must be non-negative, got (pad_left=-1, pad_right=0)"]),
    ];
    let dir = assert_refused("conv1d", refusals);
    let help = nki_in(&dir, &["run", "conv1d", "--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.status.success() && text.contains("--padding VALUE") && text.contains("a tuple (int, int) such as 1,1 (default (0, 0))"),
        "{text}"
    );
    // A tuple of tuples: each item parenthesized.
    let refusals: &[(&[&str], &[&str])] = &[
        (&["--padding", "0,0,2,1"], &["--padding 0,0,2,1: expected a tuple ((int, int), (int, int)) such as (1,1),(1,1)"]),
        (&["--in-perm", "0,1,2"], &["--in-perm 0,1,2: expected a tuple (int, int, int, int) such as 1,1,1,1"]),
        (&["--stride", "2,2"], &["Only stride_h=1 is supported, got stride_h=2"]),
    ];
    assert_refused("depthwise_conv1d_implicit_gemm", refusals);
}

#[test]
fn a_refused_kargs_field_value_is_named() {
    let refusals: &[(&[&str], &[&str])] = &[
        (
            &["--kargs.norm-type", "LAYER_NORM"],
            &[
                "rmsnorm_quant_kernel refused its inputs",
                "kargs.norm_type must be NormType.NO_NORM or NormType.RMS_NORM (the members implemented), got kargs.norm_type = NormType.LAYER_NORM",
            ],
        ),
        (&["--kargs.quantization-type=ROW_MX"], &["got kargs.quantization_type = QuantizationType.ROW_MX"]),
        // A member's value, or a name the enum lacks, is no member: the members are listed.
        (
            &["--kargs.norm-type", "1"],
            &["--kargs.norm-type 1: expected a NormType member: NO_NORM, RMS_NORM, LAYER_NORM, RMS_NORM_SKIP_GAMMA"],
        ),
        (&["--kargs.quantization-type=rows"], &["expected a QuantizationType member: NONE, STATIC, ROW, MX, STATIC_MX, ROW_MX"]),
        (&["--kargs.lower-bound", "-0.5"], &["kargs.lower_bound must be non-negative, got kargs.lower_bound = -0.5"]),
        (&["--kargs.quantization-type=STATIC"], &["input_dequant_scale must be given for static quantization"]),
        // The former keyword parameter: the fields are flags of `kargs` now.
        (&["--eps", "1e-5"], &["--eps is not a parameter of rmsnorm_quant_kernel", "--kargs.lower-bound --kargs.norm-type"]),
    ];
    let dir = assert_refused("rmsnorm_quant_kernel", refusals);
    let help = nki_in(&dir, &["run", "rmsnorm_quant_kernel", "--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    for w in [
        "--kargs.norm-type VALUE",
        "a NormType member: NO_NORM|RMS_NORM|LAYER_NORM|RMS_NORM_SKIP_GAMMA, a field of RmsNormQuantKernelArgs (default NormType.RMS_NORM)",
        "--kargs.eps VALUE",
        "(default 1e-6)",
    ] {
        assert!(help.status.success() && text.contains(w), "`{w}` missing from {text}");
    }
}

#[test]
fn a_config_that_is_not_the_plan_for_the_input_is_refused() {
    let refusals: &[(&[&str], &[&str])] = &[
        (
            &["--config.n-stages", "4"],
            &["rotational_topk refused its inputs", "config.n_stages = 4, the plan for inp [BxS, V], orig_k, n_prgs is 2"],
        ),
        (&["--config.BxS", "8"], &["config.BxS = 8 disagrees with inp, which has 4 rows"]),
        (&["--config.n-prgs", "1"], &["config.n_prgs = 1 disagrees with the launch, which runs 2 program(s)"]),
    ];
    assert_refused("rotational_topk", refusals);
}

/// `nki run` of `case` with the flag-value pairs `keep` admits (the tensors'
/// files already written to `dir`): its outputs, in order.
fn run_outputs(dir: &Path, case: &Case, keep: impl Fn(&str) -> bool) -> Vec<Vec<f32>> {
    let flags = write_inputs(dir, case);
    let out = dir.join("out");
    if out.exists() {
        std::fs::remove_dir_all(&out).unwrap();
    }
    std::fs::create_dir(&out).unwrap();
    let mut args = vec!["run", case.kernel, "--out", "out"];
    args.extend(flags.chunks(2).filter(|pair| keep(&pair[0])).flatten().map(String::as_str));
    let o = nki_in(dir, &args);
    assert!(o.status.success(), "{}: {}", case.kernel, stderr(&o));
    let n = std::fs::read_dir(&out).unwrap().count();
    (0..n).map(|i| read_npy(out.join(format!("out{i}.npy"))).unwrap().data.into_iter().map(|v| v as f32).collect()).collect()
}

/// The tensors of `case`'s parameters named `names`, read from their files in `dir`.
fn case_tensors<const N: usize>(dir: &Path, case: &Case, names: [&str; N]) -> [Tensor; N] {
    names.map(|n| read_tensor_npy(dir.join(file_name(case.kernel, n, None))).unwrap())
}

#[test]
fn an_option_bundle_is_none_unless_a_field_is_given_and_runs_as_the_typed_api() {
    use nkilib::experimental::moe::blockwise_mm_backward::{ClampLimits, blockwise_mm_bwd};
    use nkilib::moe::moe_cte::bwmm_shard_on_block::{SkipMode, bwmm_shard_on_block};
    use nkilib::moe::moe_cte::moe_cte::{MoECTEImplementation, MoECTESpec, moe_cte};
    let dir = common::scratch("cli_run_option_bundle");
    let launch = Launch::new().lnc(2);
    let bits = |ts: Vec<Tensor>| ts.iter().map(Tensor::to_f32_vec).collect::<Vec<_>>();
    let all = |_: &str| true;
    let without = |prefix: &'static str| move |flag: &str| !flag.starts_with(prefix);

    // bwmm_shard_on_block and moe_cte: `skip_dma` None, then given by one field.
    let case = Case { kernel: "bwmm_shard_on_block", ranks: 1, params: MOE_CTE_BLOCKS };
    let given = run_outputs(&dir, &case, all);
    let absent = run_outputs(&dir, &case, without("--skip-dma"));
    const MOE_INPUTS: [&str; 6] =
        ["hidden_states", "expert_affinities_masked", "gate_up_proj_weight", "down_proj_weight", "token_position_to_id", "block_to_expert"];
    let [hid, aff, gu, dw, pos, b2e] = case_tensors(&dir, &case, MOE_INPUTS);
    let skip = SkipMode { skip_weight: true, ..SkipMode::default() };
    let call = || bwmm_shard_on_block::Call::new(&hid, &aff, &gu, &dw, 128, &pos, &b2e);
    assert_eq!(absent, bits(vec![call().launch(&launch).unwrap()]), "bwmm_shard_on_block without skip_dma");
    assert_eq!(given, bits(vec![call().skip_dma(skip.clone()).launch(&launch).unwrap()]), "bwmm_shard_on_block with skip_dma");
    let case = CASES.iter().find(|c| c.kernel == "moe_cte").unwrap();
    let (given, absent) = (run_outputs(&dir, case, all), run_outputs(&dir, case, without("--skip-dma")));
    let [hid, aff, gu, dw, pos, b2e] = case_tensors(&dir, case, MOE_INPUTS);
    let spec = MoECTESpec::new(MoECTEImplementation::shard_on_block);
    let moe = || moe_cte::Call::new(&hid, &aff, &gu, &dw, &pos, &b2e, 128, &spec);
    assert_eq!(absent, bits(moe().launch(&launch).unwrap().0), "moe_cte without skip_dma");
    assert_eq!(given, bits(moe().skip_dma(skip).launch(&launch).unwrap().0), "moe_cte with skip_dma");

    // blockwise_mm_bwd: `clamp_limits` None, then one limit given, the others None.
    let case = Case { kernel: "blockwise_mm_bwd", ranks: 1, params: MOE_BWD };
    let given = run_outputs(&dir, &case, all);
    let absent = run_outputs(&dir, &case, without("--clamp-limits"));
    let [x, aff, gu, dw, ckg, ckd, pos, b2e, dy] = case_tensors(
        &dir,
        &case,
        [
            "hidden_states",
            "expert_affinities_masked",
            "gate_up_proj_weight",
            "down_proj_weight",
            "gate_up_proj_act_checkpoint_T",
            "down_proj_act_checkpoint",
            "token_position_to_id",
            "block_to_expert",
            "output_hidden_states_grad",
        ],
    );
    let call = || blockwise_mm_bwd::Call::new(&x, &aff, &gu, &dw, &ckg, &ckd, &pos, &b2e, &dy, 128);
    let limits = ClampLimits { linear_clamp_upper_limit: Some(0.5), ..ClampLimits::default() };
    assert_eq!(absent, bits(call().launch(&launch).unwrap().0), "blockwise_mm_bwd without clamp_limits");
    assert_eq!(given, bits(call().clamp_limits(limits).launch(&launch).unwrap().0), "blockwise_mm_bwd with clamp_limits");
    assert_ne!(given, absent, "the clamp takes effect");

    // A field's value is checked before any payload is read; the help says the bundle is optional.
    let refusals: &[(&[&str], &[&str])] = &[
        (&["--clamp-limits.linear-clamp-upper-limit", "high"], &["--clamp-limits.linear-clamp-upper-limit high: expected a finite float"]),
        (&["--clamp-limits.upper", "1"], &["--clamp-limits.upper is not a parameter of blockwise_mm_bwd"]),
        (&["--skip-dma.skip-token", "maybe"], &["--skip-dma.skip-token maybe: expected true or false"]),
    ];
    let dir = assert_refused("blockwise_mm_bwd", refusals);
    let help = nki_in(&dir, &["run", "blockwise_mm_bwd", "--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    for w in [
        "--clamp-limits.linear-clamp-upper-limit VALUE",
        "a float, a field of ClampLimits (default None)",
        "clamp_limits is None unless one of its fields is given",
        "skip_dma is None unless one of its fields is given",
    ] {
        assert!(help.status.success() && text.contains(w), "`{w}` missing from {text}");
    }
}

/// Every file under `dir` with its bytes (none for a directory, a FIFO or a socket).
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut all: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.display().to_string(), if p.is_file() { std::fs::read(&p).unwrap() } else { Vec::new() }))
        .collect();
    all.sort();
    all
}

#[test]
fn refused_inputs_name_the_parameter_exit_2_and_write_nothing() {
    let dir = common::scratch("cli_run_refused");
    std::fs::create_dir(dir.join("out")).unwrap();
    write_npy(dir.join("x.npy"), &[128, 64], &common::uniform(128 * 64, 1, -1.0, 1.0), NpyType::F32).unwrap();
    write_npy(dir.join("short.npy"), &[100, 64], &common::uniform(100 * 64, 2, -1.0, 1.0), NpyType::F32).unwrap();
    write_npy(dir.join("ids.npy"), &[128, 1], &[0.5; 128], NpyType::F32).unwrap();
    write_npy(dir.join("idx.npy"), &[16, 4], &[0.0; 64], NpyType::U32).unwrap();
    std::fs::write(dir.join("junk.npy"), b"not an array").unwrap();
    write_npy(dir.join("xi.npy"), &[64, 1, 1, 8], &[1.0; 512], NpyType::I32).unwrap();
    write_npy(dir.join("angles.npy"), &[32, 1, 8], &[0.5; 256], NpyType::F32).unwrap();
    let cases: &[(&[&str], &[&str])] = &[
        (&["run", "cumsum", "--xx", "x.npy", "--out", "out"], &["--xx is not a parameter of cumsum", "did you mean --x?"]),
        (&["run", "cumsun", "--x", "x.npy", "--out", "out"], &["unknown kernel 'cumsun'", "did you mean 'cumsum'?"]),
        (&["run", "tensor_add", "--a", "x.npy", "--out", "out"], &["tensor_add requires --b"]),
        (&["run", "cumsum", "--x", "missing.npy", "--out", "out"], &["--x missing.npy"]),
        (&["run", "cumsum", "--x", "junk.npy", "--out", "out"], &["--x", "junk.npy"]),
        (
            &["run", "tensor_add", "--a", "x.npy", "--b", "short.npy", "--out", "out"],
            &["tensor_add refused its inputs", "--b short.npy: float32 [100, 64]", "same shape"],
        ),
        (&["run", "cumsum", "--x", "x.npy", "--axis", "0", "--out", "out"], &["cumsum refused its inputs", "got axis = 0"]),
        (
            &["run", "embedding", "--table", "x.npy", "--ids", "ids.npy", "--out", "out"],
            &["--ids ids.npy: invalid ids = float32: embedding takes ids as int32 or uint32"],
        ),
        (&["run", "topk", "--x", "x.npy", "--k", "two", "--out", "out"], &["--k two: expected an int"]),
        (
            &[
                "run",
                "router_topk",
                "--x",
                "x.npy",
                "--w",
                "x.npy",
                "--router-logits",
                "x.npy",
                "--expert-affinities",
                "x.npy",
                "--expert-index",
                "idx.npy",
                "--act-fn",
                "1",
                "--k",
                "4",
                "--x-hbm-layout",
                "0",
                "--x-sb-layout",
                "0",
                "--out",
                "out",
            ],
            &["--act-fn 1: expected a RouterActFnType member: SIGMOID, SOFTMAX"],
        ),
        (
            &["run", "RoPE", "--x-in", "xi.npy", "--cos", "angles.npy", "--sin", "angles.npy", "--out", "out"],
            &["--x-in xi.npy: invalid x_in = int32: RoPE takes x_in as float32, bfloat16 or float16"],
        ),
        (&["run", "cumsum", "--x", "x.npy"], &["cumsum requires --out DIR"]),
        (&["run", "cumsum", "--x", "x.npy", "--out", "nowhere"], &["--out nowhere: not an existing directory"]),
        (&["run", "cumsum", "--x", "x.npy", "--out", "out", "--lnc", "4"], &["--lnc 4"]),
        (&["run", "cumsum", "--x", "x.npy", "--out", "out", "--precision", "fp64"], &["--precision fp64"]),
        (&["profile", "softmax", "--x", "short.npy", "--json"], &["--x short.npy"]),
    ];
    for (args, want) in cases {
        let before = files(&dir);
        let o = nki_in(&dir, args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        for w in *want {
            assert!(err.contains(w), "{args:?}: `{w}` missing from {err}");
        }
        assert!(files(&dir) == before && std::fs::read_dir(dir.join("out")).unwrap().count() == 0, "{args:?} wrote something");
    }
    let help = nki_in(&dir, &["run", "layernorm", "--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(help.status.success() && text.contains("--eps VALUE") && text.contains("a float >= 0 (default 1e-5)"), "{text}");
    let help = nki_in(&dir, &["run", "router_topk", "--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.status.success() && text.contains("--act-fn VALUE") && text.contains("a RouterActFnType member: SIGMOID|SOFTMAX"),
        "{text}"
    );
    // Shapes by the kernel's dim names, and its top-level asserts on them, constants shown by value,
    // the values they format as `<name>` placeholders (never the format string's raw `{name}`).
    let help = nki_in(&dir, &["run", "tp_matmul", "--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let x = lines.iter().position(|l| l.starts_with("--x-t FILE.npy")).unwrap_or_else(|| panic!("{text}"));
    assert!(lines[x].contains("a tensor [k_shard, m] of float32|"), "{text}");
    assert_eq!(
        lines[x + 1..x + 3],
        ["- w1 is [K, H/R] and x_t [K/R, M]: K = <k> is not 4 x <k_shard>", "- M must be a multiple of 4 x 128, got <m>"]
    );
    assert!(lines[x + 3].starts_with("--w1 FILE.npy") && lines[x + 3].contains("a tensor [k, h_shard] of"), "{text}");
}

// ---- The parameters' contracts: dtypes and ranges, from the registry ----

/// The `.npy` type that loads as the first dtype `p` accepts that a `.npy`
/// element type names (packed MX dtypes load only from raw codes).
fn npy_of(p: &ParamInfo) -> NpyType {
    let loads = |nl: &str| NpyType::ALL.into_iter().find(|t| t.name() == nl);
    let dtypes = if p.dtypes.is_empty() { &["float32"][..] } else { p.dtypes };
    dtypes.iter().find_map(|d| loads(d)).unwrap_or_else(|| panic!("no .npy type loads as any of {dtypes:?}"))
}

/// A `[2, 2]` file of `ty` holding small values every type can hold.
fn small_file(dir: &Path, name: &str, ty: NpyType) -> String {
    write_npy(dir.join(name), &[2, 2], &[0.0, 1.0, 1.0, 0.0], ty).unwrap();
    name.to_string()
}

/// A value of a scalar parameter's kind (inside its range), as text.
fn any_value(p: &ParamInfo) -> String {
    match p.kind {
        ParamKind::Int | ParamKind::Float => {
            let lo = p.range.iter().find_map(|b| match *b {
                Bound::Ge(x) => Some(x),
                Bound::Gt(x) => Some(x + 1.0),
                _ => None,
            });
            let v = lo.unwrap_or(1.0).max(1.0);
            if p.kind == ParamKind::Int { format!("{}", v as i64) } else { format!("{v}") }
        }
        ParamKind::Bool => "false".into(),
        ParamKind::Dtype => "float32".into(),
        ParamKind::Str => "x".into(),
        ParamKind::Groups | ParamKind::ReplicaGroup => "0".into(),
        ParamKind::Enum { members, .. } => members[0].into(),
        ParamKind::Tuple { items } => items.iter().map(|k| any_value(&ParamInfo::required(p.name, *k))).collect::<Vec<_>>().join(","),
        ParamKind::Tensor => unreachable!("tensors are files"),
    }
}

/// `nki run KERNEL` with every parameter given: tensors as files of a dtype
/// they accept (or `bad` for the one named), scalars as values in range (or
/// `value` for the one named).
fn contract_args(dir: &Path, k: &FunctionInfo, bad: (&str, &str)) -> Vec<String> {
    let mut args = vec!["run".to_string(), k.name.to_string(), "--out".into(), "out".into()];
    for p in k.params {
        let value = if p.name == bad.0 {
            bad.1.to_string()
        } else if p.kind == ParamKind::Tensor {
            let ty = npy_of(p);
            small_file(dir, &format!("ok_{}.npy", ty.name()), ty)
        } else if p.optional || !p.optional_bundles.is_empty() {
            continue;
        } else {
            any_value(p)
        };
        args.extend([format!("--{}", p.name.replace('_', "-")), value]);
    }
    args
}

/// Runs `args` in `dir` and asserts a refusal: exit 2, one line holding `want`,
/// no file under `dir` changed or added.
fn assert_refused_line(dir: &Path, args: &[String], want: &str) {
    let before = files(dir);
    let o = Command::new(env!("CARGO_BIN_EXE_nki")).args(args).current_dir(dir).output().expect("running nki");
    let err = stderr(&o);
    assert_eq!((o.status.code(), err.lines().count()), (Some(2), 1), "{args:?}: {err}");
    assert!(err.contains(want), "{args:?}: `{want}` missing from {err}");
    assert!(files(dir) == before && std::fs::read_dir(dir.join("out")).unwrap().count() == 0, "{args:?} wrote something");
}

/// Threads for the contract sweep: each refusal waits mostly on a `nki`
/// process, so a few run at once while the machine's cores stay busy.
const CONTRACT_THREADS: usize = 4;

#[test]
fn every_tensor_parameter_refuses_each_dtype_it_does_not_accept() {
    let kernels: Vec<&FunctionInfo> = nki::registry().into_iter().filter(|k| k.entry.is_some()).collect();
    // Kernel i on thread i mod threads, each thread in a directory of its own
    // (a refusal asserts that nothing in its directory changed).
    let counts: Vec<(usize, usize)> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..CONTRACT_THREADS)
            .map(|t| {
                let mine: Vec<&FunctionInfo> = kernels.iter().skip(t).step_by(CONTRACT_THREADS).copied().collect();
                s.spawn(move || {
                    let dir = common::scratch(&format!("cli_run_contracts_{t}"));
                    std::fs::create_dir(dir.join("out")).unwrap();
                    mine.into_iter().map(|k| refuse_every_other_dtype(&dir, k)).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
                })
            })
            .collect();
        threads.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let (tensor_params, refusals) = counts.into_iter().fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    assert!(kernels.len() >= 28 && tensor_params >= 90, "{} kernels, {tensor_params} tensor parameters", kernels.len());
    eprintln!("{refusals} refusals over {tensor_params} tensor parameters of {} kernels", kernels.len());
}

/// Every tensor parameter of `k` given a file of each dtype its contract does
/// not take: refused by the command line from the header (run in `dir`) and
/// by the Rust API, with the same message, and the emitted kernel asserts the
/// contract. Returns the kernel's (tensor parameters, refusals).
fn refuse_every_other_dtype(dir: &Path, k: &FunctionInfo) -> (usize, usize) {
    let (mut tensor_params, mut refusals) = (0, 0);
    for p in k.params.iter().filter(|p| p.kind == ParamKind::Tensor) {
        tensor_params += 1;
        assert!(!p.dtypes.is_empty(), "{}: {} has no dtype contract", k.name, p.name);
        // The emitted kernel asserts the same contract: a row of its
        // `check_contract` call's dtypes.
        let tuple = p.dtypes.iter().map(|d| format!("nl.{d}")).collect::<Vec<_>>().join(", ");
        let tuple = if p.dtypes.len() == 1 { format!("({tuple},)") } else { format!("({tuple})") };
        // A field of an `Option` bundle is `None` where a bundle holding it is.
        let value = match p.optional_bundles {
            [] => p.name.to_string(),
            bundles => {
                format!("None if {} else {}", bundles.iter().map(|b| format!("{b} is None")).collect::<Vec<_>>().join(" or "), p.name)
            }
        };
        let optional = !p.optional_bundles.is_empty() || (p.optional && p.default.is_none_or(|d| d == "None"));
        let row = format!("(\"{}\", {value}, {tuple}, \"{}\", {})", p.name, either(p.dtypes), if optional { "True" } else { "False" });
        let call = format!("check_contract(\"{}\", ", k.name);
        assert!(k.source.contains(&call) && k.source.contains(&row), "{}: `{row}` missing from the emitted kernel", k.name);
        for ty in NpyType::ALL.into_iter().filter(|ty| !p.accepts(ty.dtype())) {
            let rule = format!("invalid {} = {}: {} takes {} as {}", p.name, ty.dtype(), k.name, p.name, either(p.dtypes));
            // The command line, from the header.
            let file = small_file(dir, &format!("bad_{}.npy", ty.name()), ty);
            let flag = p.name.replace('_', "-");
            assert_refused_line(dir, &contract_args(dir, k, (p.name, &file)), &format!("--{flag} {file}: {rule}"));
            // The Rust API: the kernel's entry, every other argument given.
            let t = read_tensor_npy(dir.join(&file)).unwrap();
            let args: Vec<Option<ArgValue>> = k
                .params
                .iter()
                .map(|q| match q.kind {
                    _ if q.name == p.name => Some(ArgValue::Tensor(t.clone())),
                    ParamKind::Tensor => {
                        let ty = npy_of(q);
                        Some(ArgValue::Tensor(read_tensor_npy(dir.join(format!("ok_{}.npy", ty.name()))).unwrap()))
                    }
                    _ if q.optional || !q.optional_bundles.is_empty() => None,
                    ParamKind::Int => Some(ArgValue::Int(any_value(q).parse().unwrap())),
                    ParamKind::Float => Some(ArgValue::Float(any_value(q).parse().unwrap())),
                    ParamKind::Bool => Some(ArgValue::Bool(false)),
                    ParamKind::Enum { members, .. } => Some(ArgValue::Member(members[0].to_string())),
                    // One rank: a group of rank 0 alone.
                    ParamKind::ReplicaGroup => Some(ArgValue::Groups(vec![vec![0]])),
                    other => panic!("{}: no value for a required {other:?}", k.name),
                })
                .collect();
            let e = Launch::new().run(|ctx| (k.entry.unwrap())(ctx, &args)).unwrap_err();
            assert_eq!(e.message, rule, "{} {} {}", k.name, p.name, ty.name());
            let file = Path::new(k.file).file_name().unwrap().to_string_lossy();
            assert!(e.to_string().contains(&*file), "{e}: the error points at the kernel's declaration");
            refusals += 1;
        }
    }
    (tensor_params, refusals)
}

#[test]
fn every_declared_range_is_enforced_by_the_command_line_and_the_rust_api() {
    let dir = common::scratch("cli_run_ranges");
    std::fs::create_dir(dir.join("out")).unwrap();
    let mut ranged = Vec::new();
    for k in nki::registry().into_iter().filter(|k| k.entry.is_some()) {
        for p in k.params.iter().filter(|p| !p.range.is_empty()) {
            ranged.push(format!("{}.{}", k.name, p.name));
            // Just outside each bound.
            let step: f64 = if p.kind == ParamKind::Int { 1.0 } else { 0.5 };
            for b in p.range {
                let outside = match *b {
                    Bound::Ge(x) => x - step.max(x.abs()),
                    Bound::Gt(x) | Bound::Lt(x) => x,
                    Bound::Le(x) => x + step.max(x.abs()),
                };
                let text = if p.kind == ParamKind::Int { format!("{}", outside as i64) } else { format!("{outside}") };
                let want = format!("--{} {text}: {} takes {} {}", p.name.replace('_', "-"), k.name, p.name, range_rule(p.range));
                assert_refused_line(&dir, &contract_args(&dir, k, (p.name, &text)), &want);
            }
            let rule = range_rule(p.range);
            let assert = format!("{} takes {} {rule}, not {{{}!r}}", k.name, p.name, p.name);
            assert!(k.source.contains(&assert), "{}: `{assert}` missing from the emitted kernel", k.name);
        }
    }
    for must in ["dropout.rate", "topk.k", "temperature_softmax.inv_temp", "matmul_blocked.tiles_m", "ring_attention_spmd_fwd.num_workers"]
    {
        assert!(ranged.iter().any(|r| r == must), "{must} declares no range: {ranged:?}");
    }
    // Dropout's rate, the case: the Rust API refuses 1.0 (a division by zero) and -0.5.
    let x = Tensor::from_f32(&[128, 4], &[1.0; 512], Dtype::F32).unwrap();
    let seed = Tensor::from_i64(&[1, 1], &[7], Dtype::U32).unwrap();
    for rate in [1.0, -0.5, 1.5] {
        let e = nki_examples::dropout::dropout::Call::new(&x, &seed, rate).launch(&Launch::new()).unwrap_err();
        assert_eq!(e.message, format!("invalid rate = {rate}: dropout takes rate in [0, 1)"));
    }
}

// ---- Files that are not regular, outputs, temporaries, the time limit ----

#[test]
fn a_fifo_a_socket_and_a_device_as_inputs_are_refused_within_a_second() {
    let dir = common::scratch("cli_run_special");
    std::fs::create_dir(dir.join("out")).unwrap();
    let fifo = dir.join("fifo.npy");
    let c = std::ffi::CString::new(fifo.display().to_string()).unwrap();
    // SAFETY: a plain system call on a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let _socket = std::os::unix::net::UnixListener::bind(dir.join("socket.npy")).unwrap();
    write_npy(dir.join("k.npy"), &[1, 16, 128], &[0.5; 2048], NpyType::F32).unwrap();
    write_npy(dir.join("v.npy"), &[1, 128, 16], &[0.5; 2048], NpyType::F32).unwrap();
    for (file, what) in [("fifo.npy", "a FIFO"), ("socket.npy", "a socket"), ("/dev/zero", "a device"), ("/dev/null", "a device")] {
        let commands: [Vec<&str>; 2] = [
            vec!["run", "softmax", "--x", file, "--out", "out", "--timeout", "60"],
            vec!["run", "attention-cte", "--q", file, "--k", "k.npy", "--v", "v.npy", "--out", "out/o.npy"],
        ];
        for args in commands {
            let args: Vec<String> = args.iter().map(ToString::to_string).collect();
            let start = std::time::Instant::now();
            let flag = if args[1] == "softmax" { "--x" } else { "--q" };
            assert_refused_line(&dir, &args, &format!("{flag} {file}: not a regular file ({what})"));
            assert!(start.elapsed() < std::time::Duration::from_secs(1), "{args:?} took {:?}", start.elapsed());
        }
    }
}

#[test]
fn outputs_are_written_in_the_dtype_the_command_announces() {
    let dir = common::scratch("cli_run_out_dtypes");
    std::fs::create_dir(dir.join("out")).unwrap();
    let vals = common::uniform(128 * 64, 3, -1.0, 1.0);
    write_npy(dir.join("x16.npy"), &[128, 64], &vals, NpyType::F16).unwrap();
    write_npy(dir.join("xbf.npy"), &[128, 64], &vals, NpyType::Bf16).unwrap();
    write_npy(dir.join("x.npy"), &[128, 64], &vals, NpyType::F32).unwrap();
    let descr = |name: &str| {
        let bytes = std::fs::read(dir.join("out").join(name)).unwrap();
        let header = String::from_utf8_lossy(&bytes[10..60]).into_owned();
        header.split('\'').nth(3).unwrap().to_string()
    };
    for (args, files) in [
        (vec!["--x", "x16.npy"], vec![("out0.npy", "<f2", Dtype::F16, "float16")]),
        (vec!["--x", "xbf.npy"], vec![("out0.npy", "<V2", Dtype::Bf16, "bfloat16")]),
        (vec!["--x", "x16.npy", "--precision", "fp32"], vec![("out0.npy", "<f4", Dtype::F32, "float32")]),
        (vec!["--x", "x.npy", "--k", "8"], vec![("out0.npy", "<f4", Dtype::F32, "float32"), ("out1.npy", "<u4", Dtype::U32, "uint32")]),
    ] {
        let kernel = if args.contains(&"--k") { "topk" } else { "softmax" };
        let mut all = vec!["run", kernel, "--out", "out"];
        all.extend(&args);
        let o = nki_in(&dir, &all);
        assert!(o.status.success(), "{all:?}: {}", stderr(&o));
        let stdout = String::from_utf8_lossy(&o.stdout);
        for (name, want_descr, dtype, announced) in files {
            assert_eq!(descr(name), want_descr, "{all:?} {name}");
            assert_eq!(read_tensor_npy(dir.join("out").join(name)).unwrap().dtype(), dtype, "{all:?} {name}");
            assert!(stdout.contains(&format!("wrote out/{name} [128, ")) && stdout.contains(&format!("] {announced}\n")), "{stdout}");
        }
    }
}

#[test]
fn an_unwritable_output_is_refused_before_the_launch_and_stale_temporaries_are_removed() {
    let dir = common::scratch("cli_run_out_checks");
    std::fs::create_dir_all(dir.join("out/out1.npy")).unwrap();
    write_npy(dir.join("x.npy"), &[128, 64], &common::uniform(128 * 64, 4, -1.0, 1.0), NpyType::F32).unwrap();
    // topk's second output is a directory: refused before the kernel runs, as a usage error.
    let args: Vec<String> = ["run", "topk", "--x", "x.npy", "--k", "8", "--out", "out"].iter().map(ToString::to_string).collect();
    let before = files(&dir);
    let o = nki_in(&dir, &args.iter().map(String::as_str).collect::<Vec<_>>());
    let err = stderr(&o);
    assert_eq!((o.status.code(), err.trim_end()), (Some(2), "error: --out out/out1.npy: is a directory"), "{err}");
    assert!(files(&dir) == before && std::fs::read_dir(dir.join("out")).unwrap().count() == 1);
    std::fs::remove_dir(dir.join("out/out1.npy")).unwrap();
    // A temporary of a run that died (its process is gone) is removed; one of a live process is not.
    let dead = Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    let mut dead = dead;
    dead.wait().unwrap();
    let stale = [format!(".out0.npy.nki-{dead_pid}-0.tmp"), format!(".out1.npy.nki-{dead_pid}-1.bak")];
    let live = format!(".out0.npy.nki-{}-0.tmp", std::process::id());
    for name in stale.iter().chain([&live]) {
        std::fs::write(dir.join("out").join(name), b"partial").unwrap();
    }
    let o = nki_in(&dir, &args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", stderr(&o));
    let mut left: Vec<String> =
        std::fs::read_dir(dir.join("out")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    left.sort();
    assert_eq!(left, [live, "out0.npy".to_string(), "out1.npy".to_string()]);
}

#[test]
fn the_time_limit_bounds_reading_the_inputs() {
    let dir = common::scratch("cli_run_read_limit");
    std::fs::create_dir(dir.join("out")).unwrap();
    // A 512 MiB float32 input (a sparse file: its zeros take no disk), far more than 1 ms of reading.
    let (rows, cols) = (1usize << 17, 1usize << 10);
    let bytes = nki::io::npy::header_bytes(NpyType::F32, &[rows, cols]);
    let len = bytes.len() as u64 + (rows * cols * 4) as u64;
    std::fs::write(dir.join("big.npy"), &bytes).unwrap();
    std::fs::OpenOptions::new().write(true).open(dir.join("big.npy")).unwrap().set_len(len).unwrap();
    let before = files(&dir);
    let start = std::time::Instant::now();
    let o = nki_in(&dir, &["run", "softmax", "--x", "big.npy", "--out", "out", "--timeout", "0.001"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.starts_with("error: the command did not finish within 1ms (--timeout): "), "{err}");
    assert!(start.elapsed() < std::time::Duration::from_secs(5), "{:?}", start.elapsed());
    assert!(files(&dir) == before && std::fs::read_dir(dir.join("out")).unwrap().count() == 0);
}

// ---- float8 and packed MX tensors, given as their raw codes ----

/// `n` float8 codes of either MX element format, finite in both (magnitudes
/// below `0x78`: no `float8_e4m3fn` NaN, no `float8_e5m2` infinity or NaN).
fn fp8_codes(n: usize, seed: u64) -> Vec<i64> {
    common::uniform(n, seed, 0.0, 240.0).iter().map(|&u| u as i64).map(|c| if c >= 0x78 { c + 8 } else { c }).collect()
}

/// A packed MX tensor of `shape` whose elements are `codes` (four per word,
/// element `k` in bits `k·bits..`).
fn packed(shape: &[usize], codes: &[i64], dtype: Dtype) -> Tensor {
    let bits = dtype.packs().unwrap().1;
    let words: Vec<i64> = codes.chunks(4).map(|c| c.iter().enumerate().map(|(k, &v)| v << (bits * k as u32)).sum()).collect();
    Tensor::from_i64(shape, &words, dtype).unwrap()
}

/// `n` biased MX scale exponents (`2^-9 .. 2^-5`) as a `uint8` tensor of `shape`.
fn mx_scales(shape: &[usize], seed: u64) -> Tensor {
    let n = shape.iter().product();
    common::tensor(shape, &common::uniform(n, seed, 118.0, 123.0).iter().map(|v| v.floor()).collect::<Vec<_>>(), Dtype::U8)
}

/// A bfloat16 tensor of `shape`, uniform in `[-1, 1)`.
fn bf16(shape: &[usize], seed: u64) -> Tensor {
    common::tensor(shape, &common::uniform(shape.iter().product(), seed, -1.0, 1.0), Dtype::Bf16)
}

/// Writes `tensors` under `dir` as `.npy` files (packed MX tensors as their
/// words, the storage integer of their width) and returns `nki run KERNEL` on
/// trn3 with `lnc` programs: each tensor's flag naming its file, with
/// `:DTYPE` for the packed ones, then `scalars`.
fn coded_args(dir: &Path, kernel: &str, lnc: usize, tensors: &[(&str, &Tensor)], scalars: &[(&str, &str)]) -> Vec<String> {
    let mut args: Vec<String> = ["run", kernel, "--out", "out", "--target", "trn3", "--lnc", &lnc.to_string()].map(String::from).to_vec();
    for (param, t) in tensors {
        let file = format!("{kernel}.{param}.npy");
        nki::io::npy::write_tensor_npy(std::fs::File::create(dir.join(&file)).unwrap(), t).unwrap();
        let value = if NpyType::codes_of(t.dtype()).is_some() { format!("{file}:{}", t.dtype()) } else { file };
        args.extend([format!("--{}", param.replace('_', "-")), value]);
    }
    args.extend(scalars.iter().flat_map(|(p, v)| [format!("--{}", p.replace('_', "-")), v.to_string()]));
    args
}

/// Runs `args` in `dir` (whose `out/` is empty) and asserts its one output
/// equals `want`, the typed API's result, bit for bit; leaves `out/` empty.
fn assert_runs_as(dir: &Path, args: &[String], want: &Tensor) {
    let o = Command::new(env!("CARGO_BIN_EXE_nki")).args(args).current_dir(dir).output().expect("running nki");
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    let got = read_npy(dir.join("out/out0.npy")).unwrap();
    assert_eq!(got.shape, want.shape(), "{args:?}");
    let want: Vec<f64> = want.to_f32_vec().into_iter().map(f64::from).collect();
    assert!(got.data == want, "{args:?}: the file differs from the typed API's result");
    assert_eq!(std::fs::read_dir(dir.join("out")).unwrap().count(), 1);
    std::fs::remove_file(dir.join("out/out0.npy")).unwrap();
}

#[test]
fn qkv_tkg_mx_runs_from_packed_weights_as_the_typed_api() {
    use nkilib::qkv::qkv_tkg::{NormType, QuantizationType, qkv_tkg};
    let dir = common::scratch("cli_run_qkv_tkg_mx");
    std::fs::create_dir(dir.join("out")).unwrap();
    // 12 tokens, H = 1024 (two packed tiles over trn3's 2 programs), I = 512, RMSNorm.
    let (hidden, gamma) = (bf16(&[12, 1, 1024], 1), bf16(&[1, 1024], 2));
    let w = packed(&[256, 512], &fp8_codes(1024 * 512, 3), Dtype::Fp8E4m3Fnx4);
    let scales = mx_scales(&[32, 512], 4);
    let trn3 = Launch::new().generation(nki::hw::Generation::Trn3).lnc(2);
    let want = qkv_tkg::Call::new(&hidden, &w)
        .quantization_type(QuantizationType::MX)
        .is_h_dim_4h_transposed(true)
        .qkv_w_scale(&scales)
        .norm_type(NormType::RMS_NORM)
        .norm_w(&gamma)
        .launch(&trn3)
        .unwrap();
    let tensors = [("hidden", &hidden), ("qkv_w", &w), ("qkv_w_scale", &scales), ("norm_w", &gamma)];
    let scalars = [("quantization_type", "MX"), ("is_h_dim_4h_transposed", "true"), ("norm_type", "RMS_NORM")];
    assert_runs_as(&dir, &coded_args(&dir, "qkv_tkg", 2, &tensors, &scalars), &want.0[0]);
}

#[test]
fn qkv_cte_mx_runs_from_packed_weights_as_the_typed_api() {
    use nkilib::qkv::qkv_cte::{NormType, QKVWeightLayout, QuantizationType, qkv_cte};
    let dir = common::scratch("cli_run_qkv_cte_mx");
    std::fs::create_dir(dir.join("out")).unwrap();
    // 200 tokens over trn3's 2 programs, H = 1024 (two packed tiles), I = 384, RMSNorm.
    let (input, gamma) = (bf16(&[1, 200, 1024], 1), bf16(&[1, 1024], 2));
    let w = packed(&[256, 384], &fp8_codes(1024 * 384, 3), Dtype::Fp8E4m3Fnx4);
    let scales = mx_scales(&[32, 384], 4);
    let trn3 = Launch::new().generation(nki::hw::Generation::Trn3).lnc(2);
    let want = qkv_cte::Call::new(&input, &w)
        .quantization_type(QuantizationType::MX)
        .weight_layout(QKVWeightLayout::MX_CONTIGUOUS)
        .qkv_w_scale(&scales)
        .fused_norm_type(NormType::RMS_NORM)
        .gamma_norm_weights(&gamma)
        .launch(&trn3)
        .unwrap();
    let tensors = [("input", &input), ("fused_qkv_weights", &w), ("qkv_w_scale", &scales), ("gamma_norm_weights", &gamma)];
    let scalars = [("quantization_type", "MX"), ("weight_layout", "MX_CONTIGUOUS"), ("fused_norm_type", "RMS_NORM")];
    assert_runs_as(&dir, &coded_args(&dir, "qkv_cte", 2, &tensors, &scalars), &want.0[0]);
}

#[test]
fn output_projection_cte_mx_runs_from_packed_attention_and_weights_as_the_typed_api() {
    use nkilib::output_projection::output_projection_cte::output_projection_cte::{QuantizationType, output_projection_cte};
    let dir = common::scratch("cli_run_output_projection_cte_mx");
    std::fs::create_dir(dir.join("out")).unwrap();
    // 2 batches of 129 positions, 2 heads of 64 given quantized (K = 128), H = 1024, one program.
    let (b, s, k, h) = (2, 129, 128, 1024);
    let attention = packed(&[b, 1, k / 4, s], &fp8_codes(b * k * s, 5), Dtype::Fp8E4m3Fnx4);
    let input_scales = mx_scales(&[b, k / 32, s], 6);
    let fp4: Vec<i64> = common::uniform(k * h, 7, 0.0, 16.0).iter().map(|&u| (u as i64).min(15)).collect();
    let weight = packed(&[k / 4, h], &fp4, Dtype::Fp4E2m1Fnx4);
    let weight_scales = mx_scales(&[k / 32, h], 8);
    let bias = bf16(&[1, h], 9);
    let trn3 = Launch::new().generation(nki::hw::Generation::Trn3).lnc(1);
    let want = output_projection_cte::Call::new(&attention, &weight)
        .quantization_type(QuantizationType::MX)
        .input_scales(&input_scales)
        .weight_scales(&weight_scales)
        .bias(&bias)
        .launch(&trn3)
        .unwrap();
    let tensors = [
        ("attention", &attention),
        ("weight", &weight),
        ("input_scales", &input_scales),
        ("weight_scales", &weight_scales),
        ("bias", &bias),
    ];
    let args = coded_args(&dir, "output_projection_cte", 1, &tensors, &[("quantization_type", "MX")]);
    assert_runs_as(&dir, &args, &want);

    // Refused from the headers, before anything runs: codes named as another
    // packed dtype than the file's width holds, a dtype the parameter does not
    // take, a packed file not named as one, a dtype that has no codes.
    let with = |param: &str, value: &str| {
        let mut a = args.clone();
        let at = a.iter().position(|f| *f == format!("--{}", param.replace('_', "-"))).unwrap() + 1;
        a[at] = value.to_string();
        a
    };
    let (w, x) = ("output_projection_cte.weight.npy", "output_projection_cte.attention.npy");
    for (param, value, want) in [
        ("weight", format!("{w}:float8_e4m3fn_x4"), format!("--weight {w}: float8_e4m3fn_x4 codes are uint32, but the file holds uint16")),
        (
            "attention",
            format!("{x}:float8_e5m2_x4"),
            format!("--attention {x}: invalid attention = float8_e5m2_x4: output_projection_cte takes attention as"),
        ),
        ("weight", w.to_string(), format!("--weight {w}: invalid weight = uint16")),
        ("weight", w.to_string(), "(uint16 files of codes are read as float4_e2m1fn_x4 when the path ends in the dtype".into()),
        ("weight", format!("{w}:bfloat16"), format!("--weight {w}: bfloat16 is not read from codes")),
    ] {
        assert_refused_line(&dir, &with(param, &value), &want);
    }
    // A packed shape the kernel refuses: a usage error naming the input's packed dtype and shape.
    let short = packed(&[k / 4 - 8, h], &fp4[..(k - 32) * h], Dtype::Fp4E2m1Fnx4);
    nki::io::npy::write_tensor_npy(std::fs::File::create(dir.join("short.npy")).unwrap(), &short).unwrap();
    assert_refused_line(&dir, &with("weight", "short.npy:float4_e2m1fn_x4"), "--weight short.npy: float4_e2m1fn_x4 [24, 1024]");
}

#[test]
fn mlp_mx_decode_runs_from_packed_weights_as_the_typed_api() {
    use nkilib::mlp::mlp::{QuantizationType, mlp};
    let dir = common::scratch("cli_run_mlp_mx");
    std::fs::create_dir(dir.join("out")).unwrap();
    // 4 tokens, H = 3072 (6 packed tiles over trn3's 2 programs), I = 384,
    // float8_e5m2 weights (uint32 words that could as well be float8_e4m3fn:
    // the path names which), the three biases.
    let (t, h, i, dt) = (4, 3072, 384, Dtype::Fp8E5m2x4);
    let hidden = bf16(&[t, 1, h], 11);
    let gate = packed(&[128, h / 512, i], &fp8_codes(h * i, 12), dt);
    let up = packed(&[128, h / 512, i], &fp8_codes(h * i, 13), dt);
    let down = packed(&[i / 4, 1, h], &fp8_codes(i * h, 14), dt);
    let (gate_s, up_s, down_s) = (mx_scales(&[16, h / 512, i], 15), mx_scales(&[16, h / 512, i], 16), mx_scales(&[i / 32, 1, h], 17));
    let (gate_b, up_b, down_b) = (bf16(&[i / 4, 1, 4], 18), bf16(&[i / 4, 1, 4], 19), bf16(&[1, h], 20));
    let trn3 = Launch::new().generation(nki::hw::Generation::Trn3).lnc(2);
    let want = mlp::Call::new(&hidden, &gate, &up, &down)
        .quantization_type(QuantizationType::MX)
        .use_tkg_gate_up_proj_column_tiling(false)
        .use_tkg_down_proj_column_tiling(false)
        .gate_w_scale(&gate_s)
        .up_w_scale(&up_s)
        .down_w_scale(&down_s)
        .gate_proj_bias_tensor(&gate_b)
        .up_proj_bias_tensor(&up_b)
        .down_proj_bias_tensor(&down_b)
        .launch(&trn3)
        .unwrap();
    let tensors = [
        ("hidden_tensor", &hidden),
        ("gate_proj_weights_tensor", &gate),
        ("up_proj_weights_tensor", &up),
        ("down_proj_weights_tensor", &down),
        ("gate_w_scale", &gate_s),
        ("up_w_scale", &up_s),
        ("down_w_scale", &down_s),
        ("gate_proj_bias_tensor", &gate_b),
        ("up_proj_bias_tensor", &up_b),
        ("down_proj_bias_tensor", &down_b),
    ];
    let scalars =
        [("quantization_type", "MX"), ("use_tkg_gate_up_proj_column_tiling", "false"), ("use_tkg_down_proj_column_tiling", "false")];
    assert_runs_as(&dir, &coded_args(&dir, "mlp", 2, &tensors, &scalars), &want.0[0]);
}

/// The `float8_e4m3` value of code `c` (sign, 4 exponent bits biased by 7,
/// 3 mantissa bits; exponent 0 subnormal).
fn fp8_e4m3_value(c: i64) -> f64 {
    let (e, m) = ((c >> 3) & 0xf, (c & 7) as f64);
    let mag = if e == 0 { m / 8.0 * 2f64.powi(-6) } else { (1.0 + m / 8.0) * 2f64.powi(e as i32 - 7) };
    if c & 0x80 != 0 { -mag } else { mag }
}

#[test]
fn mlp_static_mx_runs_from_fp8_codes_as_the_typed_api() {
    use nkilib::mlp::mlp::{QuantizationType, mlp};
    let dir = common::scratch("cli_run_mlp_static_mx");
    std::fs::create_dir(dir.join("out")).unwrap();
    // 2 x 64 tokens (context encoding, split over trn3's 2 programs, half a
    // tile each), H = I = 512 (one pre-shuffled block each); each fp8
    // tensor written as its uint8 codes, the path naming the format.
    let (b, s, h, i) = (2, 64, 512, 512);
    let mut args: Vec<String> = ["run", "mlp", "--out", "out", "--target", "trn3", "--lnc", "2"].map(String::from).to_vec();
    let mut fp8 = |param: &str, shape: &[usize], seed: u64| {
        let codes = fp8_codes(shape.iter().product(), seed);
        let file = format!("mlp.{param}.npy");
        write_npy(dir.join(&file), shape, &codes.iter().map(|&c| c as f64).collect::<Vec<_>>(), NpyType::U8).unwrap();
        args.extend([format!("--{}", param.replace('_', "-")), format!("{file}:float8_e4m3")]);
        common::tensor(shape, &codes.iter().map(|&c| fp8_e4m3_value(c)).collect::<Vec<_>>(), Dtype::Fp8E4m3)
    };
    let hidden = fp8("hidden_tensor", &[b, s, h], 21);
    let gate = fp8("gate_proj_weights_tensor", &[h, i], 22);
    let up = fp8("up_proj_weights_tensor", &[h, i], 23);
    let down = fp8("down_proj_weights_tensor", &[i, h], 24);
    let scale = |v: f64| common::tensor(&[128, 1], &[v; 128], Dtype::F32);
    let (gate_s, up_s, down_s, in_s, down_in_s) = (scale(1e-4), scale(2e-4), scale(3e-4), scale(0.0625), scale(0.5));
    let trn3 = Launch::new().generation(nki::hw::Generation::Trn3).lnc(2);
    let want = mlp::Call::new(&hidden, &gate, &up, &down)
        .quantization_type(QuantizationType::STATIC_MX)
        .gate_w_scale(&gate_s)
        .up_w_scale(&up_s)
        .down_w_scale(&down_s)
        .gate_up_in_scale(&in_s)
        .down_in_scale(&down_in_s)
        .launch(&trn3)
        .unwrap();
    let scales = [
        ("gate_w_scale", &gate_s),
        ("up_w_scale", &up_s),
        ("down_w_scale", &down_s),
        ("gate_up_in_scale", &in_s),
        ("down_in_scale", &down_in_s),
    ];
    // The scales as coded_args writes them, after the fp8 paths (its first 8 are the command).
    args.extend(coded_args(&dir, "mlp", 2, &scales, &[("quantization_type", "STATIC_MX")]).into_iter().skip(8));
    assert_runs_as(&dir, &args, &want.0[0]);
}

#[test]
fn output_projection_cte_static_mx_runs_from_fp8_codes_as_the_typed_api() {
    use nkilib::output_projection::output_projection_cte::output_projection_cte::{QuantizationType, output_projection_cte};
    let dir = common::scratch("cli_run_output_projection_cte_static_mx");
    std::fs::create_dir(dir.join("out")).unwrap();
    // 2 batches of 129 positions (several sequence tiles over trn3's 2
    // programs), 3 heads of 128 (K = 384, three packed tiles), H = 1024; the
    // float8_e4m3fn weight written as its uint8 codes, the path naming the format.
    let (b, n, d, s, h) = (2, 3, 128, 129, 1024);
    let attention = bf16(&[b, n, d, s], 31);
    let codes = fp8_codes(n * d * h, 32);
    let file = "output_projection_cte.weight.npy";
    write_npy(dir.join(file), &[n * d, h], &codes.iter().map(|&c| c as f64).collect::<Vec<_>>(), NpyType::U8).unwrap();
    let weight = common::tensor(&[n * d, h], &codes.iter().map(|&c| fp8_e4m3_value(c)).collect::<Vec<_>>(), Dtype::Fp8E4m3Fn);
    let scale = |v: f64| common::tensor(&[128, 1], &[v; 128], Dtype::F32);
    let (input_scales, weight_scales) = (scale(1.0 / 64.0), scale(0.0123));
    let bias = bf16(&[1, h], 33);
    let trn3 = Launch::new().generation(nki::hw::Generation::Trn3).lnc(2);
    let want = output_projection_cte::Call::new(&attention, &weight)
        .quantization_type(QuantizationType::STATIC_MX)
        .input_scales(&input_scales)
        .weight_scales(&weight_scales)
        .bias(&bias)
        .launch(&trn3)
        .unwrap();
    let tensors = [("attention", &attention), ("input_scales", &input_scales), ("weight_scales", &weight_scales), ("bias", &bias)];
    let mut args = coded_args(&dir, "output_projection_cte", 2, &tensors, &[("quantization_type", "STATIC_MX")]);
    args.extend(["--weight".to_string(), format!("{file}:float8_e4m3fn")]);
    assert_runs_as(&dir, &args, &want);

    // The same codes named as the other fp8 format, or not named at all: refused by name.
    let last = args.len() - 1;
    for (value, want) in [
        (format!("{file}:float8_e4m3"), "output_projection_cte: float8_e4m3 weights need STATIC quantization".to_string()),
        (file.to_string(), format!("--weight {file}: invalid weight = uint8")),
    ] {
        args[last] = value;
        assert_refused_line(&dir, &args, &want);
    }
}

#[test]
fn moe_tkg_mx_all_expert_runs_from_packed_weights_as_the_typed_api() {
    use nkilib::moe::moe_tkg::moe_tkg::{ExpertAffinityScaleMode, moe_tkg};
    let dir = common::scratch("cli_run_moe_tkg_mx_all");
    std::fs::create_dir(dir.join("out")).unwrap();
    // 8 tokens through both of 2 local experts (rank 0), H = 1024, I = 1024
    // (2 column tiles over trn3's 2 programs), float4 weights, the biases.
    let (t, h, i, e, dt) = (8, 1024, 1024, 2, Dtype::Fp4E2m1Fnx4);
    let fp4 = |n: usize, seed: u64| common::uniform(n, seed, 0.0, 16.0).iter().map(|&u| u as i64).collect::<Vec<_>>();
    let hidden = bf16(&[t, h], 21);
    let gate_up = packed(&[e, 128, 2, h / 512, i], &fp4(e * 2 * h * i, 22), dt);
    let down = packed(&[e, 128, i / 512, h], &fp4(e * i * h, 23), dt);
    let gate_up_s = mx_scales(&[e, 16, 2, h / 512, i], 24);
    let down_s = mx_scales(&[e, 16, i / 512, h], 25);
    let (gate_up_b, down_b) = (bf16(&[e, 128, 2, i / 512, 4], 26), bf16(&[e, h], 27));
    let aff = common::tensor(&[t, e], &common::uniform(t * e, 28, 0.0, 1.0), Dtype::Bf16);
    let idx = Tensor::from_i64(&[t, 2], &(0..t).flat_map(|_| [0, 1]).collect::<Vec<_>>(), Dtype::I32).unwrap();
    let rank = Tensor::from_i64(&[1, 1], &[0], Dtype::I32).unwrap();
    let trn3 = Launch::new().generation(nki::hw::Generation::Trn3).lnc(2);
    let want = moe_tkg::Call::new(&hidden, &gate_up, &down, &aff, &idx, true)
        .rank_id(&rank)
        .expert_gate_up_bias(&gate_up_b)
        .expert_down_bias(&down_b)
        .expert_gate_up_weights_scale(&gate_up_s)
        .expert_down_weights_scale(&down_s)
        .expert_affinities_scaling_mode(ExpertAffinityScaleMode::POST_SCALE)
        .launch(&trn3)
        .unwrap();
    let tensors = [
        ("hidden_input", &hidden),
        ("expert_gate_up_weights", &gate_up),
        ("expert_down_weights", &down),
        ("expert_affinities", &aff),
        ("expert_index", &idx),
        ("rank_id", &rank),
        ("expert_gate_up_bias", &gate_up_b),
        ("expert_down_bias", &down_b),
        ("expert_gate_up_weights_scale", &gate_up_s),
        ("expert_down_weights_scale", &down_s),
    ];
    let scalars = [("is_all_expert", "true"), ("expert_affinities_scaling_mode", "POST_SCALE")];
    assert_runs_as(&dir, &coded_args(&dir, "moe_tkg", 2, &tensors, &scalars), &want);
}
