/// Rejected at compile time: 256 rows on one program exceed the 128 partitions.
fn main() {
    let call = nkilib::cascaded_max_config!(bxs = 256, vocab = 3168, programs = 1);
    let _ = call;
}
