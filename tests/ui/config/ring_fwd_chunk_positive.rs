use nki::attention::ring_fwd::RingFwdConfig;
use nki::attention::ring_fwd_config;

/// Rejected at compile time: chunks hold at least one token.
fn main() {
    let cfg = ring_fwd_config!(RingFwdConfig::new(4).chunk_size(0));
    let _ = cfg;
}
