//! How a command fails: a message on one line and the exit code that says whose
//! mistake it was.

/// A failed command.
#[derive(Debug)]
pub struct CliError {
    /// The exit code: 2 for bad input (usage), 1 for a failure while running.
    pub code: u8,
    /// What went wrong, naming the flag or parameter at fault.
    pub message: String,
}

/// The exit code of refused input, as clap uses it.
pub const USAGE: u8 = 2;

/// The exit code of a run that failed.
pub const FAILURE: u8 = 1;

impl CliError {
    /// Bad input: exit code 2.
    pub fn usage(message: impl Into<String>) -> Self {
        CliError { code: USAGE, message: message.into() }
    }

    /// A failure while running: exit code 1.
    pub fn failure(message: impl Into<String>) -> Self {
        CliError { code: FAILURE, message: message.into() }
    }
}

impl CliError {
    /// A kernel's or typed API's error: a usage error when the inputs caused it
    /// (an argument, shape, dtype or bounds rule, or the kernel's asserts), a
    /// failure otherwise.
    pub fn from_nki(e: &nki::NkiError) -> Self {
        if caused_by_inputs(e) { CliError::usage(e.to_string()) } else { CliError::failure(e.to_string()) }
    }
}

/// Whether the inputs caused `e`: an argument, shape, dtype or bounds rule, or
/// the kernel's asserts.
pub fn caused_by_inputs(e: &nki::NkiError) -> bool {
    use nki::ErrorKind::{Argument, Assertion, Bounds, Dtype, Shape};
    matches!(e.kind, Assertion | Argument | Shape | Dtype | Bounds)
}

/// The commands' plain errors are failures.
impl From<String> for CliError {
    fn from(message: String) -> Self {
        CliError::failure(message)
    }
}
