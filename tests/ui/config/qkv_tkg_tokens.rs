/// Rejected at compile time: qkv_tkg's 129 tokens do not fit the 128 rows of one matmul (qkv_cte's case).
fn main() {
    let call = nkilib::qkv_tkg_config!(bxs = 129, hidden = 4096, fused_qkv = 896, programs = 1);
    let _ = call;
}
