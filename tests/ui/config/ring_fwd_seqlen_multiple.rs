use nki::attention::ring_fwd::{RingDims, RingFwdConfig};
use nki::attention::ring_fwd_config;

const DIMS: RingDims = RingDims { batch: 1, heads: 8, seqlen: 4096, head_dim: 128 };

/// Rejected at compile time: F4: the tokens per rank must be a multiple of 128.
fn main() {
    let cfg = ring_fwd_config!(RingFwdConfig::new(4).dims(RingDims { seqlen: 1000, ..DIMS }));
    let _ = (cfg, DIMS);
}
