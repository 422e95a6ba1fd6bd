use nki::Dtype;
use nki::attention::ring_bwd::RingBwdConfig;
use nki::attention::ring_bwd_config;
use nki::attention::ring_fwd::RingDims;

const DIMS: RingDims = RingDims { batch: 1, heads: 8, seqlen: 16896, head_dim: 128 };

/// Rejected at compile time: 17408 bf16 tokens per rank (D = 128, fp32
/// accumulators) need more than trn2's 224 KiB per SBUF partition; 16896 fit.
fn main() {
    let fits = ring_bwd_config!(RingBwdConfig::new(8).dtype(Dtype::Bf16).dims(DIMS));
    let cfg = ring_bwd_config!(RingBwdConfig::new(8).dtype(Dtype::Bf16).dims(RingDims { seqlen: 17408, ..DIMS }));
    let _ = (fits, cfg);
}
