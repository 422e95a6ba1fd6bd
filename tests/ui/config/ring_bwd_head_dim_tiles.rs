use nki::attention::ring_bwd::RingBwdConfig;
use nki::attention::ring_bwd_config;
use nki::attention::ring_fwd::RingDims;

const DIMS: RingDims = RingDims { batch: 1, heads: 2, seqlen: 2048, head_dim: 128 };

/// Rejected at compile time: B4: a prime head dim above 128 has no equal tiles of at most 128.
fn main() {
    let cfg = ring_bwd_config!(RingBwdConfig::new(4).dims(RingDims { head_dim: 131, ..DIMS }));
    let _ = (cfg, DIMS);
}
