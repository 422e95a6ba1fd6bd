/// Rejected at compile time: 8 tokens take the decode path, which multiplies 16-bit hidden rows, not fp8 ones.
fn main() {
    let call = nkilib::mlp_config!(
        tokens = 8,
        hidden = 4096,
        intermediate = 896,
        programs = 1,
        quantization_type = nkilib::mlp::mlp::QuantizationType::ROW,
        quantized_input = true
    );
    let _ = call;
}
