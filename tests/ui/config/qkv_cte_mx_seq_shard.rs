/// Rejected at compile time: qkv_cte's MX matmuls take an even count of rows per program.
fn main() {
    let call = nkilib::qkv_cte_config!(bxs = 1002, hidden = 1024, fused_qkv = 384, mx_quant = true, s_shard = 501);
    let _ = call;
}
