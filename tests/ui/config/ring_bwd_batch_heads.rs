use nki::attention::ring_bwd::RingBwdConfig;
use nki::attention::ring_bwd_config;
use nki::attention::ring_fwd::RingDims;

const DIMS: RingDims = RingDims { batch: 1, heads: 2, seqlen: 2048, head_dim: 128 };

/// Rejected at compile time: batch and heads must be positive.
fn main() {
    let cfg = ring_bwd_config!(RingBwdConfig::new(4).dims(RingDims { batch: 0, ..DIMS }));
    let _ = (cfg, DIMS);
}
