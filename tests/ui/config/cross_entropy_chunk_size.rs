/// Rejected at compile time: a vocabulary chunk wider than the vocabulary.
fn main() {
    let call = nkilib::cross_entropy_config!(num_positions = 128, vocab_size = 16384, chunk_size = 32768);
    let _ = call;
}
