/// Rejected at compile time: qkv_cte's fused RoPE takes heads that tile a 512-column PSUM bank.
fn main() {
    let call = nkilib::qkv_cte_config!(bxs = 1024, hidden = 8192, fused_qkv = 1920, d_head = 192, num_q_heads = 8, num_kv_heads = 1, fused_rope = true);
    let _ = call;
}
