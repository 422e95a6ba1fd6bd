//! The library's `mlp` folder: the `mlp` kernel (a dispatcher on the token
//! count), its decode-phase (`mlp_tkg`) helpers in the same module, and its rules.

pub mod mlp;
pub mod mlp_parameters;
