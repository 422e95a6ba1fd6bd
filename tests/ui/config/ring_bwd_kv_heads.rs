use nki::attention::ring_bwd::RingBwdConfig;
use nki::attention::ring_bwd_config;
use nki::attention::ring_fwd::RingDims;

const DIMS: RingDims = RingDims { batch: 1, heads: 2, seqlen: 2048, head_dim: 128 };

/// Rejected at compile time: GQA needs the query heads to be a multiple of the KV heads.
fn main() {
    let cfg = ring_bwd_config!(RingBwdConfig::new(4).dims(DIMS).kv_heads(3));
    let _ = (cfg, DIMS);
}
