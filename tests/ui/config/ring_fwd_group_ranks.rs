use nki::attention::ring_fwd::{RingDims, RingFwdConfig};
use nki::attention::ring_fwd_config;

const DIMS: RingDims = RingDims { batch: 1, heads: 8, seqlen: 4096, head_dim: 128 };

/// Rejected at compile time: each rank id appears in exactly one ring.
fn main() {
    let cfg = ring_fwd_config!(RingFwdConfig::new(2).replica_groups(&[&[0, 1], &[1, 2]]));
    let _ = (cfg, DIMS);
}
