use nki::attention::ring_bwd::RingBwdConfig;
use nki::attention::ring_bwd_config;
use nki::attention::ring_fwd::RingDims;

const DIMS: RingDims = RingDims { batch: 1, heads: 2, seqlen: 2048, head_dim: 128 };

/// Rejected at compile time: a ring needs at least one worker.
fn main() {
    let cfg = ring_bwd_config!(RingBwdConfig::new(0));
    let _ = (cfg, DIMS);
}
