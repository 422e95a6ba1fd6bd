use nki::attention::ring_fwd::RingFwdConfig;
use nki::attention::ring_fwd_config;

/// Rejected at compile time: the soft cap is positive.
fn main() {
    let cfg = ring_fwd_config!(RingFwdConfig::new(4).soft_cap(0.0));
    let _ = cfg;
}
