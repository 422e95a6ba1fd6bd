/// Rejected at compile time: 1024 rows over 2 programs and 2 channels are
/// slices of 256, but K = 200 does not split into tiles of 128.
fn main() {
    let call = nkilib::fine_grained_allgather_config!(m = 1024, k = 200, tp_degree = 4);
    let _ = call;
}
