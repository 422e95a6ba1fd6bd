//! `attention_tkg`: token-generation (decode) attention over a KV cache, as a DSL
//! kernel ([`attention_tkg`]) and a typed Rust API ([`TkgConfig`], checked at
//! compile time by [`tkg_config!`](crate::tkg_config)).

pub mod attention_tkg;
mod config;
pub mod gen_mask_tkg;
mod run;

pub use attention_tkg::{AttnTKGConfig, FA_TILE_SIZE, MM1_KEYS, P_MAX, PV_GROUP_KEYS};
pub use config::{TkgConfig, TkgDims, TkgRule};
pub use run::{DTYPES, TkgInputs};
