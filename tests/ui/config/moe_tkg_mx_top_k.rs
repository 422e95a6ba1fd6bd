/// Rejected at compile time: the MX selective path splits the top-k slots over the two programs.
use nkilib::moe::moe_tkg::moe_tkg::ExpertAffinityScaleMode;

fn main() {
    let call = nkilib::moe_tkg_config!(tokens = 4, hidden = 3072, intermediate = 384, experts = 16, top_k = 3, programs = 2, is_all_expert = false, mx = true, has_gate_up_scale = true, has_down_scale = true, expert_affinities_scaling_mode = ExpertAffinityScaleMode::POST_SCALE);
    let _ = call;
}
