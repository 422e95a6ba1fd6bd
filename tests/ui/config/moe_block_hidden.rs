/// Rejected at compile time: H must be a multiple of 128.
fn main() {
    let call = nkilib::moe_block_config!(tokens = 4, hidden = 3000, intermediate = 384, experts = 128, local_experts = 128, top_k = 4);
    let _ = call;
}
