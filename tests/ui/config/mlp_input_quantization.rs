/// Rejected at compile time: fp8 hidden rows without STATIC or ROW quantization.
fn main() {
    let call = nkilib::mlp_config!(tokens = 128, hidden = 4096, intermediate = 896, programs = 1, quantized_input = true);
    let _ = call;
}
