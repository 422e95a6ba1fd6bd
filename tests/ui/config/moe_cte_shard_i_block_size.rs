/// Rejected at compile time: each program takes whole 128-token tiles of a block, so blocks are multiples of 256 positions.
fn main() {
    let call = nkilib::bwmm_shard_on_i_config!(hidden = 3072, intermediate = 2048, experts = 8, block_size = 384, positions = 16 * 384);
    let _ = call;
}
