/// Rejected at compile time: all-expert mode needs rank_id.
fn main() {
    let call = nkilib::moe_block_config!(tokens = 4, hidden = 3072, intermediate = 384, experts = 128, local_experts = 128, top_k = 4, is_all_expert = true);
    let _ = call;
}
