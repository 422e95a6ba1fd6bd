//! The decode (token generation) MoE kernel: the library's `moe_tkg` folder,
//! the entry and its rules, the all-expert and selective-expert paths, the
//! affinity masking and the per-expert tensor selection.

pub mod all_expert_impl;
pub mod all_expert_mx_dynamic;
pub mod all_expert_mx_impl;
pub mod moe_tkg;
pub mod moe_tkg_affinity_masking;
pub mod moe_tkg_utils;
pub mod selective_expert_impl;
pub mod selective_expert_mx_impl;
