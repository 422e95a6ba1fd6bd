/// Rejected at compile time: the block runs on the two programs of an LNC2 launch.
fn main() {
    let call = nkilib::moe_block_config!(tokens = 4, hidden = 3072, intermediate = 384, experts = 128, local_experts = 128, top_k = 4, programs = 1);
    let _ = call;
}
