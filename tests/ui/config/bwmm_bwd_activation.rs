/// Rejected at compile time: the gate's activation is SiLU or Swish.
use nkilib::experimental::moe::blockwise_mm_backward::ActFnType;

fn main() {
    let call = nkilib::bwmm_bwd_config!(hidden = 2880, intermediate = 2880, experts = 2, block_size = 512, positions = 17 * 512, activation = ActFnType::GELU);
    let _ = call;
}
