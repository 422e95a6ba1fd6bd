use nki::attention::ring_bwd::RingBwdConfig;
use nki::attention::ring_bwd_config;

/// Rejected at compile time: chunks hold at least one token.
fn main() {
    let cfg = ring_bwd_config!(RingBwdConfig::new(4).chunk_size(-4));
    let _ = cfg;
}
