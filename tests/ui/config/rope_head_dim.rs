/// Rejected at compile time: the library's RoPE takes head sizes 64 and 128 (any
/// positive B, n_heads and S).
fn main() {
    let shape = nkilib::rope_config!(d_head = 96, batch = 8192, heads = 512, seq = 8192, programs = 2);
    let _ = shape;
}
