/// Rejected at compile time: the MX paths always scale by the affinities (POST_SCALE only).
fn main() {
    let call = nkilib::moe_tkg_config!(tokens = 4, hidden = 3072, intermediate = 384, experts = 16, top_k = 4, programs = 2, is_all_expert = false, mx = true, has_gate_up_scale = true, has_down_scale = true);
    let _ = call;
}
