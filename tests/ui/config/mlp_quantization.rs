/// Rejected at compile time: fp8 row-quantized weights are not implemented.
fn main() {
    let call = nkilib::mlp_config!(
        tokens = 8,
        hidden = 4096,
        intermediate = 896,
        programs = 1,
        quantization_type = nkilib::mlp::mlp::QuantizationType::ROW
    );
    let _ = call;
}
