//! The fused decode-phase MoE block: the library's `moe_block` folder, the
//! entry and its rules (`moe_block_tkg`), the call's dimensions and the
//! layout change between its phases (`moe_block_tkg_utils`).

pub mod moe_block_tkg;
pub mod moe_block_tkg_utils;
