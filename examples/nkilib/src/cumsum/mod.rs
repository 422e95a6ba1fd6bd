//! Scans: the library's `cumsum` folder.

pub mod cumsum;
