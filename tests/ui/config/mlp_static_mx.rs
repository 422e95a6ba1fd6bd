use nkilib::mlp::mlp::QuantizationType;

/// A `STATIC_MX` mlp call (fp8 hidden rows) of these sizes.
macro_rules! static_mx {
    (tokens = $t:expr, hidden = $h:expr, intermediate = $i:expr, programs = $p:expr) => {
        nkilib::mlp_config!(
            tokens = $t,
            hidden = $h,
            intermediate = $i,
            programs = $p,
            quantized_input = true,
            quantization_type = QuantizationType::STATIC_MX
        )
    };
}

/// Rejected at compile time: the sizes the library's `STATIC_MX` mlp does not take.
fn main() {
    // 262 tokens split over two programs leave 131 rows on each, and the MX matmul takes an even number.
    let _ = static_mx!(tokens = 262, hidden = 8192, intermediate = 1024, programs = 2);
    // H = 8192, I = 3584 on LNC2 splits I into halves of 1792 columns, not whole 512-column blocks.
    let _ = static_mx!(tokens = 256, hidden = 8192, intermediate = 3584, programs = 2);
    // The weights come pre-shuffled in whole 512-row blocks.
    let _ = static_mx!(tokens = 256, hidden = 4096, intermediate = 896, programs = 1);
    // STATIC_MX runs the context-encoding path only.
    let _ = static_mx!(tokens = 8, hidden = 4096, intermediate = 1024, programs = 1);
}
