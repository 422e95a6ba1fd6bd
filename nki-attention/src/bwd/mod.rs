//! `attention_bwd`: the gradients of flash attention, as a DSL kernel
//! ([`attention_bwd`](attention_bwd::attention_bwd)) and a typed Rust API
//! ([`BwdConfig`], checked at compile time by [`bwd_config!`](crate::bwd_config)).

pub mod attention_bwd;
mod config;
mod run;

pub use config::{BwdConfig, BwdDims, BwdRule};
pub use run::{BwdInputs, BwdOutputs, DTYPES};
