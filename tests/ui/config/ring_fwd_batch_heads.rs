use nki::attention::ring_fwd::{RingDims, RingFwdConfig};
use nki::attention::ring_fwd_config;

const DIMS: RingDims = RingDims { batch: 1, heads: 8, seqlen: 4096, head_dim: 128 };

/// Rejected at compile time: batch and heads must be positive.
fn main() {
    let cfg = ring_fwd_config!(RingFwdConfig::new(4).dims(RingDims { heads: 0, ..DIMS }));
    let _ = (cfg, DIMS);
}
