//! Losses: the library's `experimental/loss` folder.

pub mod cross_entropy;
pub mod validation;
