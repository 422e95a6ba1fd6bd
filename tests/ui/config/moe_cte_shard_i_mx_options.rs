/// An MX intermediate-sharded call the size rules accept (H = 3072, I = 2048, 20 blocks of
/// 256 positions over 8 experts) with the options under test.
macro_rules! on_i_mx {
    ($($field:ident = $v:expr),*) => {
        nkilib::bwmm_shard_on_i_mx_config!(hidden = 3072, intermediate = 2048, experts = 8, block_size = 256, positions = 20 * 256 $(, $field = $v)*)
    };
}

/// Rejected at compile time: the options the MX intermediate-sharded MoE layer does not take.
fn main() {
    use nkilib::moe::moe_cte::bwmm_shard_on_i_mx::ExpertAffinityScaleMode;
    // The library's kernel asserts PRE_SCALE out and scales nothing in the other modes.
    let _ = on_i_mx!(scaling_mode = ExpertAffinityScaleMode::PRE_SCALE);
    // Both quantization scales are needed.
    let _ = on_i_mx!(scales = false);
    // Weight-load skipping is not supported, as the library's compatibility check says.
    let _ = on_i_mx!(skip_weight = true);
    // The hybrid form's static blocks are at most the N blocks.
    let _ = on_i_mx!(static_blocks = 21);
}
