/// Rejected at compile time: the NBSd output layout stores I = 896 head by head, which d_head 100 does not divide.
fn main() {
    let call = nkilib::qkv_tkg_config!(bxs = 4, hidden = 4096, fused_qkv = 896, programs = 2, d_head = 100, nbsd = true);
    let _ = call;
}
