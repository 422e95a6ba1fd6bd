/// Rejected at compile time: the fused residual add is the MX all-expert path's.
fn main() {
    let call = nkilib::moe_block_config!(tokens = 4, hidden = 3072, intermediate = 384, experts = 128, local_experts = 128, top_k = 4, has_residual = true);
    let _ = call;
}
