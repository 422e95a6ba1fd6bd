//! Top-k selection over long rows: the library's `topk` folder.

pub mod rotational_topk;
