//! File formats.
pub mod json;
pub mod npy;
