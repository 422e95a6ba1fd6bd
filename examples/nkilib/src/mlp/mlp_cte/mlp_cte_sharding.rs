//! How the programs of an LNC2 launch split a context-encoding call: the
//! library's `mlp_cte_sharding`. Large intermediate sizes split `I` (each
//! program projects half the columns for every token and the two exchange
//! halves of the down projection); everything else splits the tokens.

pub use kernel::*;

/// The sharding rule and the per-program constants.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_cte::mlp_cte_constants::MLPCTEConstants;
    use nki::prelude::*;

    /// Whether a call splits `I` over its programs (the library's choice):
    /// two programs, at most 256 tokens and no projection bias, or `I > 2048`
    /// a multiple of 256; never below `H = 7168` or `I = 1024`; always above
    /// `I = 4096`. [`cte_shards_on_intermediate`](crate::mlp::mlp_parameters::cte_shards_on_intermediate)
    /// is the same rule for the compile-time checks.
    #[nki_helper]
    pub fn shard_on_intermediate(t: i64, h: i64, i: i64, programs: i64, has_projection_bias: bool) -> bool {
        let mut inter = (programs == 2 && t <= 256 && !has_projection_bias) || (i > 2048 && i % 256 == 0);
        if h < 7168 || i < 1024 {
            inter = false;
        }
        if i > 4096 {
            inter = true;
        }
        programs > 1 && inter
    }

    /// This program's rows and columns of a `[T, H] x [H, I]` call, with the
    /// dtypes of [`MLPCTEConstants`].
    #[nki_helper]
    pub fn calculate_sharding(
        t: i64,
        h: i64,
        i: i64,
        has_projection_bias: bool,
        compute_dtype: Dtype,
        hidden_tile_dtype: Dtype,
        src_proj_quant_dtype: Dtype,
        down_proj_quant_dtype: Dtype,
    ) -> MLPCTEConstants {
        let programs = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        let program_id = if programs > 1 { nl::program_id(0) } else { 0 };
        let inter = shard_on_intermediate(t, h, i, programs, has_projection_bias);
        let (ip, tp) = if inter { (i / programs, t) } else { (i, t / programs) };
        MLPCTEConstants {
            compute_dtype,
            hidden_tile_dtype,
            src_proj_quant_dtype,
            down_proj_quant_dtype,
            h,
            i_total: i,
            i: ip,
            i_offset: if inter { program_id * ip } else { 0 },
            t: tp,
            t_offset: if inter { 0 } else { program_id * tp },
            programs,
            program_id,
            shard_on_intermediate: inter,
        }
    }
}
