use nki::attention::ring_bwd::RingBwdConfig;
use nki::attention::ring_bwd_config;
use nki::attention::ring_fwd::RingDims;

const DIMS: RingDims = RingDims { batch: 1, heads: 2, seqlen: 2048, head_dim: 128 };

/// Rejected at compile time: every replica group holds num_workers ranks.
fn main() {
    let cfg = ring_bwd_config!(RingBwdConfig::new(2).replica_groups(&[&[0, 1, 2]]));
    let _ = (cfg, DIMS);
}
