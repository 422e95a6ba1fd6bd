/// Rejected at compile time: chunk_size must divide T.
fn main() {
    let call = nkilib::find_nonzero_indices_config!(t = 4096, c = 128, chunk_size = 1536);
    let _ = call;
}
