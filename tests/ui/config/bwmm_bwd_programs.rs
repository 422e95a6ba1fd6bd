/// Rejected at compile time: the hidden dim is split over one or two programs.
fn main() {
    let call = nkilib::bwmm_bwd_config!(hidden = 2880, intermediate = 2880, experts = 2, block_size = 512, positions = 17 * 512, programs = 4);
    let _ = call;
}
