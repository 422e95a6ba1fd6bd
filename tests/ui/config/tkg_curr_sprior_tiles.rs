use nki::attention::tkg::{TkgConfig, TkgDims};
use nki::attention::tkg_config;

const DIMS: TkgDims = TkgDims { bs: 8, q_head: 8, s_active: 1, curr_sprior: 8192, full_sprior: 8192, d_head: 128 };

/// Rejected at compile time: the cache length must be a multiple of 128.
fn main() {
    let cfg = tkg_config!(TkgConfig::new(TkgDims { curr_sprior: 1000, full_sprior: 1024, ..DIMS }));
    let _ = cfg;
}
