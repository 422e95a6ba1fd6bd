/// Rejected at compile time: the library requires an even hidden size.
fn main() {
    let call = nkilib::bwmm_bwd_config!(hidden = 2881, intermediate = 2880, experts = 2, block_size = 512, positions = 17 * 512);
    let _ = call;
}
