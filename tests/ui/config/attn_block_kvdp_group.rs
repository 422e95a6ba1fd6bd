/// Rejected at compile time: KV data parallelism without the ranks it gathers over.
fn main() {
    let call = nkilib::attn_block_config!(b = 4, s_tkg = 1, h = 6144, d_head = 64, q_heads = 8, s_ctx = 11264, kvdp = 2);
    let _ = call;
}
