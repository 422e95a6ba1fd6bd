//! What the library's kernels share: its `utils` folder.

pub mod common_types;
pub mod kernel_helpers;
pub mod mx_layout;
pub mod stream_shuffle_broadcast;
