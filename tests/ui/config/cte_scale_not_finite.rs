use nki::attention::cte::CteConfig;
use nki::attention::cte_config;

/// Rejected at compile time: scores are multiplied by the scale in fp32, so it must be a finite float32.
fn main() {
    let cfg = cte_config!(CteConfig::new().causal_mask(false).scale(f64::NAN));
    let _ = cfg;
}
