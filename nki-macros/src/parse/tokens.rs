//! Bounds on a kernel's raw tokens, checked before syn parses them: syn recurses
//! once per bracket level, once per prefix operator (`- - x`) and once per
//! assignment of a chain (`a = b = c`), so all three are bounded first.

use crate::bounds::MAX_NESTING;
use proc_macro2::{Spacing, TokenStream, TokenTree, token_stream::IntoIter};

/// One bracket level being scanned.
struct Level {
    tokens: IntoIter,
    /// Punctuation tokens in a row.
    run: usize,
    /// Assignments (`=`, `+=`, ...) since the last `;`.
    assignments: usize,
    /// The previous token, if it was punctuation joined to the next.
    joint: Option<char>,
}

impl Level {
    fn new(tokens: TokenStream) -> Level {
        Level { tokens: tokens.into_iter(), run: 0, assignments: 0, joint: None }
    }
}

/// Reports the first bracket nested more than [`MAX_NESTING`] deep, run of more
/// than [`MAX_NESTING`] punctuation tokens in a row, or statement chaining more
/// than [`MAX_NESTING`] assignments. Walks the tokens with an explicit stack, so
/// it does not recurse itself.
pub fn check_token_nesting(tokens: &TokenStream) -> syn::Result<()> {
    let mut stack = vec![Level::new(tokens.clone())];
    while let Some(level) = stack.last_mut() {
        let Some(token) = level.tokens.next() else {
            stack.pop();
            continue;
        };
        let joint = level.joint.take();
        match token {
            TokenTree::Group(g) => {
                level.run = 0;
                if stack.len() > MAX_NESTING {
                    let msg = format!(
                        "brackets and blocks are nested more than {MAX_NESTING} deep here; kernels nest at most {MAX_NESTING} levels: bind inner parts to variables with `let`"
                    );
                    return Err(syn::Error::new(g.span(), msg));
                }
                stack.push(Level::new(g.stream()));
            }
            TokenTree::Punct(p) => {
                level.run += 1;
                if level.run > MAX_NESTING {
                    return Err(syn::Error::new(p.span(), format!("more than {MAX_NESTING} operators in a row")));
                }
                match p.as_char() {
                    ';' => level.assignments = 0,
                    // The `=` of an assignment or compound assignment, not of `==` or `!=`.
                    '=' if p.spacing() == Spacing::Alone && !matches!(joint, Some('=' | '!')) => {
                        level.assignments += 1;
                        if level.assignments > MAX_NESTING {
                            return Err(syn::Error::new(p.span(), format!("more than {MAX_NESTING} assignments in one statement")));
                        }
                    }
                    _ => {}
                }
                level.joint = (p.spacing() == Spacing::Joint).then_some(p.as_char());
            }
            TokenTree::Ident(_) | TokenTree::Literal(_) => level.run = 0,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn tokens(s: &str) -> TokenStream {
        TokenStream::from_str(s).unwrap()
    }

    fn nested(open: &str, close: &str, n: usize) -> TokenStream {
        tokens(&format!("{}x{}", open.repeat(n), close.repeat(n)))
    }

    #[test]
    fn brackets_operator_runs_and_assignment_chains_are_bounded() {
        assert!(check_token_nesting(&nested("(", ")", MAX_NESTING)).is_ok());
        assert!(check_token_nesting(&nested("[", "]", MAX_NESTING + 1)).is_err());
        assert!(check_token_nesting(&nested("{", "}", 100_000)).is_err());
        assert!(check_token_nesting(&nested("- ", "", MAX_NESTING)).is_ok());
        assert!(check_token_nesting(&nested("! ", "", MAX_NESTING + 1)).is_err());
        // Operators separated by operands do not form a run, nor do comparisons assign.
        assert!(check_token_nesting(&tokens(&"a + ".repeat(10_000))).is_ok());
        assert!(check_token_nesting(&tokens(&"a == b != ".repeat(10_000))).is_ok());
        let chain = |n: usize, op: &str| tokens(&format!("{}a", format!("a {op} ").repeat(n)));
        assert!(check_token_nesting(&chain(MAX_NESTING, "=")).is_ok());
        assert!(check_token_nesting(&chain(MAX_NESTING + 1, "=")).is_err());
        assert!(check_token_nesting(&chain(MAX_NESTING + 1, "+=")).is_err());
        // Each statement has its own count.
        assert!(check_token_nesting(&tokens(&"a = b; ".repeat(10_000))).is_ok());
    }
}
