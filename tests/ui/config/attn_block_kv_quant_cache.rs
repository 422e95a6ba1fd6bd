/// Rejected at compile time: fp8 KV-cache quantization writes float8_e4m3 caches.
fn main() {
    let call = nkilib::attn_block_config!(b = 4, s_tkg = 1, h = 6144, d_head = 64, q_heads = 8, s_ctx = 11264, has_k_scale = true, has_v_scale = true);
    let _ = call;
}
