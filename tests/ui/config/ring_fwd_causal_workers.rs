use nki::attention::ring_fwd::{RingDims, RingFwdConfig};
use nki::attention::ring_fwd_config;

const DIMS: RingDims = RingDims { batch: 1, heads: 8, seqlen: 4096, head_dim: 128 };

/// Rejected at compile time: F8: causal rings hold at most 32 workers (attention_cte's global_cp_deg).
fn main() {
    let cfg = ring_fwd_config!(RingFwdConfig::new(64).causal(true));
    let _ = (cfg, DIMS);
}
