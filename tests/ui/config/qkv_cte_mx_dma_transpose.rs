/// A qkv_cte MX call in MX_INTERLEAVED order (the DMA transposes' order), with the
/// options under test.
macro_rules! interleaved_mx {
    ($($field:ident = $v:expr),*) => {
        nkilib::qkv_cte_config!(
            bxs = 1024,
            hidden = 1024,
            fused_qkv = 384,
            mx_quant = true,
            s_shard = 512,
            mx_interleaved = true
            $(, $field = $v)*
        )
    };
}

/// Rejected at compile time: the rules of qkv_cte's DMA-transpose MX path, which moves
/// float8 rows, or bfloat16 rows with qkv_in_scale's static dequantization, as stored.
fn main() {
    // The rows are moved as stored, so they cannot be normalised.
    let _ = interleaved_mx!(fp8_input = true, normalized = true);
    // float8 rows are only moved by DMA transposes.
    let _ = interleaved_mx!(fp8_input = true, dma_transpose_off = true);
    // The static dequantization needs the heads to find the Q, K and V columns.
    let _ = interleaved_mx!(bf16_input = true, qkv_w_scale = [128, 3], qkv_in_scale = [128, 1]);
    // It moves bfloat16 or float8 rows, not float16.
    let _ = interleaved_mx!(d_head = 128, num_q_heads = 1, num_kv_heads = 1, qkv_w_scale = [1, 3], qkv_in_scale = [1, 1]);
    // It takes one weight scale per Q, K and V, not MX block scales.
    let _ = interleaved_mx!(
        d_head = 128,
        num_q_heads = 1,
        num_kv_heads = 1,
        bf16_input = true,
        qkv_w_scale = [32, 384],
        qkv_in_scale = [1, 1]
    );
}
