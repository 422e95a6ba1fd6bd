/// Rejected at compile time: the router's rule: at least 8 experts.
fn main() {
    let call = nkilib::moe_block_config!(tokens = 4, hidden = 3072, intermediate = 384, experts = 4, local_experts = 4, top_k = 2);
    let _ = call;
}
