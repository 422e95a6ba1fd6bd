use nki::attention::ring_fwd::RingFwdConfig;
use nki::attention::ring_fwd_config;

/// Rejected at compile time: zigzag input needs the causal mask.
fn main() {
    let cfg = ring_fwd_config!(RingFwdConfig::new(4).zigzag(true));
    let _ = cfg;
}
