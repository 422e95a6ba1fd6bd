/// An intermediate-sharded call the size rules accept (H = 3072, I = 2048, 16 blocks of
/// 512 positions over 8 experts) with the options under test.
macro_rules! on_i {
    ($($field:ident = $v:expr),*) => {
        nkilib::bwmm_shard_on_i_config!(hidden = 3072, intermediate = 2048, experts = 8, block_size = 512, positions = 16 * 512 $(, $field = $v)*)
    };
}

/// Rejected at compile time: the options the intermediate-sharded MoE layers do not take.
fn main() {
    // Activation checkpointing is not implemented.
    let _ = on_i!(checkpoint_activation = true);
    // A down bias with the affinity on the intermediate is left out by the library, so it is refused.
    let _ = on_i!(down_bias_on_i = true);
    // The hybrid form takes no activation buffers.
    let _ = on_i!(activations = true);
    // The hybrid form's static blocks are at most the N blocks.
    let _ = on_i!(static_blocks = 17);
    // Weight-load skipping is not supported with the intermediate split.
    let _ = on_i!(skip_weight = true);
}
