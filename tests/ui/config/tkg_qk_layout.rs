use nki::attention::tkg::{TkgConfig, TkgDims};
use nki::attention::tkg_config;

const DIMS: TkgDims = TkgDims { bs: 8, q_head: 8, s_active: 1, curr_sprior: 8192, full_sprior: 8192, d_head: 128 };

/// Rejected at compile time: without fused RoPE, q and k_active come in the qk_in_sb layouts.
fn main() {
    let cfg = tkg_config!(TkgConfig::new(DIMS).qk_in_sb(false));
    let _ = cfg;
}
