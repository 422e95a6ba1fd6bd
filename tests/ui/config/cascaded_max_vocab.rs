/// Rejected at compile time: a row must fill at least one stage of 128 columns.
fn main() {
    let call = nkilib::cascaded_max_config!(bxs = 4, vocab = 100, programs = 1);
    let _ = call;
}
