/// Rejected at compile time: token_position_to_id must hold whole blocks.
fn main() {
    let call = nkilib::bwmm_bwd_config!(hidden = 2880, intermediate = 2880, experts = 2, block_size = 512, positions = 1000);
    let _ = call;
}
