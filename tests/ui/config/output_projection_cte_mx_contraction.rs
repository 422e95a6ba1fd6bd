/// Rejected at compile time: MX quantization packs N * D in tiles of 128 rows (32 packed rows of 4), which N * D = 96 does not fill.
fn main() {
    let shape = nkilib::output_projection_cte_config!(
        b = 1,
        n = 1,
        d = 96,
        s = 512,
        h = 3072,
        programs = 2,
        mx_quant = true,
        generation = nki::hw::Generation::Trn3
    );
    let _ = shape;
}
