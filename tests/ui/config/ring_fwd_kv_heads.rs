use nki::attention::ring_fwd::{RingDims, RingFwdConfig};
use nki::attention::ring_fwd_config;

const DIMS: RingDims = RingDims { batch: 1, heads: 8, seqlen: 4096, head_dim: 128 };

/// Rejected at compile time: GQA needs the query heads to be a multiple of the KV heads.
fn main() {
    let cfg = ring_fwd_config!(RingFwdConfig::new(4).dims(DIMS).kv_heads(3));
    let _ = cfg;
}
