//! Convolutions: the library's `experimental/conv` folder.

pub mod conv1d;
pub mod depthwise_conv1d;
