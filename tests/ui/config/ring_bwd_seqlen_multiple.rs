use nki::attention::ring_bwd::RingBwdConfig;
use nki::attention::ring_bwd_config;
use nki::attention::ring_fwd::RingDims;

const DIMS: RingDims = RingDims { batch: 1, heads: 2, seqlen: 2048, head_dim: 128 };

/// Rejected at compile time: B2: the tokens per rank must be a multiple of 128.
fn main() {
    let cfg = ring_bwd_config!(RingBwdConfig::new(4).dims(RingDims { seqlen: 200, ..DIMS }));
    let _ = (cfg, DIMS);
}
