//! Kernels of the AWS NKI library written in the nki-rs DSL.
//!
//! Each kernel keeps the library's name and Python signature (parameter names,
//! order and defaults; its configuration dataclasses and enums as
//! `#[nki_object]` bundles and `#[nki_enum]`s), so its emitted NKI is a drop-in
//! for the library's function, and lives in the folder the library keeps it in
//! (`nkilib/core/<folder>/<kernel>.py` is `nkilib::<folder>::<kernel>` here,
//! `nkilib/experimental/<folder>/<kernel>.py` `nkilib::experimental::<folder>::<kernel>`).
//! Linking the crate registers the kernels with the `nki` command
//! (`nki list`, `run`, `profile`, `emit`).
//!
//! | kernel | module | what it computes |
//! |---|---|---|
//! | `cumsum` | [`cumsum::cumsum`] | inclusive cumulative sum along the last dim |
//! | `cross_entropy_forward` | [`experimental::loss::cross_entropy`] | per-position loss and log-sum-exp over vocabulary chunks (online log-sum-exp) |
//! | `cross_entropy_backward` | [`experimental::loss::cross_entropy`] | the loss gradient from the saved log-sum-exp, optionally over the logits |
//! | `conv1d` | [`experimental::conv::conv1d`] | 1-D convolution (stride, padding, dilation, bias, activation) by matmuls over K-stacked taps |
//! | `depthwise_conv1d_implicit_gemm` | [`experimental::conv::depthwise_conv1d`] | depthwise 1-D convolution by matmuls over an implicit im2col |
//! | `fine_grained_allgather` | [`experimental::collectives::fg_allgather`] | each rank's rows gathered from its ring by collective permutes into alternating buffers |
//! | `allgather_compute_matmul` | [`experimental::collectives::fgcc_matmul`] | each rank's rows gathered from its ring, each arrival multiplied by the rank's `rhs` shard |
//! | `allgather_sb2sb` | [`experimental::collectives::sb2sb_allgather`] | each rank's `[H, W]` tile gathered along its columns from its replica group by one SBUF `all_gather` |
//! | `allgather_sb2sb_tiled` | [`experimental::collectives::sb2sb_allgather`] | `allgather_sb2sb` row tile by row tile, the tiles split over the LNC programs |
//! | `topk_reduce` | [`experimental::collectives::topk_reduce`] | the MoE top-K sum of each token's rows scattered (by packed token index) over an `all_to_all_v` buffer |
//! | `attention_block_tkg` | [`experimental::transformer::attention_block_tkg`] | decode attention block: RMSNorm, fused QKV, Q/K norms and RoPE, `attention_tkg` over the KV cache, the cache update, the output projection, KV data parallelism over ranks |
//! | `blockwise_mm_bwd` | [`experimental::moe::blockwise_mm_backward`] | the blockwise MoE layer's gradients from the forward's checkpoints, each program owning a share of the hidden columns |
//! | `RoPE` | [`embeddings::rope`] | rotary position embedding, head dim on the partitions |
//! | `rope_hf` | [`embeddings::rope_hf`] | rotary position embedding of q and k, `[batch, heads, seq, head_dim]` |
//! | `cascaded_max` | [`max::cascaded_max`] | each row's maximum and its column, in two stages |
//! | `output_projection_tkg` | [`output_projection::output_projection_tkg`] | decode `attention @ weight + bias`, optionally fp8 (static or per column) and transposed out |
//! | `output_projection_cte` | [`output_projection::output_projection_cte::output_projection_cte`] | prefill `attention @ weight + bias`, optionally static fp8 or MX ([`output_projection::output_projection_cte::output_projection_cte_mx`]) |
//! | `rmsnorm_quant_kernel` | [`rmsnorm::rmsnorm_quant`] | RMSNorm then `float8_e4m3` row or static quantization |
//! | `router_topk` | [`router_topk::router_topk`] | MoE router: logits, activation, top-k experts and affinities |
//! | `rotational_topk` | [`topk::rotational_topk`] | top-k values and indices of vocabulary-sized rows |
//! | `mlp` | [`mlp::mlp`] | gate/up projection, gated activation, down projection (decode and context-encoding paths) |
//! | `moe_tkg` | [`moe::moe_tkg::moe_tkg`] | decode-phase mixture of experts: all local experts or each token's top-k, affinity-weighted |
//! | `moe_block_tkg` | [`moe_block::moe_block_tkg`] | decode-phase MoE block: RMSNorm, router top-k, then the experts (selective or all-expert) |
//! | `moe_cte` | [`moe::moe_cte::moe_cte`] | context-encoding mixture of experts over token blocks sorted by expert (`bwmm_shard_on_block`) |
//! | `qkv_tkg` | [`qkv::qkv_tkg`] | decode-phase fused QKV projection: residual add, norm, fp8 dequantization, MX ([`qkv::qkv_tkg_mx_impl`]), bias, BSD/NBSd |
//! | `qkv_cte` | [`qkv::qkv_cte`] | prefill fused QKV projection: residual add, norm, bias, RoPE, BSD/NBSd, static fp8, fp8 KV-cache outputs |
//! | `qkv` | [`qkv::qkv`] | the library's QKV entry: `qkv_cte` or `qkv_tkg` by the token count |
//! | `find_nonzero_indices` | [`subkernels::find_nonzero_indices`] | each column's nonzero positions along `T` (padded with -1) and their count |
//! | `indexed_flatten` | [`subkernels::indexed_flatten`] | rows copied in `f_len` blocks to a flat array at per-row block offsets |
//! | `rmsnorm_tkg` | [`subkernels::rmsnorm_tkg`] | decode-phase RMSNorm into the `[128, B·S, H/128]` layout |
//!
//! Every kernel's compile-time rules are `const fn`s beside it (with a
//! `*_config!` macro that turns a broken rule into a compile error), and the
//! same rules are checked when the kernel is traced.

// The library keeps `cumsum/cumsum.py` and `router_topk/router_topk.py`; the
// modules mirror its paths.
#![allow(clippy::module_inception)]

extern crate nki_core as nki;

pub mod cumsum;
pub mod embeddings;
pub mod experimental;
pub mod max;
pub mod mlp;
pub mod moe;
pub mod moe_block;
pub mod output_projection;
pub mod qkv;
pub mod rmsnorm;
pub mod router_topk;
pub mod subkernels;
pub mod topk;
pub mod utils;
