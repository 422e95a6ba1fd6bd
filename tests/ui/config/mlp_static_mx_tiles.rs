/// Rejected at compile time: STATIC_MX weights come pre-shuffled in whole 512-row blocks.
fn main() {
    let call = nkilib::mlp_config!(
        tokens = 256,
        hidden = 4096,
        intermediate = 896,
        programs = 1,
        quantized_input = true,
        quantization_type = nkilib::mlp::mlp::QuantizationType::STATIC_MX
    );
    let _ = call;
}
