use nki::attention::cte::CteConfig;
use nki::attention::cte_config;

/// Rejected at compile time: sequence packing masks with range_select, which applies no scale (A22).
fn main() {
    let cfg = cte_config!(CteConfig::new().packing(true).scale(0.125));
    let _ = cfg;
}
