//! Convolutions: the library's `experimental/conv` folder.

pub mod depthwise_conv1d;
