/// Rejected at compile time: the library's backward is dropless only.
use nkilib::experimental::moe::blockwise_mm_backward::KernelTypeOption;

fn main() {
    let call = nkilib::bwmm_bwd_config!(hidden = 2880, intermediate = 2880, experts = 2, block_size = 512, positions = 17 * 512, kernel_type_option = KernelTypeOption::DROPPING);
    let _ = call;
}
