/// Rejected at compile time: qkv_cte's on-chip MX transposes put the rows in MX_CONTIGUOUS order, not MX_INTERLEAVED's.
fn main() {
    let call = nkilib::qkv_cte_config!(bxs = 1024, hidden = 1024, fused_qkv = 384, mx_quant = true, s_shard = 512, mx_interleaved = true);
    let _ = call;
}
