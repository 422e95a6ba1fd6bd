//! The parser's state, which every part of the parser threads through: where
//! errors go, how deep the node being parsed is nested, and the module's bundle
//! and enum names.

use crate::ast::Spn;
use crate::bounds::MAX_NESTING;
use crate::diag::Diagnostics;

/// The parser's state: where errors go, and how deeply the node being parsed is
/// nested in blocks, expressions and types.
pub struct Parser<'d> {
    diag: &'d mut Diagnostics,
    depth: usize,
    /// Whether the current statement already reported nesting past the bound.
    too_deep_reported: bool,
    /// The parameter bundles a type may name.
    pub(super) objects: Vec<String>,
    /// The enums a type may name, with their members (a `match` covers them).
    pub(super) enums: Vec<(String, Vec<String>)>,
}

impl<'d> Parser<'d> {
    /// A parser reporting to `diag`, for code that may name the bundles `objects`
    /// and the enums `enums` (with their members).
    pub fn new(diag: &'d mut Diagnostics, objects: Vec<String>, enums: Vec<(String, Vec<String>)>) -> Self {
        Parser { diag, depth: 0, too_deep_reported: false, objects, enums }
    }

    /// Records an error underlining `span`.
    pub fn error(&mut self, span: impl Into<Spn>, msg: impl std::fmt::Display) {
        self.diag.error(span, msg);
    }

    /// Records an error from syn.
    pub fn push(&mut self, e: syn::Error) {
        self.diag.push(e);
    }

    /// Runs `parse` on a node one level deeper than the current one; past
    /// [`MAX_NESTING`] levels it reports the node (once per statement) and
    /// returns `None` without descending, so recursion stays bounded.
    pub fn nested<R>(&mut self, span: Spn, parse: impl FnOnce(&mut Self) -> R) -> Option<R> {
        if self.depth >= MAX_NESTING {
            if !self.too_deep_reported {
                self.too_deep_reported = true;
                self.error(
                    span,
                    format!(
                        "this is nested more than {MAX_NESTING} levels deep (counting enclosing blocks and expressions, and every operator of a chain such as `a + b + c`); bind inner parts to variables with `let`"
                    ),
                );
            }
            return None;
        }
        self.depth += 1;
        let r = parse(self);
        self.depth -= 1;
        Some(r)
    }

    /// Starts a statement: its nesting is reported on its own.
    pub fn start_statement(&mut self) {
        self.too_deep_reported = false;
    }
}
