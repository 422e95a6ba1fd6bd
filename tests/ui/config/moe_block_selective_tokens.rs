/// Rejected at compile time: the selective path holds at most 128 tokens.
fn main() {
    let call = nkilib::moe_block_config!(tokens = 129, hidden = 3072, intermediate = 384, experts = 128, local_experts = 128, top_k = 4);
    let _ = call;
}
