/// Rejected at compile time: the backward reduces by "mean" or "sum" only.
fn main() {
    let call = nkilib::cross_entropy_config!(num_positions = 128, vocab_size = 32128, chunk_size = 32128, reduction = "none");
    let _ = call;
}
