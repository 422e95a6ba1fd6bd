//! Error accumulation: every pass records spanned errors and keeps going, so a user
//! sees all of them in one compile.

use crate::ast::Spn;
use proc_macro2::TokenStream;
use quote::quote_spanned;

/// Collected errors.
#[derive(Default)]
pub struct Diagnostics {
    errors: Vec<syn::Error>,
}

impl Diagnostics {
    /// Records an error underlining `span`.
    pub fn error(&mut self, span: impl Into<Spn>, msg: impl std::fmt::Display) {
        let Spn { start, end } = span.into();
        let (first, last) = (quote_spanned!(start=> a), quote_spanned!(end=> b));
        self.errors.push(syn::Error::new_spanned(quote::quote!(#first #last), msg));
    }

    /// Records an error from syn.
    pub fn push(&mut self, e: syn::Error) {
        self.errors.extend(e);
    }

    /// Number of errors recorded so far.
    pub fn count(&self) -> usize {
        self.errors.len()
    }

    /// The messages recorded so far (for tests).
    #[cfg(test)]
    pub fn messages(&self) -> Vec<String> {
        self.errors.iter().map(ToString::to_string).collect()
    }

    /// Whether any error was recorded.
    pub fn has_errors(&self) -> bool {
        !self.errors.is_empty()
    }

    /// The errors as `compile_error!` invocations.
    pub fn to_tokens(&self) -> TokenStream {
        self.errors.iter().map(syn::Error::to_compile_error).collect()
    }
}

/// The closest candidate to `name` by edit distance, if it is close enough to be a
/// likely typo.
pub fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (name.len() / 3).max(1);
    candidates.into_iter().map(|c| (edit_distance(name, c), c)).filter(|&(d, _)| d <= limit).min_by_key(|&(d, _)| d).map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        assert_eq!(did_you_mean("nc_matmull", ["nc_matmul", "nc_transpose"]), Some("nc_matmul"));
        assert_eq!(did_you_mean("zzz", ["nc_matmul"]), None);
    }
}
