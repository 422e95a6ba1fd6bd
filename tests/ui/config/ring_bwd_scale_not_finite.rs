use nki::attention::ring_bwd::RingBwdConfig;
use nki::attention::ring_bwd_config;

/// Rejected at compile time: the softmax scale must be a finite float32.
fn main() {
    let cfg = ring_bwd_config!(RingBwdConfig::new(4).softmax_scale(f64::INFINITY));
    let _ = cfg;
}
