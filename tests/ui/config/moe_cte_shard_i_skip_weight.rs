/// Rejected at compile time: weight-load skipping is not supported with the intermediate split.
fn main() {
    let call = nkilib::bwmm_shard_on_i_config!(hidden = 3072, intermediate = 2048, experts = 8, block_size = 512, positions = 16 * 512, skip_weight = true);
    let _ = call;
}
