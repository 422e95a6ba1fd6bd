//! Attention kernels written in the nki-rs DSL: `attention_cte` (prefill flash
//! attention) and the ring-attention kernels built on it.

extern crate nki_core as nki;

pub mod cte;
pub mod ring_fwd;

use nki::emit::FunctionInfo;

/// The kernels this crate registers for `nki emit`.
pub static KERNELS: &[&FunctionInfo] =
    &[&cte::attention_cte::attention_cte::INFO, &ring_fwd::ring_attention_fwd::ring_attention_spmd_fwd::INFO];
