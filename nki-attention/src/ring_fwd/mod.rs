//! `ring_attention_spmd_fwd`: context-parallel attention over a ring of workers,
//! as a DSL kernel ([`ring_attention_fwd`]).

pub mod ring_attention_fwd;
