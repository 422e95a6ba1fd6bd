/// Rejected at compile time: H = 160 over the 2 programs gives 80 columns
/// each, not a multiple of the 32 the library's DMA transposes take.
fn main() {
    let call = nkilib::bwmm_bwd_config!(hidden = 160, intermediate = 128, experts = 2, block_size = 256, positions = 4 * 256);
    let _ = call;
}
