use nkilib::moe::moe_cte::bwmm_shard_on_block::BlockShardStrategy;

/// A block-sharded call of `tokens` token rows (H = 3072, I = 384, 16 blocks of 512
/// positions over 8 experts) with the options under test.
macro_rules! on_block {
    (tokens = $t:expr $(, $field:ident = $v:expr)*) => {
        nkilib::bwmm_shard_on_block_config!(
            tokens = $t,
            hidden = 3072,
            intermediate = 384,
            experts = 8,
            block_size = 512,
            positions = 16 * 512
            $(, $field = $v)*
        )
    };
}

/// Rejected at compile time: the rules of the block-sharded MoE layer.
fn main() {
    // The library implements PING_PONG block sharding only.
    let _ = on_block!(tokens = 1025, strategy = BlockShardStrategy::HI_LO);
    // The blocks alternate between exactly two programs (LNC2).
    let _ = on_block!(tokens = 1024, skip_token = true, programs = 1);
    // The accumulating output is reduced in whole 128-row tiles, and 1000 token rows are not.
    let _ = on_block!(tokens = 1000, skip_token = true);
}
