/// Rejected at compile time: hidden_act_scale_factor and hidden_act_bias are placeholders.
fn main() {
    let call = nkilib::moe_block_config!(tokens = 4, hidden = 3072, intermediate = 384, experts = 128, local_experts = 128, top_k = 4, has_act_placeholders = true);
    let _ = call;
}
