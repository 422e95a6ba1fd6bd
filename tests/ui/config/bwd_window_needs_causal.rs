use nki::attention::bwd::{BwdConfig, BwdDims};
use nki::attention::bwd_config;

const DIMS: BwdDims = BwdDims { batch: 1, heads: 8, kv_heads: 2, seqlen_q: 1024, seqlen_k: 1024, head_dim: 64 };

/// Rejected at compile time: a sliding window needs the causal mask.
fn main() {
    let cfg = bwd_config!(BwdConfig::new().sliding_window(128).dims(DIMS));
    let _ = (cfg, DIMS);
}
