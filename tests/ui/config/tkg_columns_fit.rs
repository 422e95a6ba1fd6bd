use nki::attention::tkg::{TkgConfig, TkgDims};
use nki::attention::tkg_config;

const DIMS: TkgDims = TkgDims { bs: 8, q_head: 8, s_active: 1, curr_sprior: 8192, full_sprior: 8192, d_head: 128 };

/// Rejected at compile time: a query head's s_active columns must fit the 128 partitions.
fn main() {
    let cfg = tkg_config!(TkgConfig::new(TkgDims { s_active: 129, ..DIMS }));
    let _ = cfg;
}
