use nki::attention::ring_fwd::{RingDims, RingFwdConfig};
use nki::attention::ring_fwd_config;
use nki::hw::Generation;

const DIMS: RingDims = RingDims { batch: 1, heads: 8, seqlen: 4096, head_dim: 128 };

/// Rejected at compile time: F1: the kernel needs Trainium2 or later.
fn main() {
    let cfg = ring_fwd_config!(RingFwdConfig::new(4).target(Generation::Trn1));
    let _ = (cfg, DIMS);
}
