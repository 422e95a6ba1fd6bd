use nki::attention::gen_mask_config;
use nki::attention::tkg::gen_mask_tkg::GenMaskConfig;

/// Rejected at compile time: a block length that does not divide the cache.
fn main() {
    let cfg = gen_mask_config!(GenMaskConfig { bs: 4, q_head: 1, s_active: 5, s_prior: 256, block_len: 48 });
    let _ = cfg;
}
