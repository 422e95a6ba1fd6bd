/// Rejected at compile time: MX quantization multiplies with nc_matmul_mx, which only trn3 (NeuronCore-v4) has.
fn main() {
    let shape = nkilib::output_projection_cte_config!(b = 1, n = 8, d = 128, s = 512, h = 3072, programs = 2, mx_quant = true);
    let _ = shape;
}
