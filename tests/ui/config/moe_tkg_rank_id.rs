/// Rejected at compile time: all-expert POST_SCALE slices the global affinities by rank_id, which is missing.
use nkilib::moe::moe_tkg::moe_tkg::ExpertAffinityScaleMode;

fn main() {
    let call = nkilib::moe_tkg_config!(
        tokens = 4,
        hidden = 3072,
        intermediate = 384,
        experts = 8,
        top_k = 8,
        programs = 2,
        is_all_expert = true,
        expert_affinities_scaling_mode = ExpertAffinityScaleMode::POST_SCALE,
    );
    let _ = call;
}
