/// Rejected at compile time: the library reads no tile-size override.
fn main() {
    let call = nkilib::bwmm_bwd_config!(hidden = 2880, intermediate = 2880, experts = 2, block_size = 512, positions = 17 * 512, block_tile_size = true);
    let _ = call;
}
