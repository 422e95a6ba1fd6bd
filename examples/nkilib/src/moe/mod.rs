//! The library's `moe` folder: the decode-phase mixture-of-experts kernel
//! (`moe_tkg/`).

pub mod moe_tkg;
