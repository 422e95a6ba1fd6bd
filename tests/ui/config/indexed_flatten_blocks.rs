/// Rejected at compile time: 4096 / 512 = 8 blocks per row, not a multiple of 16.
fn main() {
    let call = nkilib::indexed_flatten_config!(e = 2, t = 4096, f_len = 512, output_len = 9216);
    let _ = call;
}
