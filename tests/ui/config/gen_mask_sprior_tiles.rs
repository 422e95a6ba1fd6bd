use nki::attention::gen_mask_config;
use nki::attention::tkg::gen_mask_tkg::GenMaskConfig;

/// Rejected at compile time: the keys come in tiles of 128.
fn main() {
    let cfg = gen_mask_config!(GenMaskConfig { bs: 4, q_head: 1, s_active: 5, s_prior: 1000, block_len: 0 });
    let _ = cfg;
}
