use nki::attention::ring_fwd::{RingDims, RingFwdConfig};
use nki::attention::ring_fwd_config;

const DIMS: RingDims = RingDims { batch: 1, heads: 8, seqlen: 4096, head_dim: 128 };

/// Rejected at compile time: F3: head dims above 128 are not supported.
fn main() {
    let cfg = ring_fwd_config!(RingFwdConfig::new(4).dims(RingDims { head_dim: 256, ..DIMS }));
    let _ = (cfg, DIMS);
}
