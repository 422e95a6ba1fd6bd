use nki::attention::ring_fwd::{RingDims, RingFwdConfig};
use nki::attention::ring_fwd_config;

const DIMS: RingDims = RingDims { batch: 1, heads: 8, seqlen: 4096, head_dim: 128 };

/// Rejected at compile time: F6: striped input needs the causal mask.
fn main() {
    let cfg = ring_fwd_config!(RingFwdConfig::new(4).striped(true));
    let _ = (cfg, DIMS);
}
