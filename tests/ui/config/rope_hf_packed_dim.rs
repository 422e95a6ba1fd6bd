/// Rejected at compile time: a packed rope_cache holds cos and sin, 2 * head_dim columns.
fn main() {
    let call = nkilib::rope_hf_config!(q = [1, 32, 256, 128], k = [1, 8, 256, 128], rope = [256, 128], packed = true, programs = 1);
    let _ = call;
}
