//! Tensors several topics' tests view.

use nki_core::{Dtype, Tensor};

/// A float32 tensor of `shape` holding 0, 1, 2, … in row-major order, so a
/// view's values name the elements it reaches.
pub fn arange(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|i| i as f32).collect();
    Tensor::from_f32(shape, &v, Dtype::F32).unwrap()
}
