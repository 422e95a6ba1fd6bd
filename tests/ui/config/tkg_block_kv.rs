use nki::attention::tkg::{TkgConfig, TkgDims};
use nki::attention::tkg_config;

const DIMS: TkgDims = TkgDims { bs: 8, q_head: 8, s_active: 1, curr_sprior: 8192, full_sprior: 8192, d_head: 128 };

/// Rejected at compile time: a block cache is read transposed, so it needs tp_k_prior.
fn main() {
    let cfg = tkg_config!(TkgConfig::new(DIMS).block_len(16));
    let _ = cfg;
}
