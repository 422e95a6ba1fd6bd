//! Convolutions: the library's `experimental/conv` folder.
