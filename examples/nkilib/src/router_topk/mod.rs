//! The Mixture-of-Experts router: the library's `router_topk` folder.

pub mod router_topk;
