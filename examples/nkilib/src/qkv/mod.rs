//! The library's `qkv` folder: the fused QKV projection before attention,
//! its decode-phase kernel `qkv_tkg` and the `qkv` entry that picks a kernel
//! by the token count. Both kernels are in `qkv_tkg` (the library keeps the
//! entry in `qkv.py`); the two share their rules and helpers.

pub mod qkv_tkg;
