/// Rejected at compile time: the cache update needs its write positions.
fn main() {
    let call = nkilib::attn_block_config!(b = 4, s_tkg = 1, h = 6144, d_head = 64, q_heads = 8, s_ctx = 11264, has_update_idx = false);
    let _ = call;
}
