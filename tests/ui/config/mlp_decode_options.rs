use nkilib::mlp::mlp::{NormType, QuantizationType};

/// An mlp call of 8 tokens (the decode path) with the options under test.
macro_rules! decode {
    ($($field:ident = $v:expr),*) => {
        nkilib::mlp_config!(tokens = 8, hidden = 4096, intermediate = 896, programs = 1 $(, $field = $v)*)
    };
}

/// Rejected at compile time: options the library's mlp refuses, on a decode-sized call.
fn main() {
    // A normalization bias goes with LayerNorm only.
    let _ = decode!(normalization_type = NormType::RMS_NORM, has_norm_bias = true);
    // The library's mlp takes no ROW_MX quantization.
    let _ = decode!(quantization_type = QuantizationType::ROW_MX);
    // The decode path multiplies 16-bit hidden rows, not fp8 ones.
    let _ = decode!(quantization_type = QuantizationType::ROW, quantized_input = true);
}
