/// Rejected at compile time: qkv_cte's I = 5120 columns do not fit the 8 PSUM banks of 512.
fn main() {
    let call = nkilib::qkv_cte_config!(bxs = 1024, hidden = 8192, fused_qkv = 5120);
    let _ = call;
}
