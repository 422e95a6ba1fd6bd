/// Rejected at compile time: 700 columns are neither one tile of at most 512
/// nor whole tiles of 512.
fn main() {
    let call = nkilib::allgather_compute_matmul_config!(m = 128, k = 128, n = 700, tp_degree = 4);
    let _ = call;
}
