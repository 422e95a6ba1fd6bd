use nki::attention::tkg::{TkgConfig, TkgDims};
use nki::attention::tkg_config;

const DIMS: TkgDims = TkgDims { bs: 8, q_head: 8, s_active: 1, curr_sprior: 8192, full_sprior: 8192, d_head: 128 };

/// Rejected at compile time: the head dim must be within [1, 128].
fn main() {
    let cfg = tkg_config!(TkgConfig::new(TkgDims { d_head: 256, ..DIMS }));
    let _ = cfg;
}
