//! `attention_cte`: prefill flash attention, as a DSL kernel ([`attention_cte`])
//! and a typed Rust API ([`CteConfig`], checked at compile time by
//! [`cte_config!`](crate::cte_config)).

pub mod attention_cte;
mod config;
mod run;

pub use config::{CteConfig, CteDims, CteRule};
pub use run::{CteInputs, CteOutputs, DTYPES, Prior};
