//! The library's experimental kernels: its `experimental` folder (losses and
//! convolutions).

pub mod collectives;
pub mod conv;
pub mod loss;
pub mod moe;
pub mod transformer;
