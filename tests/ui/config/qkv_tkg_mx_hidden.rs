/// Rejected at compile time: MX quantization packs H in 512-row tiles (128 partitions x 4), which H = 640 does not fill.
fn main() {
    let call = nkilib::qkv_tkg_config!(bxs = 4, hidden = 640, fused_qkv = 512, programs = 1, mx_quant = true);
    let _ = call;
}
