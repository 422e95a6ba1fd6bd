/// Rejected at compile time: the MX all-expert dynamic strategy takes one local expert, as the library's.
fn main() {
    let call = nkilib::moe_tkg_config!(tokens = 256, hidden = 3072, intermediate = 3072, experts = 2, top_k = 1, programs = 2, is_all_expert = true, mx = true, has_rank_id = true, has_gate_up_scale = true, has_down_scale = true, is_all_expert_dynamic = true, has_block_size = true, block_size = 64);
    let _ = call;
}
