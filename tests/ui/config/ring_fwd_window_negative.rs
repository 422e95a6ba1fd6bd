use nki::attention::ring_fwd::RingFwdConfig;
use nki::attention::ring_fwd_config;

/// Rejected at compile time: window sizes are non-negative.
fn main() {
    let cfg = ring_fwd_config!(RingFwdConfig::new(4).causal(true).sliding_window(-1, 0));
    let _ = cfg;
}
