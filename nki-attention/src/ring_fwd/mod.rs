//! `ring_attention_spmd_fwd`: context-parallel attention over a ring of workers,
//! as a DSL kernel ([`ring_attention_fwd`]) and a typed Rust API
//! ([`RingFwdConfig`], checked at compile time by
//! [`ring_fwd_config!`](crate::ring_fwd_config)).

mod config;
pub mod ring_attention_fwd;
mod run;

pub use crate::ring_config::{RingDims, RingFeatures, RingRule};
pub use config::{RingFwdConfig, RingFwdRule};
pub use run::{DTYPES, Queries, RingFwdInputs, RingFwdOutputs};
