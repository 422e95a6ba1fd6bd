/// Rejected at compile time: the blocks alternate between exactly two programs (LNC2).
fn main() {
    let call = nkilib::bwmm_shard_on_block_config!(tokens = 1024, hidden = 3072, intermediate = 384, experts = 8, block_size = 512, positions = 16 * 512, skip_token = true, programs = 1);
    let _ = call;
}
