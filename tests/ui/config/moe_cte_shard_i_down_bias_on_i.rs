/// Rejected at compile time: a down bias with the affinity on the intermediate is left out by the library, so it is refused.
fn main() {
    let call = nkilib::bwmm_shard_on_i_config!(hidden = 3072, intermediate = 2048, experts = 8, block_size = 512, positions = 16 * 512, down_bias_on_i = true);
    let _ = call;
}
