/// Rejected at compile time: nc_find_index8 finds at most 8 rows per token.
fn main() {
    let call = nkilib::topk_reduce_config!(t = 4, k = 9, h = 2880);
    let _ = call;
}
