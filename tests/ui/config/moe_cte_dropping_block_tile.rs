/// Rejected at compile time: the dropping form runs each block in tiles of 1024 positions, so blocks are multiples of 1024.
fn main() {
    let call =
        nkilib::bwmm_shard_on_i_dropping_config!(hidden = 2048, intermediate = 8192, experts = 2, block_size = 512, positions = 2 * 512);
    let _ = call;
}
