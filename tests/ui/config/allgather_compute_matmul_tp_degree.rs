/// Rejected at compile time: an odd ring cannot alternate its two buffers.
fn main() {
    let call = nkilib::allgather_compute_matmul_config!(m = 128, k = 128, n = 128, tp_degree = 3);
    let _ = call;
}
