/// Rejected at compile time: 6 rows do not split over 2 programs and 2 ring
/// channels.
fn main() {
    let call = nkilib::fine_grained_allgather_config!(m = 6, k = 128, tp_degree = 4);
    let _ = call;
}
