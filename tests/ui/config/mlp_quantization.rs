/// Rejected at compile time: the STATIC_MX quantization form is not implemented.
fn main() {
    let call = nkilib::mlp_config!(
        tokens = 8,
        hidden = 4096,
        intermediate = 896,
        programs = 1,
        quantization_type = nkilib::mlp::mlp::QuantizationType::STATIC_MX
    );
    let _ = call;
}
