use nkilib::mlp::mlp::{NormType, QuantizationType};

/// An mlp call of `tokens` (the context-encoding path from 97 on) on `programs`
/// programs, H = 4096, I = 896, with the options under test.
macro_rules! cte {
    (tokens = $t:expr, programs = $p:expr $(, $field:ident = $v:expr)*) => {
        nkilib::mlp_config!(tokens = $t, hidden = 4096, intermediate = 896, programs = $p $(, $field = $v)*)
    };
}

/// Rejected at compile time: the options the library's context-encoding mlp refuses.
fn main() {
    // 128 tokens take the context-encoding path, which (as the library's) has no clamps.
    let _ = cte!(tokens = 128, programs = 2, clamped = true);
    // Its fp8 forms read fp8 hidden rows, not 16-bit ones.
    let _ = cte!(tokens = 128, programs = 1, quantization_type = QuantizationType::STATIC);
    // fp8 hidden rows need STATIC or ROW quantization.
    let _ = cte!(tokens = 128, programs = 1, quantized_input = true);
    // fp8 hidden rows take no norm (it would normalise the codes, not the rows).
    let _ = cte!(
        tokens = 256,
        programs = 2,
        normalization_type = NormType::RMS_NORM,
        quantization_type = QuantizationType::ROW,
        quantized_input = true
    );
    // An LNC2 call that shards the tokens needs an even count.
    let _ = cte!(tokens = 301, programs = 2);
}
