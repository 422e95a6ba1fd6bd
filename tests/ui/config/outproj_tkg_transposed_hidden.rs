/// Rejected at compile time: with TRANSPOSE_OUT on LNC2, H = 3000 is not a multiple of 128 * 2.
fn main() {
    let shape = nkilib::output_projection_tkg_config!(d = 64, b = 4, n = 8, s = 4, h = 3000, programs = 2, transpose_out = true);
    let _ = shape;
}
