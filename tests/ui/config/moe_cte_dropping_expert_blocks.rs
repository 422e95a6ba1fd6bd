/// Rejected at compile time: a dropping layer has one block per expert, whose index is the expert.
fn main() {
    let call =
        nkilib::bwmm_shard_on_i_dropping_config!(hidden = 2048, intermediate = 8192, experts = 2, block_size = 1024, positions = 4 * 1024);
    let _ = call;
}
