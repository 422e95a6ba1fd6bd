use nki::attention::cte::{CteConfig, CteDims};
use nki::attention::cte_config;
use nki::Dtype;

const DIMS: CteDims = CteDims { batch: 8, batch_kv: 8, seqlen_q: 2048, seqlen_kv: 2048, head_dim: 128, seqlen_prior: 0 };
const DIMS_1000: CteDims = CteDims { seqlen_q: 1000, ..DIMS };

/// Rejected at compile time: global_cp_deg within [1, 32] (A15).
fn main() {
    let cfg = cte_config!(CteConfig::new().context_parallel(64));
    let _ = (cfg, Dtype::F32, DIMS_1000);
}
