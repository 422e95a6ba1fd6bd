//! The library's `qkv` folder: the fused QKV projection before attention,
//! its decode-phase kernel `qkv_tkg` and the `qkv` entry that picks a kernel
//! by the token count.

pub mod qkv;
pub mod qkv_tkg;
