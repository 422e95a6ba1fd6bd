//! The error type of the emulator and every library API.

use std::fmt;

/// What kind of rule an [`NkiError`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A hardware limit or ISA rule (partition count, PSUM bank width, memory space, ...).
    Constraint,
    /// Shapes that do not fit together.
    Shape,
    /// A dtype an op does not accept.
    Dtype,
    /// SBUF or PSUM capacity exhausted.
    Capacity,
    /// A view or access pattern outside its tensor.
    Bounds,
    /// A kernel `assert!` that failed.
    Assertion,
    /// A collective or barrier that could not complete.
    Collective,
    /// This program stopped because another program or rank failed first.
    Aborted,
    /// The launch ran past its deadline ([`Launch::timeout`](crate::Launch::timeout)).
    Timeout,
    /// An invalid argument to a library API (names the parameter, the value and the rule).
    Argument,
    /// Trace-time arithmetic failed (division by zero, overflow).
    Arithmetic,
    /// Reading or writing a file.
    Io,
    /// A read of on-chip bytes that another tile overwrote since this one wrote them
    /// (tiles placed at overlapping addresses).
    Hazard,
    /// A read of memory nothing wrote since it was allocated, under
    /// [`Launch::strict_uninit`](crate::Launch::strict_uninit) (else a warning).
    Undefined,
    /// Two programs of a launch accessed one shared-HBM element, at least one
    /// writing it, with no synchronisation ordering the accesses.
    Race,
}

/// Where in the emulated launch an error happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Origin {
    /// The rank (worker) in the ring.
    pub rank: usize,
    /// The program id inside the rank's LNC grid.
    pub program: usize,
}

/// An error from the emulator or a library API.
///
/// The message always names the rule that was broken and the offending value;
/// `op` and `location` say which kernel operation and which line of kernel source
/// raised it.
///
/// ```
/// use nki_core::{NkiError, ErrorKind};
/// let e = NkiError::constraint("nc_matmul", "moving free size 1024 exceeds 512").at("k.rs", 7);
/// assert_eq!(e.kind, ErrorKind::Constraint);
/// assert_eq!(e.to_string(), "nc_matmul (k.rs:7): moving free size 1024 exceeds 512");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NkiError {
    /// The kind of rule.
    pub kind: ErrorKind,
    /// The operation that failed (`"nc_matmul"`, `"nl.ndarray"`, ...), if any.
    pub op: Option<String>,
    /// Human-readable explanation: the rule, the value, the limit.
    pub message: String,
    /// Kernel source location (`file:line`) of the failing call, if known.
    pub location: Option<(String, u32)>,
    /// Which rank / program failed, for multi-program launches.
    pub origin: Option<Origin>,
}

/// Result alias used across nki-rs.
pub type Result<T, E = NkiError> = std::result::Result<T, E>;

impl NkiError {
    /// A new error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        NkiError { kind, op: None, message: message.into(), location: None, origin: None }
    }

    /// A hardware or ISA rule violated by `op`.
    pub fn constraint(op: &str, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Constraint, message).in_op(op)
    }

    /// Shapes that do not fit together in `op`.
    pub fn shape(op: &str, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Shape, message).in_op(op)
    }

    /// A dtype `op` does not accept.
    pub fn dtype(op: &str, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Dtype, message).in_op(op)
    }

    /// An invalid argument: names the parameter, the value and the rule.
    ///
    /// ```
    /// let e = nki_core::NkiError::argument("lnc", 3, "must be 1 or 2");
    /// assert_eq!(e.to_string(), "invalid lnc = 3: must be 1 or 2");
    /// ```
    pub fn argument(param: &str, value: impl fmt::Display, rule: &str) -> Self {
        Self::new(ErrorKind::Argument, format!("invalid {param} = {value}: {rule}"))
    }

    /// Sets the failing op (keeps an op already set by a deeper call).
    pub fn in_op(mut self, op: &str) -> Self {
        if self.op.is_none() {
            self.op = Some(op.to_string());
        }
        self
    }

    /// Sets the kernel source location (keeps the innermost one).
    pub fn at(mut self, file: &str, line: u32) -> Self {
        if self.location.is_none() {
            self.location = Some((file.to_string(), line));
        }
        self
    }

    /// Sets the failing rank / program (keeps the first one set).
    pub fn from_origin(mut self, origin: Origin) -> Self {
        if self.origin.is_none() {
            self.origin = Some(origin);
        }
        self
    }
}

impl fmt::Display for NkiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(o) = self.origin {
            write!(f, "[rank {} program {}] ", o.rank, o.program)?;
        }
        match (&self.op, &self.location) {
            (Some(op), Some((file, line))) => write!(f, "{op} ({file}:{line}): ")?,
            (Some(op), None) => write!(f, "{op}: ")?,
            (None, Some((file, line))) => write!(f, "{file}:{line}: ")?,
            (None, None) => {}
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for NkiError {}

impl From<std::io::Error> for NkiError {
    fn from(e: std::io::Error) -> Self {
        NkiError::new(ErrorKind::Io, e.to_string())
    }
}

/// Returns `Err(NkiError)` of the given kind from the enclosing function when `cond` fails.
#[macro_export]
#[doc(hidden)]
macro_rules! ensure {
    ($cond:expr, $ctor:ident($op:expr, $($fmt:tt)+)) => {
        if !$cond {
            return Err($crate::NkiError::$ctor($op, format!($($fmt)+)));
        }
    };
}
