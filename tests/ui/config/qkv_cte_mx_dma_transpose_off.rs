/// Rejected at compile time: qkv_cte's float8 MX input is only moved by DMA transposes.
fn main() {
    let call = nkilib::qkv_cte_config!(
        bxs = 1024,
        hidden = 1024,
        fused_qkv = 384,
        mx_quant = true,
        s_shard = 512,
        mx_interleaved = true,
        fp8_input = true,
        dma_transpose_off = true
    );
    let _ = call;
}
