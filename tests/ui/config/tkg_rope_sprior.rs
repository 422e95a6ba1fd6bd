use nki::attention::tkg::{TkgConfig, TkgDims};
use nki::attention::tkg_config;

const DIMS: TkgDims = TkgDims { bs: 8, q_head: 8, s_active: 1, curr_sprior: 8192, full_sprior: 8192, d_head: 128 };

/// Rejected at compile time: fused RoPE range-reduces its angles in float32, up to 131072 positions.
fn main() {
    let cfg = tkg_config!(TkgConfig::new(TkgDims { curr_sprior: 131200, full_sprior: 131200, ..DIMS }).fuse_rope(true));
    let _ = cfg;
}
