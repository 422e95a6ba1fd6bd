/// Rejected at compile time: k_scale and v_scale come together.
fn main() {
    let call = nkilib::attn_block_config!(b = 4, s_tkg = 1, h = 6144, d_head = 64, q_heads = 8, s_ctx = 11264, has_k_scale = true, fp8_cache = true);
    let _ = call;
}
