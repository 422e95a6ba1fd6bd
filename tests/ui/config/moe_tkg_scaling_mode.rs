/// Rejected at compile time: the decode kernel scales after the experts only (PRE_SCALE belongs to context encoding).
use nkilib::moe::moe_tkg::moe_tkg::ExpertAffinityScaleMode;

fn main() {
    let call = nkilib::moe_tkg_config!(
        tokens = 4,
        hidden = 512,
        intermediate = 128,
        experts = 4,
        top_k = 2,
        programs = 1,
        is_all_expert = false,
        expert_affinities_scaling_mode = ExpertAffinityScaleMode::PRE_SCALE,
    );
    let _ = call;
}
