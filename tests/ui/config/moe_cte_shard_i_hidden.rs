/// Rejected at compile time: the hidden size is a multiple of 512 up to 8192.
fn main() {
    let call = nkilib::bwmm_shard_on_i_config!(hidden = 8704, intermediate = 2048, experts = 8, block_size = 512, positions = 16 * 512);
    let _ = call;
}
