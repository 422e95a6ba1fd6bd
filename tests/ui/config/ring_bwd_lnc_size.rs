use nki::attention::ring_bwd::RingBwdConfig;
use nki::attention::ring_bwd_config;
use nki::attention::ring_fwd::RingDims;

const DIMS: RingDims = RingDims { batch: 1, heads: 2, seqlen: 2048, head_dim: 128 };

/// Rejected at compile time: B7: the LNC degree is 1 or 2.
fn main() {
    let cfg = ring_bwd_config!(RingBwdConfig::new(4).lnc(4));
    let _ = (cfg, DIMS);
}
