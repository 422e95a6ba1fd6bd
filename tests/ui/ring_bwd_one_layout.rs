use nki::attention::ring_bwd::RingBwdConfig;
use nki::attention::ring_bwd_config;

/// Rejected at compile time: striped and zigzag input exclude each other.
fn main() {
    let cfg = ring_bwd_config!(RingBwdConfig::new(4).causal(true).striped(true).zigzag(true));
    let _ = cfg;
}
