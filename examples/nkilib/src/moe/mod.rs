//! The library's `moe` folder: the decode-phase mixture-of-experts kernel
//! (`moe_tkg/`).
//! The context-encoding (prefill) kernels are in `moe_cte/`.

pub mod moe_cte;
pub mod moe_tkg;
