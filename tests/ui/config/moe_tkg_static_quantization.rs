/// Rejected at compile time: as the library, the decode MoE kernel takes no static (input-scale) quantization.
fn main() {
    let call = nkilib::moe_tkg_config!(tokens = 4, hidden = 512, intermediate = 64, experts = 4, top_k = 2, programs = 2, is_all_expert = false, has_input_scales = true);
    let _ = call;
}
