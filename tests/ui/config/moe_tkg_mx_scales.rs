/// Rejected at compile time: MX weights need both block scales.
use nkilib::moe::moe_tkg::moe_tkg::ExpertAffinityScaleMode;

fn main() {
    let call = nkilib::moe_tkg_config!(tokens = 4, hidden = 3072, intermediate = 384, experts = 16, top_k = 4, programs = 2, is_all_expert = false, mx = true, has_gate_up_scale = true, expert_affinities_scaling_mode = ExpertAffinityScaleMode::POST_SCALE);
    let _ = call;
}
