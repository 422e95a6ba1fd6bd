/// Rejected at compile time: 32 heads is above the 17 the library validates.
fn main() {
    let shape = nkilib::output_projection_cte_config!(b = 1, n = 32, d = 64, s = 2048, h = 3072, programs = 2);
    let _ = shape;
}
