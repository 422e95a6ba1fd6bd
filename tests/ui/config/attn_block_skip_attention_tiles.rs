/// Rejected at compile time: skip_attention takes one tile of B * S_tkg <= 128 token rows.
fn main() {
    let call = nkilib::attn_block_config!(b = 130, s_tkg = 1, h = 6144, d_head = 64, q_heads = 8, s_ctx = 11264, skip_attention = true);
    let _ = call;
}
