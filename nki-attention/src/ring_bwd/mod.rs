//! `ring_attention_spmd_bwd`: the gradients of ring attention, as a DSL kernel
//! ([`ring_attention_bwd`]) and a typed Rust API ([`RingBwdConfig`], checked at
//! compile time by [`ring_bwd_config!`](crate::ring_bwd_config)).

mod config;
pub mod ring_attention_bwd;
mod run;
mod sbuf;

pub(crate) use config::head_tiles;
pub use config::{RingBwdConfig, RingBwdRule};
pub use run::{DTYPES, RingBwdInputs, RingBwdOutputs};
