//! Imports between the corpus's `#[nki_module]`s, resolved as rustc would:
//! a module that imports from another expands to a call of that module's
//! `__nki_module_items!`, which only rustc can expand. The corpus plays that
//! part: it keeps each module's answer (the items its `__nki_module_items!`
//! hands to `__nki_import!`) under the paths other modules import it by, and
//! runs the import steps until the importing module is expanded.

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use quote::quote;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The most import steps one module's expansion may take (one per module it imports from).
const MAX_STEPS: usize = 64;

/// Each module's answer, by its crate's `src` folder and its path in the crate (`crate::a::b`).
#[derive(Default)]
pub struct Answers {
    by_path: HashMap<(PathBuf, String), TokenStream>,
}

impl Answers {
    /// Records the answer in `expanded` (a module's expansion) under the file's
    /// module path and the inline module's (`crate::a::b` and `crate::a::b::m`,
    /// since the file re-exports its module); whether it is new.
    pub fn record(&mut self, file: &ModulePath, inline: &str, expanded: &TokenStream) -> bool {
        let Some(bare) = answer_in(expanded) else { return false };
        let mut new = false;
        for path in [file.path.clone(), format!("{}::{inline}", file.path)] {
            new |= self.by_path.insert((file.krate.clone(), path), bare.clone()).is_none();
        }
        new
    }
}

/// Where a file's items live: its crate's `src` folder and its module path.
#[derive(Clone)]
pub struct ModulePath {
    pub krate: PathBuf,
    path: String,
}

/// The module path of the file at `file`, if it is inside a crate's `src`.
pub fn module_path(file: &Path) -> Option<ModulePath> {
    let src = file
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "src") && a.parent().is_some_and(|p| p.join("Cargo.toml").is_file()))?;
    let rel = file.strip_prefix(src).ok()?.with_extension("");
    let mut segs: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
    if segs.last().is_some_and(|s| s == "mod" || s == "lib" || s == "main") {
        segs.pop();
    }
    let path = std::iter::once("crate".to_string()).chain(segs).collect::<Vec<_>>().join("::");
    Some(ModulePath { krate: src.to_path_buf(), path })
}

/// The items a module's `__nki_module_items!` answers with:
/// `__nki_import! { { ITEMS } .. }` anywhere in its expansion.
fn answer_in(tokens: &TokenStream) -> Option<TokenStream> {
    let toks: Vec<TokenTree> = tokens.clone().into_iter().collect();
    for (i, t) in toks.iter().enumerate() {
        if let TokenTree::Group(g) = t
            && let Some(found) = answer_in(&g.stream())
        {
            return Some(found);
        }
        let TokenTree::Ident(id) = t else { continue };
        if id != "__nki_import" || !is_punct(toks.get(i + 1), '!') {
            continue;
        }
        if let Some(TokenTree::Group(call)) = toks.get(i + 2)
            && let Some(TokenTree::Group(items)) = call.stream().into_iter().next()
            && items.delimiter() == Delimiter::Brace
        {
            return Some(items.stream());
        }
    }
    None
}

fn is_punct(t: Option<&TokenTree>, c: char) -> bool {
    matches!(t, Some(TokenTree::Punct(p)) if p.as_char() == c)
}

/// `expanded` with its `path::__nki_module_items! { .. }` call (at most one,
/// at the top level) answered step by step from `answers`; `None` while a
/// module it asks has not answered yet.
pub fn resolve(mut expanded: TokenStream, krate: &Path, answers: &Answers) -> Option<TokenStream> {
    for _ in 0..MAX_STEPS {
        let toks: Vec<TokenTree> = expanded.clone().into_iter().collect();
        let Some(at) = toks.iter().position(|t| matches!(t, TokenTree::Ident(i) if i == "__nki_module_items")) else {
            return Some(expanded);
        };
        let Some(TokenTree::Group(args)) = toks.get(at + 2).filter(|_| is_punct(toks.get(at + 1), '!')) else {
            return Some(expanded);
        };
        // The path before `::__nki_module_items`: idents joined by `::`.
        let mut start = at;
        let mut segs = Vec::new();
        while start >= 3 && is_punct(toks.get(start - 1), ':') && is_punct(toks.get(start - 2), ':') {
            let TokenTree::Ident(seg) = &toks[start - 3] else { break };
            segs.push(seg.to_string());
            start -= 3;
        }
        segs.reverse();
        let bare = answers.by_path.get(&(krate.to_path_buf(), segs.join("::")))?;
        let args = args.stream();
        let step = crate::module::import_step(quote!({ #bare } #args));
        expanded = toks[..start].iter().cloned().chain(step).chain(toks[at + 3..].iter().cloned()).collect();
    }
    Some(expanded)
}
