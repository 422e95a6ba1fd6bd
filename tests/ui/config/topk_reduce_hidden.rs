/// Rejected at compile time: 2882 columns do not split over 4 programs.
fn main() {
    let call = nkilib::topk_reduce_config!(t = 4, k = 4, h = 2882, lnc = 4);
    let _ = call;
}
