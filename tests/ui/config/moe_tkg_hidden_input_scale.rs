/// Rejected at compile time: hidden_input_scale is only taken by the MX all-expert path, with MX weights.
fn main() {
    let call = nkilib::moe_tkg_config!(tokens = 4, hidden = 3072, intermediate = 384, experts = 16, top_k = 4, programs = 2, is_all_expert = false, has_hidden_input_scale = true);
    let _ = call;
}
