/// Rejected at compile time: qkv_cte's MX form does not write the fp8 KV caches.
fn main() {
    let call = nkilib::qkv_cte_config!(bxs = 1024, hidden = 1024, fused_qkv = 384, d_head = 128, num_q_heads = 1, num_kv_heads = 1, kv_cache = true, mx_quant = true, s_shard = 512);
    let _ = call;
}
