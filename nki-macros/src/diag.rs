//! Error accumulation: every pass records spanned errors and keeps going, so a user
//! sees all of them in one compile.

use crate::ast::Spn;
pub use nki_spec::did_you_mean;
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
