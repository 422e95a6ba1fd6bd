use nki::attention::gen_mask_config;
use nki::attention::tkg::gen_mask_tkg::GenMaskConfig;

/// Rejected at compile time: the active tokens are the last of the keys.
fn main() {
    let cfg = gen_mask_config!(GenMaskConfig { bs: 1, q_head: 1, s_active: 129, s_prior: 128, block_len: 0 });
    let _ = cfg;
}
