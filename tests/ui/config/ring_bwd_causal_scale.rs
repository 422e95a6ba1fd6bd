use nki::attention::ring_bwd::RingBwdConfig;
use nki::attention::ring_bwd_config;

/// Rejected at compile time: with the causal mask, exp(scale x score - lse) also
/// scales the masked FLOAT32_MIN scores, so a zero scale would unmask them.
fn main() {
    let cfg = ring_bwd_config!(RingBwdConfig::new(4).causal(true).softmax_scale(0.0));
    let _ = cfg;
}
