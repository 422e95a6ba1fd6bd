/// Rejected at compile time: 129 tokens do not fit the partitions.
fn main() {
    let call = nkilib::topk_reduce_config!(t = 129, k = 4, h = 2880);
    let _ = call;
}
