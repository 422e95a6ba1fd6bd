/// Rejected at compile time: B * S_tkg must be at most 128.
fn main() {
    let call = nkilib::attn_block_config!(b = 130, s_tkg = 1, h = 6144, d_head = 64, q_heads = 8, s_ctx = 11264);
    let _ = call;
}
