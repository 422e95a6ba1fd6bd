use nkilib::experimental::moe::blockwise_mm_backward::{ActFnType, AffinityOption, KernelTypeOption, ShardOption};

/// A backward call the size rules accept (H = I = 2880, 17 blocks of 512 positions
/// over 2 experts) with the options under test.
macro_rules! backward {
    ($($field:ident = $v:expr),*) => {
        nkilib::bwmm_bwd_config!(hidden = 2880, intermediate = 2880, experts = 2, block_size = 512, positions = 17 * 512 $(, $field = $v)*)
    };
}

/// Rejected at compile time: the options the library's backward does not implement.
fn main() {
    // The gate's activation is SiLU or Swish.
    let _ = backward!(activation = ActFnType::GELU);
    // The library scales by the affinity on the hidden dim only.
    let _ = backward!(affinity_option = AffinityOption::AFFINITY_ON_I);
    // The library reads no tile-size override.
    let _ = backward!(block_tile_size = true);
    // The library's backward is dropless only.
    let _ = backward!(kernel_type_option = KernelTypeOption::DROPPING);
    // The hidden dim is split over one or two programs.
    let _ = backward!(programs = 4);
    // The library's backward shards on the hidden dim only.
    let _ = backward!(shard_option = ShardOption::SHARD_ON_INTERMEDIATE);
}
