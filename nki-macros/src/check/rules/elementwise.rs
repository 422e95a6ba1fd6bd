//! Rules of the element-wise instructions beyond the shared same-geometry
//! rule: `tensor_tensor`.

use crate::check::operands::two_inputs;
use crate::check::site::CallSite;
use crate::check::types::Ty;
use crate::diag::Diagnostics;

/// `tensor_tensor`: equal geometry of all three tiles; at most one input in PSUM.
pub fn tensor_tensor(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    two_inputs(diag, site, "data1", "data2")
}
