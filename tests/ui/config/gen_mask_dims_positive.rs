use nki::attention::gen_mask_config;
use nki::attention::tkg::gen_mask_tkg::GenMaskConfig;

/// Rejected at compile time: the batch size must be strictly positive.
fn main() {
    let cfg = gen_mask_config!(GenMaskConfig { bs: 0, q_head: 1, s_active: 1, s_prior: 256, block_len: 0 });
    let _ = cfg;
}
