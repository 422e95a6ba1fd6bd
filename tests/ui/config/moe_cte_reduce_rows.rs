/// Rejected at compile time: the accumulating output is reduced in whole 128-row tiles, and 1000 token rows are not.
fn main() {
    let call = nkilib::bwmm_shard_on_block_config!(tokens = 1000, hidden = 3072, intermediate = 384, experts = 8, block_size = 512, positions = 16 * 512, skip_token = true);
    let _ = call;
}
