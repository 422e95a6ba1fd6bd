/// Rejected at compile time: the MX all-expert path takes no input quantized upstream (hidden_input_scale).
fn main() {
    let call = nkilib::moe_tkg_config!(tokens = 32, hidden = 3072, intermediate = 3072, experts = 1, top_k = 1, programs = 2, is_all_expert = true, mx = true, has_hidden_input_scale = true);
    let _ = call;
}
