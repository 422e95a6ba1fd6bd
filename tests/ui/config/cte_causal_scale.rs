use nki::attention::cte::CteConfig;
use nki::attention::cte_config;

/// Rejected at compile time: the causal mask's FLOAT32_MIN is multiplied by the
/// scale, so a negative scale would unmask (without the mask it is allowed).
fn main() {
    let cfg = cte_config!(CteConfig::new().scale(-0.125));
    let _ = cfg;
}
