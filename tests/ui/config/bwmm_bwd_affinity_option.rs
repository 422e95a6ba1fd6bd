/// Rejected at compile time: the library scales by the affinity on the hidden dim only.
use nkilib::experimental::moe::blockwise_mm_backward::AffinityOption;

fn main() {
    let call = nkilib::bwmm_bwd_config!(hidden = 2880, intermediate = 2880, experts = 2, block_size = 512, positions = 17 * 512, affinity_option = AffinityOption::AFFINITY_ON_I);
    let _ = call;
}
