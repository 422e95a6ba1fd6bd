//! The emulator's side of the device loops (`nl.dynamic_range`, `nl.fori_loop`,
//! `nl.while_loop`), which the macro writes as Rust loops whose index is an
//! [`crate::isa::Register`], as on the device.

use crate::{Ctx, NkiError, Result};

/// The most iterations an `nl.while_loop` runs in the emulator. A device loop whose
/// condition register stays nonzero would spin forever; past this bound the launch
/// fails naming the kernel line instead.
pub const WHILE_LOOP_MAX_ITERATIONS: u64 = 1 << 20;

/// Counts one iteration of an `nl.while_loop` (`count` is the loop's counter),
/// failing past [`WHILE_LOOP_MAX_ITERATIONS`] and when the launch must stop.
#[doc(hidden)]
pub fn while_iteration(ctx: &Ctx, count: &mut u64) -> Result<()> {
    *count += 1;
    if *count > WHILE_LOOP_MAX_ITERATIONS {
        return Err(NkiError::constraint(
            "nl.while_loop",
            format!(
                "the condition register was still nonzero after {WHILE_LOOP_MAX_ITERATIONS} iterations (the emulator's bound on a device loop); the body must eventually return a zero register"
            ),
        ));
    }
    ctx.loop_iteration()
}
