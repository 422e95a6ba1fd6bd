use nki::attention::tkg::{TkgConfig, TkgDims};
use nki::attention::tkg_config;

const DIMS: TkgDims = TkgDims { bs: 8, q_head: 8, s_active: 1, curr_sprior: 8192, full_sprior: 8192, d_head: 128 };

/// Rejected at compile time: fused RoPE rotates the two halves of the head dimension, so d_head is even.
fn main() {
    let cfg = tkg_config!(TkgConfig::new(TkgDims { d_head: 65, ..DIMS }).fuse_rope(true));
    let _ = cfg;
}
