/// Rejected at compile time: the hybrid form's static blocks are at most the N blocks.
fn main() {
    let call = nkilib::bwmm_shard_on_i_config!(hidden = 3072, intermediate = 2048, experts = 8, block_size = 512, positions = 16 * 512, static_blocks = 17);
    let _ = call;
}
