/// Rejected at compile time: a normalization bias goes with LayerNorm only.
fn main() {
    let call = nkilib::mlp_config!(
        tokens = 8,
        hidden = 4096,
        intermediate = 896,
        programs = 1,
        normalization_type = nkilib::mlp::mlp::NormType::RMS_NORM,
        has_norm_bias = true
    );
    let _ = call;
}
