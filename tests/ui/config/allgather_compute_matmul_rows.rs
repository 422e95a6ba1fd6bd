/// Rejected at compile time: 6 rows do not split over 2 programs and 2 ring
/// channels.
fn main() {
    let call = nkilib::allgather_compute_matmul_config!(m = 6, k = 128, n = 128, tp_degree = 4);
    let _ = call;
}
