use nki::examples::rmsnorm_quant::RmsNormQuantKernelArgs;

/// Rejected at compile time: `kargs.norm_type` must be NO_NORM (0) or RMS_NORM (1).
fn main() {
    let cfg = nki::rmsnorm_quant_config!(
        kargs = RmsNormQuantKernelArgs { lower_bound: 0.0, norm_type: 2, quantization_type: 2, eps: 1e-6 },
        hidden = [1, 128, 1024]
    );
    let _ = cfg;
}
