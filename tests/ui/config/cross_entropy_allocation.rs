/// Rejected at compile time: 128 fp32 positions × 65,535 columns is 32 MiB, over
/// the 24 MiB one tile may take.
fn main() {
    let call = nkilib::cross_entropy_config!(num_positions = 8192, vocab_size = 129280, positions_per_batch = 128, chunk_size = 65535, dtype_bytes = 4);
    let _ = call;
}
