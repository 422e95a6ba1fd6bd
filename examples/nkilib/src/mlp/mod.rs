//! The library's `mlp` folder: the `mlp` kernel (a dispatcher on the token
//! count), its decode-phase (`mlp_tkg/`) and context-encoding (`mlp_cte/`)
//! paths, and its parameters and rules.

pub mod mlp;
pub mod mlp_cte;
pub mod mlp_parameters;
pub mod mlp_tkg;
