use nki::attention::ring_bwd::RingBwdConfig;
use nki::attention::ring_bwd_config;

/// Rejected at compile time: the soft cap is positive.
fn main() {
    let cfg = ring_bwd_config!(RingBwdConfig::new(4).soft_cap(-30.0));
    let _ = cfg;
}
