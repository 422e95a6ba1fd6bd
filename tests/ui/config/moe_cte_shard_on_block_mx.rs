use nkilib::moe::moe_cte::bwmm_shard_on_block_mx::ExpertAffinityScaleMode;

/// An MX block-sharded call (H = 3072, E = 128, 1024 tokens and the padding
/// row) of `block_size` blocks over `positions` with the options under test.
macro_rules! on_block_mx {
    (intermediate = $i:expr, block_size = $b:expr, positions = $n:expr $(, $field:ident = $v:expr)*) => {
        nkilib::bwmm_shard_on_block_mx_config!(
            tokens = 1025,
            hidden = 3072,
            intermediate = $i,
            experts = 128,
            block_size = $b,
            positions = $n
            $(, $field = $v)*
        )
    };
}

/// Rejected at compile time: the rules of the MX block-sharded MoE layer.
fn main() {
    // The library's kernel scales the output whatever the mode, so PRE_SCALE is refused.
    let _ = on_block_mx!(intermediate = 384, block_size = 256, positions = 146 * 256, scaling_mode = ExpertAffinityScaleMode::PRE_SCALE);
    // 384-token blocks are 12 transposes, which the 8-a-bank layout adapter does not cover.
    let _ = on_block_mx!(intermediate = 384, block_size = 384, positions = 100 * 384);
    // Above 512 columns the intermediate size is whole 512-column MX tiles.
    let _ = on_block_mx!(intermediate = 768, block_size = 256, positions = 146 * 256);
    // The output is always the two programs' slots summed (top-k > 1).
    let _ = on_block_mx!(intermediate = 384, block_size = 256, positions = 146 * 256, accumulating = false);
}
