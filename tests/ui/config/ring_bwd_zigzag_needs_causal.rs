use nki::attention::ring_bwd::RingBwdConfig;
use nki::attention::ring_bwd_config;

/// Rejected at compile time: zigzag input needs the causal mask.
fn main() {
    let cfg = ring_bwd_config!(RingBwdConfig::new(4).zigzag(true));
    let _ = cfg;
}
