/// Rejected at compile time: qkv_cte's float8 MX input is moved by DMA transposes, whose order is MX_INTERLEAVED's.
fn main() {
    let call = nkilib::qkv_cte_config!(bxs = 1024, hidden = 1024, fused_qkv = 384, mx_quant = true, s_shard = 512, fp8_input = true);
    let _ = call;
}
