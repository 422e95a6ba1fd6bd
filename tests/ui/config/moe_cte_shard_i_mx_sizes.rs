/// Rejected at compile time: sizes the MX intermediate-sharded MoE layer does not split.
fn main() {
    // 1536 intermediate columns are not a whole 512-column tile per program.
    let _ = nkilib::bwmm_shard_on_i_mx_config!(hidden = 3072, intermediate = 1536, experts = 8, block_size = 256, positions = 20 * 256);
    // A block of 128 positions leaves one program without a 128-token tile.
    let _ = nkilib::bwmm_shard_on_i_mx_config!(hidden = 3072, intermediate = 2048, experts = 8, block_size = 128, positions = 40 * 128);
}
