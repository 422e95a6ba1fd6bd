/// Rejected at compile time: the library implements PING_PONG block sharding only.
use nkilib::moe::moe_cte::bwmm_shard_on_block::BlockShardStrategy;

fn main() {
    let call = nkilib::bwmm_shard_on_block_config!(
        tokens = 1025,
        hidden = 3072,
        intermediate = 384,
        experts = 8,
        block_size = 512,
        positions = 16 * 512,
        strategy = BlockShardStrategy::HI_LO,
    );
    let _ = call;
}
