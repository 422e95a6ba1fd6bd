/// Rejected at compile time: qkv_cte's fp8 KV-cache outputs store Q, K and V by rows (BSD), not NBSd.
fn main() {
    let call = nkilib::qkv_cte_config!(bxs = 1024, hidden = 2048, fused_qkv = 384, d_head = 128, num_q_heads = 1, num_kv_heads = 1, nbsd = true, kv_cache = true);
    let _ = call;
}
