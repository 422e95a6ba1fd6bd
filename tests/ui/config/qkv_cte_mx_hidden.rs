/// Rejected at compile time: qkv_cte's MX form packs H in tiles of 512 (128 partitions x 4 values).
fn main() {
    let call = nkilib::qkv_cte_config!(bxs = 1024, hidden = 640, fused_qkv = 384, mx_quant = true, s_shard = 512);
    let _ = call;
}
