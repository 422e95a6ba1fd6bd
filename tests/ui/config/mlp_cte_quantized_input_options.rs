/// Rejected at compile time: fp8 hidden rows take no norm (it would normalise the codes, not the rows).
fn main() {
    let call = nkilib::mlp_config!(
        tokens = 256,
        hidden = 4096,
        intermediate = 896,
        programs = 2,
        normalization_type = nkilib::mlp::mlp::NormType::RMS_NORM,
        quantization_type = nkilib::mlp::mlp::QuantizationType::ROW,
        quantized_input = true
    );
    let _ = call;
}
