/// Rejected at compile time: an intermediate size above 1024 takes the library's chunked path, not implemented.
fn main() {
    let call = nkilib::bwmm_shard_on_block_config!(tokens = 1024, hidden = 3072, intermediate = 3072, experts = 8, block_size = 256, positions = 32 * 256, skip_token = true);
    let _ = call;
}
