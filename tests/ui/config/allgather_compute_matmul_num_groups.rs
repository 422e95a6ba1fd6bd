/// Rejected at compile time: no ring at all.
fn main() {
    let call = nkilib::allgather_compute_matmul_config!(m = 128, k = 128, n = 128, tp_degree = 4, num_groups = 0);
    let _ = call;
}
