/// Rejected at compile time: 128 tokens take the context-encoding path, whose fp8 forms read fp8 hidden rows, not 16-bit ones.
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
