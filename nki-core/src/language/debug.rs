//! `nl.device_print`: a tile's values printed while the kernel runs.

use crate::emulator::Ctx;
use crate::{Result, Tensor};
use std::io::Write;

/// `nl.device_print(print_prefix, tensor)`: writes `print_prefix`, the kernel
/// source line of the call, the rank and program, the tensor's description and
/// its values (row-major, one partition per line) to standard error.
#[track_caller]
pub fn device_print(ctx: &Ctx, print_prefix: &str, tensor: &Tensor) -> Result<()> {
    const PY: &str = "nl.device_print";
    let at = std::panic::Location::caller();
    ctx.begin_op(PY)?;
    tensor.check_bounds(PY)?;
    let values = tensor.to_f32_vec();
    let row = tensor.shape()[1..].iter().product::<usize>().max(1);
    let mut text =
        format!("{print_prefix} [{}:{} rank {} program {}] {}:\n", at.file(), at.line(), ctx.rank(), ctx.program_id(), tensor.describe());
    for r in values.chunks(row) {
        let cells: Vec<String> = r.iter().map(|v| v.to_string()).collect();
        text.push_str(&format!("[{}]\n", cells.join(" ")));
    }
    // A closed standard error loses the print, not the kernel.
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
    Ok(())
}
