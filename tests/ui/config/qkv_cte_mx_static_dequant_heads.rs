/// Rejected at compile time: qkv_cte's MX static dequantization needs the heads to find the Q, K and V columns.
fn main() {
    let call = nkilib::qkv_cte_config!(
        bxs = 1024,
        hidden = 1024,
        fused_qkv = 384,
        mx_quant = true,
        s_shard = 512,
        mx_interleaved = true,
        bf16_input = true,
        qkv_w_scale = [128, 3],
        qkv_in_scale = [128, 1]
    );
    let _ = call;
}
