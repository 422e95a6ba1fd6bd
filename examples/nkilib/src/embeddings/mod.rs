//! Position embeddings: the library's `embeddings` folder.

pub mod rope;
pub mod rope_hf;
