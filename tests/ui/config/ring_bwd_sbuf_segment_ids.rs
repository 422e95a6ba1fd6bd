use nki::Dtype;
use nki::attention::ring_bwd::RingBwdConfig;
use nki::attention::ring_bwd_config;
use nki::attention::ring_fwd::RingDims;

const DIMS: RingDims = RingDims { batch: 1, heads: 8, seqlen: 16896, head_dim: 128 };

/// Rejected at compile time: segment ids add their fp32 tiles (the local keys'
/// ids on every partition) to the SBUF footprint, so the 16896 bf16 tokens per
/// rank that fit without them do not fit with them.
fn main() {
    let fits = ring_bwd_config!(RingBwdConfig::new(8).dtype(Dtype::Bf16).dims(DIMS));
    let cfg = ring_bwd_config!(RingBwdConfig::new(8).dtype(Dtype::Bf16).dims(DIMS).segment_ids(true));
    let _ = (fits, cfg);
}
