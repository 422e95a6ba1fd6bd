//! `ring_attention_spmd_bwd`: the gradients of ring attention, as a DSL kernel
//! ([`ring_attention_bwd`]).

pub mod ring_attention_bwd;
