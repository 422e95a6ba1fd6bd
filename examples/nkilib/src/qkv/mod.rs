//! The library's `qkv` folder: the fused QKV projection before attention,
//! its decode-phase kernel `qkv_tkg`, its context-encoding kernel `qkv_cte`
//! (its phases in `qkv_cte/`) and the `qkv` entry that picks one by the
//! token count.

pub mod qkv;
pub mod qkv_cte;
pub mod qkv_tkg;
pub mod qkv_tkg_common;
pub mod qkv_tkg_mx_impl;
