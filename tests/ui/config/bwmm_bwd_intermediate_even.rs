/// Rejected at compile time: the library requires an even intermediate size.
fn main() {
    let call = nkilib::bwmm_bwd_config!(hidden = 2880, intermediate = 2881, experts = 2, block_size = 512, positions = 17 * 512);
    let _ = call;
}
