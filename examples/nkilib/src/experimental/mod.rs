//! The library's experimental kernels: its `experimental` folder (losses and
//! convolutions).

pub mod conv;
pub mod loss;
