/// Rejected at compile time: 6 batches do not split over 4 KV data parallel ranks.
fn main() {
    let call = nkilib::attn_block_config!(b = 6, s_tkg = 1, h = 6144, d_head = 64, q_heads = 8, s_ctx = 11264, kvdp = 4, has_replica_group = true);
    let _ = call;
}
