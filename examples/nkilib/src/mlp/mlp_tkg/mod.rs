//! The decode (token generation) path of `mlp`: the library's `mlp_tkg`
//! folder, one file per phase.

pub mod down_projection_mx_shard_h;
pub mod gate_up_projection_mx_shard_h;
pub mod mlp_tkg;
pub mod mlp_tkg_constants;
pub mod mlp_tkg_down_projection;
pub mod mlp_tkg_gate_up_projection;
pub mod mlp_tkg_mx;
pub mod mlp_tkg_utils;
pub mod projection_mx_constants;
