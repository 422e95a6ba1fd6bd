//! Transformer blocks: the library's `experimental/transformer` folder.

pub mod attention_block_tkg;
