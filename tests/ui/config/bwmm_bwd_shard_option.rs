/// Rejected at compile time: the library's backward shards on the hidden dim only.
use nkilib::experimental::moe::blockwise_mm_backward::ShardOption;

fn main() {
    let call = nkilib::bwmm_bwd_config!(
        hidden = 2880,
        intermediate = 2880,
        experts = 2,
        block_size = 512,
        positions = 17 * 512,
        shard_option = ShardOption::SHARD_ON_INTERMEDIATE,
    );
    let _ = call;
}
