//! File formats.
pub mod npy;
