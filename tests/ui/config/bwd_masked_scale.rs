use nki::attention::bwd::{BwdConfig, BwdDims};
use nki::attention::bwd_config;

const DIMS: BwdDims = BwdDims { batch: 1, heads: 8, kv_heads: 2, seqlen_q: 1024, seqlen_k: 1024, head_dim: 64 };

/// Rejected at compile time: packed sequences mask scores, so the scale must keep FLOAT32_MIN masked.
fn main() {
    let cfg = bwd_config!(BwdConfig::new().packed(true).softmax_scale(-0.125));
    let _ = (cfg, DIMS);
}
