//! Collectives: the library's `experimental/collectives` folder (ring
//! all-gathers over `nki.collectives`).

pub mod fg_allgather;
pub mod fgcc;
pub mod fgcc_matmul;
pub mod sb2sb_allgather;
pub mod topk_reduce;
