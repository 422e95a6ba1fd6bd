/// Rejected at compile time: qkv_cte's MX_INTERLEAVED (DMA-transpose) MX forms are not implemented.
fn main() {
    let call = nkilib::qkv_cte_config!(bxs = 1024, hidden = 1024, fused_qkv = 384, mx_quant = true, s_shard = 512, mx_interleaved = true);
    let _ = call;
}
