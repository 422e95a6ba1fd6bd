/// Rejected at compile time: the MX all-expert path takes T in multiples of 4.
fn main() {
    let call = nkilib::moe_block_config!(
        tokens = 6,
        hidden = 3072,
        intermediate = 384,
        experts = 128,
        local_experts = 8,
        top_k = 4,
        is_all_expert = true,
        has_rank_id = true,
        mx = true,
        has_gate_up_scale = true,
        has_down_scale = true
    );
    let _ = call;
}
