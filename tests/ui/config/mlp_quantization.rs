/// Rejected at compile time: the library's mlp takes no ROW_MX quantization.
fn main() {
    let call = nkilib::mlp_config!(
        tokens = 8,
        hidden = 4096,
        intermediate = 896,
        programs = 1,
        quantization_type = nkilib::mlp::mlp::QuantizationType::ROW_MX
    );
    let _ = call;
}
