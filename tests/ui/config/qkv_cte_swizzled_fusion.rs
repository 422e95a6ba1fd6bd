/// Rejected at compile time: qkv_cte's pre-swizzled input is not normalised (its rows are not in H order).
fn main() {
    let call = nkilib::qkv_cte_config!(bxs = 1024, hidden = 1024, fused_qkv = 384, mx_quant = true, s_shard = 512, swizzled = true, normalized = true);
    let _ = call;
}
