/// Rejected at compile time: no ring.
fn main() {
    let call = nkilib::fine_grained_allgather_config!(m = 128, k = 128, tp_degree = 4, num_groups = 0);
    let _ = call;
}
