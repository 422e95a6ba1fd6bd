/// Rejected at compile time: an odd ring cannot alternate its two buffers.
fn main() {
    let call = nkilib::fine_grained_allgather_config!(m = 128, k = 128, tp_degree = 3);
    let _ = call;
}
