/// Rejected at compile time: a shared expert is not supported.
fn main() {
    let call = nkilib::moe_block_config!(tokens = 4, hidden = 3072, intermediate = 384, experts = 128, local_experts = 128, top_k = 4, has_shared_expert = true);
    let _ = call;
}
