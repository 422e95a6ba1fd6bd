/// Rejected at compile time: H = 8192, I = 3584 on LNC2 splits I into halves of 1792 columns, not whole 512-column blocks.
fn main() {
    let call = nkilib::mlp_config!(
        tokens = 256,
        hidden = 8192,
        intermediate = 3584,
        programs = 2,
        quantized_input = true,
        quantization_type = nkilib::mlp::mlp::QuantizationType::STATIC_MX
    );
    let _ = call;
}
