/// Rejected at compile time: I = 160 over 2 programs gives 80, not a multiple of 32.
fn main() {
    let call = nkilib::bwmm_bwd_config!(hidden = 2880, intermediate = 160, experts = 2, block_size = 512, positions = 17 * 512);
    let _ = call;
}
