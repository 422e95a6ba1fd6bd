use nkilib::rmsnorm::rmsnorm_quant::{NormType, QuantizationType, RmsNormQuantKernelArgs};

/// Rejected at compile time: the kernel implements `NormType.NO_NORM` and `NormType.RMS_NORM` only.
fn main() {
    let cfg = nkilib::rmsnorm_quant_config!(
        kargs = RmsNormQuantKernelArgs {
            lower_bound: 0.0,
            norm_type: NormType::LAYER_NORM,
            quantization_type: QuantizationType::ROW,
            eps: 1e-6
        },
        hidden = [1, 128, 1024]
    );
    let _ = cfg;
}
