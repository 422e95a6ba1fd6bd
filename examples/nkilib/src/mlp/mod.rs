//! The library's `mlp` folder: the `mlp` kernel (a dispatcher on the token
//! count), its parameters and the decode-phase (`mlp_tkg`) implementation.

pub mod mlp;
pub mod mlp_parameters;

