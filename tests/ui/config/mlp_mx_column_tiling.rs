/// Rejected at compile time: the MX form needs both column tilings off (the
/// kernel's defaults turn them on).
fn main() {
    let call = nkilib::mlp_config!(
        tokens = 8,
        hidden = 4096,
        intermediate = 1024,
        programs = 2,
        quantization_type = nkilib::mlp::mlp::QuantizationType::MX
    );
    let _ = call;
}
