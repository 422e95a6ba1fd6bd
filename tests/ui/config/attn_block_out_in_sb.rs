/// Rejected at compile time: out_in_sb=True leaves the output in SBUF.
fn main() {
    let call = nkilib::attn_block_config!(b = 4, s_tkg = 1, h = 6144, d_head = 64, q_heads = 8, s_ctx = 11264, out_in_sb = true);
    let _ = call;
}
