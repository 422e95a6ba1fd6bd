use nki::attention::ring_fwd::RingFwdConfig;
use nki::attention::ring_fwd_config;

/// Rejected at compile time: striped and zigzag input exclude each other.
fn main() {
    let cfg = ring_fwd_config!(RingFwdConfig::new(4).causal(true).striped(true).zigzag(true));
    let _ = cfg;
}
