/// Rejected at compile time: qkv_cte's fp8 KV-cache outputs split Q, K and V by the head counts.
fn main() {
    let call = nkilib::qkv_cte_config!(bxs = 1024, hidden = 2048, fused_qkv = 384, d_head = 128, kv_cache = true);
    let _ = call;
}
