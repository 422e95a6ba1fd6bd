/// Rejected at compile time: the library's blocks hold 128, 256, 512 or 1024 positions.
fn main() {
    let call = nkilib::bwmm_bwd_config!(hidden = 2880, intermediate = 2880, experts = 2, block_size = 384, positions = 17 * 384);
    let _ = call;
}
