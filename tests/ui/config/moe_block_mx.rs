/// Rejected at compile time: the MX weight forms are not implemented.
fn main() {
    let call = nkilib::moe_block_config!(tokens = 4, hidden = 3072, intermediate = 384, experts = 128, local_experts = 128, top_k = 4, mx = true);
    let _ = call;
}
