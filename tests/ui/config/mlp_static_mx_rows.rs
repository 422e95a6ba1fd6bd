/// Rejected at compile time: 262 tokens split over two programs leave 131 rows on each, and the MX matmul takes an even number.
fn main() {
    let call = nkilib::mlp_config!(
        tokens = 262,
        hidden = 8192,
        intermediate = 1024,
        programs = 2,
        quantized_input = true,
        quantization_type = nkilib::mlp::mlp::QuantizationType::STATIC_MX
    );
    let _ = call;
}
