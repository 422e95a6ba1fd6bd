/// Rejected at compile time: the MX down bias is weighted by all the affinities in one matmul over at most 128 experts.
use nkilib::moe::moe_tkg::moe_tkg::ExpertAffinityScaleMode;

fn main() {
    let call = nkilib::moe_tkg_config!(tokens = 4, hidden = 3072, intermediate = 384, experts = 256, top_k = 4, programs = 2, is_all_expert = false, has_down_bias = true, mx = true, has_gate_up_scale = true, has_down_scale = true, expert_affinities_scaling_mode = ExpertAffinityScaleMode::POST_SCALE);
    let _ = call;
}
