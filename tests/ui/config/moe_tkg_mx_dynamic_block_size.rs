/// Rejected at compile time: the MX all-expert dynamic strategy's blocks of 48 tokens are not a multiple of 32 (the library's block rule).
fn main() {
    let call = nkilib::moe_tkg_config!(tokens = 96, hidden = 3072, intermediate = 3072, experts = 1, top_k = 1, programs = 2, is_all_expert = true, mx = true, has_rank_id = true, has_gate_up_scale = true, has_down_scale = true, is_all_expert_dynamic = true, has_block_size = true, block_size = 48);
    let _ = call;
}
