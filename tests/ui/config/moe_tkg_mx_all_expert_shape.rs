/// Rejected at compile time: the MX all-expert path takes every token in one gate/up tile of at most 256.
use nkilib::moe::moe_tkg::moe_tkg::ExpertAffinityScaleMode;

fn main() {
    let call = nkilib::moe_tkg_config!(tokens = 257, hidden = 3072, intermediate = 3072, experts = 1, top_k = 1, programs = 2, is_all_expert = true, mx = true, has_gate_up_scale = true, has_down_scale = true, has_rank_id = true, expert_affinities_scaling_mode = ExpertAffinityScaleMode::POST_SCALE);
    let _ = call;
}
