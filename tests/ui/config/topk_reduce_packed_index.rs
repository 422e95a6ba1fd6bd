/// Rejected at compile time: an odd H leaves the packed int32 index off the
/// int32 words.
fn main() {
    let call = nkilib::topk_reduce_config!(t = 4, k = 4, h = 2881, lnc = 1);
    let _ = call;
}
