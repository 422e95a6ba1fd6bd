use nki::attention::ring_bwd::RingBwdConfig;
use nki::attention::ring_bwd_config;

/// Rejected at compile time: window sizes are non-negative.
fn main() {
    let cfg = ring_bwd_config!(RingBwdConfig::new(4).causal(true).sliding_window(3, -1));
    let _ = cfg;
}
