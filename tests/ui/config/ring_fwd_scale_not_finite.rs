use nki::attention::ring_fwd::RingFwdConfig;
use nki::attention::ring_fwd_config;

/// Rejected at compile time: the softmax scale must be a finite float32 (here beyond its range).
fn main() {
    let cfg = ring_fwd_config!(RingFwdConfig::new(4).causal(true).softmax_scale(1e39));
    let _ = cfg;
}
