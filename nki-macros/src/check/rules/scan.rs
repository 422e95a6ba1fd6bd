//! Rules of `tensor_tensor_scan`.

use crate::check::operands::two_inputs;
use crate::check::site::CallSite;
use crate::check::types::Ty;
use crate::diag::Diagnostics;

/// `tensor_tensor_scan`: as `tensor_tensor`, for `data0` and `data1`.
pub fn tensor_tensor_scan(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    two_inputs(diag, site, "data0", "data1")
}
