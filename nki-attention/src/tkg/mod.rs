//! `attention_tkg`: token-generation (decode) attention over a KV cache, as a DSL
//! kernel ([`attention_tkg`]) and a typed Rust API ([`TkgConfig`], checked at
//! compile time by [`tkg_config!`](crate::tkg_config)).

pub mod attention_tkg;
mod config;
mod run;

pub use config::{FA_TILE_SIZE, P_MAX, TkgConfig, TkgDims, TkgRule};
pub use run::{DTYPES, TkgInputs};
