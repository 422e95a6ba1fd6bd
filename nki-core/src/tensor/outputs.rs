//! A kernel's outputs when their number depends on its arguments.

use super::Tensor;

/// The tensors a kernel returns: one, or several (a tuple in the emitted Python).
///
/// ```
/// use nki_core::{Dtype, Outputs, Tensor};
/// let o = Outputs(vec![Tensor::zeros(&[2], Dtype::F32).unwrap()]);
/// assert_eq!(o.len(), 1);
/// assert_eq!(o.get(0).map(Tensor::shape), Some(&[2usize][..]));
/// ```
#[derive(Clone, Debug)]
pub struct Outputs(pub Vec<Tensor>);

impl Outputs {
    /// Number of outputs.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none (kernels always return at least one).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Output `i`, if present.
    pub fn get(&self, i: usize) -> Option<&Tensor> {
        self.0.get(i)
    }

    /// The outputs as a vector.
    pub fn into_vec(self) -> Vec<Tensor> {
        self.0
    }
}
