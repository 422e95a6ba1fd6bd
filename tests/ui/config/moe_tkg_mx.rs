/// Rejected at compile time: hidden_input_scale goes with an input quantized upstream and held in SBUF, which a launched kernel cannot take.
fn main() {
    let call = nkilib::moe_tkg_config!(tokens = 32, hidden = 3072, intermediate = 3072, experts = 1, top_k = 1, programs = 2, is_all_expert = true, mx = true, has_hidden_input_scale = true);
    let _ = call;
}
