/// Rejected at compile time: rhs (2 · 1536 · 3072 bf16) is streamed in blocks
/// of 8 K tiles, which do not divide its 12.
fn main() {
    let call = nkilib::allgather_compute_matmul_config!(m = 1024, k = 1536, n = 3072, tp_degree = 4);
    let _ = call;
}
