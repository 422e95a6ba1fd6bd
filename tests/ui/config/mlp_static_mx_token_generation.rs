/// Rejected at compile time: STATIC_MX runs the context-encoding path only.
fn main() {
    let call = nkilib::mlp_config!(
        tokens = 8,
        hidden = 4096,
        intermediate = 1024,
        programs = 1,
        quantized_input = true,
        quantization_type = nkilib::mlp::mlp::QuantizationType::STATIC_MX
    );
    let _ = call;
}
