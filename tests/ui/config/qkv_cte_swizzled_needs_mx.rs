/// Rejected at compile time: qkv_cte's pre-swizzled input is an MX layout.
fn main() {
    let call = nkilib::qkv_cte_config!(bxs = 1024, hidden = 1024, fused_qkv = 384, swizzled = true);
    let _ = call;
}
