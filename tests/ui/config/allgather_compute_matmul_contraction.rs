/// Rejected at compile time: lhs has 256 columns, rhs 128 rows.
fn main() {
    let call = nkilib::allgather_compute_matmul_config!(m = 128, k = 256, n = 128, tp_degree = 4, k_rhs = 128);
    let _ = call;
}
