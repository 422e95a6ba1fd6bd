/// Rejected at compile time: qkv_cte's MX static dequantization moves bfloat16 or float8 rows, not float16.
fn main() {
    let call = nkilib::qkv_cte_config!(
        bxs = 1024,
        hidden = 1024,
        fused_qkv = 384,
        d_head = 128,
        num_q_heads = 1,
        num_kv_heads = 1,
        mx_quant = true,
        s_shard = 512,
        mx_interleaved = true,
        qkv_w_scale = [1, 3],
        qkv_in_scale = [1, 1]
    );
    let _ = call;
}
