/// Rejected at compile time: 128 tokens take the context-encoding path, where fp8 weights are not implemented.
fn main() {
    let call = nkilib::mlp_config!(
        tokens = 128,
        hidden = 4096,
        intermediate = 896,
        programs = 1,
        quantization_type = nkilib::mlp::mlp::QuantizationType::STATIC
    );
    let _ = call;
}
