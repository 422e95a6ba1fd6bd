use nki::attention::gen_mask_config;
use nki::attention::tkg::gen_mask_tkg::GenMaskConfig;

/// Rejected at compile time: one fold of a batch's mask must fit a 64 KiB chunk a partition.
fn main() {
    let cfg = gen_mask_config!(GenMaskConfig { bs: 1, q_head: 64, s_active: 2, s_prior: 8192, block_len: 256 });
    let _ = cfg;
}
