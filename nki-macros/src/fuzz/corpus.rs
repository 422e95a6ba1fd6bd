//! The fuzz corpus: every `#[nki_kernel]` / `#[nki_helper]` item of the
//! workspace's example kernels, library kernels, attention kernels and UI cases, read from disk
//! at test time, plus a pool of the tokens those files use.

use super::imports::{self, Answers};
use crate::ast::FnKind;
use proc_macro2::{Delimiter, TokenStream, TokenTree};
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// One annotated item, as the attribute macro receives it.
pub struct Entry {
    /// The file and the function's name, for reports.
    pub origin: String,
    /// Whether the file is a UI (compile-fail) case.
    pub ui: bool,
    pub kind: FnKind,
    pub attr: TokenStream,
    pub item: TokenStream,
}

pub struct Corpus {
    pub entries: Vec<Entry>,
    /// Every distinct leaf token (identifier, punctuation, literal) of the files.
    pub pool: Vec<TokenTree>,
}

/// The workspace root (the parent of this crate's manifest directory).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default()
}

fn rust_files(dir: &Path, recursive: bool, out: &mut Vec<PathBuf>) {
    let Ok(read) = std::fs::read_dir(dir) else { return };
    let mut paths: Vec<PathBuf> = read.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() && recursive {
            rust_files(&p, true, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// Reads the corpus; panics (failing the test) if a file cannot be read or lexed,
/// so a corpus that silently shrinks cannot pass.
pub fn load() -> Corpus {
    let root = workspace();
    let mut files = Vec::new();
    rust_files(&root.join("examples/kernels"), false, &mut files);
    rust_files(&root.join("examples/nkilib/src"), true, &mut files);
    rust_files(&root.join("nki-attention/src"), true, &mut files);
    rust_files(&root.join("tests/ui"), true, &mut files);
    let sources: Vec<(PathBuf, TokenStream)> = files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            let tokens = TokenStream::from_str(&text).unwrap_or_else(|e| panic!("lexing {}: {e}", path.display()));
            (path, tokens)
        })
        .collect();
    // A module answers imports once it is expanded, and may itself import:
    // expand until no new answer appears (one pass per level of imports).
    let mut answers = Answers::default();
    let mut expanded: Vec<Option<(TokenStream, bool)>> = vec![None; sources.len()];
    for _ in 0..=sources.len() {
        let mut new = false;
        for ((path, tokens), done) in sources.iter().zip(expanded.iter_mut()) {
            if done.as_ref().is_some_and(|(_, complete)| *complete) {
                continue;
            }
            let (out, complete) = expand_modules(tokens.clone(), path, &mut answers, &mut new);
            *done = Some((out, complete));
        }
        if !new {
            break;
        }
    }
    let mut corpus = Corpus { entries: Vec::new(), pool: Vec::new() };
    let mut seen = std::collections::HashSet::new();
    for ((path, _), out) in sources.iter().zip(expanded) {
        let Some((tokens, _)) = out else { continue };
        let label = path.strip_prefix(&root).unwrap_or(path).display().to_string();
        let ui = label.starts_with("tests/ui");
        collect(tokens, &label, ui, &mut corpus.entries, &mut |t| {
            if seen.insert(t.to_string()) {
                corpus.pool.push(t.clone());
            }
        });
    }
    corpus
}

fn is_nki_attr(group: &TokenTree) -> Option<(FnKind, TokenStream)> {
    let TokenTree::Group(g) = group else { return None };
    if g.delimiter() != Delimiter::Bracket {
        return None;
    }
    let mut it = g.stream().into_iter();
    let kind = match it.next() {
        Some(TokenTree::Ident(i)) if i == "nki_kernel" => FnKind::Kernel,
        Some(TokenTree::Ident(i)) if i == "nki_helper" => FnKind::Helper,
        _ => return None,
    };
    let args = match it.next() {
        Some(TokenTree::Group(a)) if a.delimiter() == Delimiter::Parenthesis => a.stream(),
        _ => TokenStream::new(),
    };
    Some((kind, args))
}

/// `tokens` (the file at `path`) with each top-level `#[nki_module] mod m { .. }`
/// expanded, so that its kernels and helpers carry the module's constants as
/// the compiler passes them; imports from other modules are answered from
/// `answers`, and this file's modules' answers are added to them (`new` set
/// when one is new). The flag says whether every import was answered.
fn expand_modules(tokens: TokenStream, path: &Path, answers: &mut Answers, new: &mut bool) -> (TokenStream, bool) {
    let toks: Vec<TokenTree> = tokens.into_iter().collect();
    let place = imports::module_path(path);
    let mut out: Vec<TokenTree> = Vec::new();
    let mut complete = true;
    let mut i = 0;
    while i < toks.len() {
        let module_args = match toks.get(i + 1) {
            Some(TokenTree::Group(g)) if is_hash(&toks[i]) && g.delimiter() == Delimiter::Bracket => module_attr_args(g.stream()),
            _ => None,
        };
        let Some(module_args) = module_args else {
            out.push(toks[i].clone());
            i += 1;
            continue;
        };
        let end = toks[i + 2..]
            .iter()
            .position(|t| matches!(t, TokenTree::Group(g) if g.delimiter() == Delimiter::Brace))
            .map_or(toks.len(), |p| i + 3 + p);
        let item: TokenStream = toks[i + 2..end].iter().cloned().collect();
        let name = toks[i + 2..end].windows(2).find_map(|w| match w {
            [TokenTree::Ident(m), TokenTree::Ident(name)] if m == "mod" => Some(name.to_string()),
            _ => None,
        });
        let mut expanded = crate::module::expand(module_args, item);
        if let Some(place) = &place {
            match imports::resolve(expanded.clone(), &place.krate, answers) {
                Some(resolved) => {
                    expanded = resolved;
                    *new |= answers.record(place, name.as_deref().unwrap_or_default(), &expanded);
                }
                None => complete = false,
            }
        }
        out.extend(expanded);
        i = end;
    }
    (out.into_iter().collect(), complete)
}

/// The arguments of an `nki_module` or `nki::nki_module` attribute (empty
/// without parentheses, e.g. `export = name` with them); `None` for any other
/// attribute.
fn module_attr_args(attr: TokenStream) -> Option<TokenStream> {
    let toks: Vec<TokenTree> = attr.into_iter().collect();
    let path_len = toks.iter().position(|t| matches!(t, TokenTree::Group(_))).unwrap_or(toks.len());
    let path: TokenStream = toks[..path_len].iter().cloned().collect();
    if !matches!(path.to_string().as_str(), "nki_module" | "nki :: nki_module") {
        return None;
    }
    match &toks[path_len..] {
        [] => Some(TokenStream::new()),
        [TokenTree::Group(g)] if g.delimiter() == Delimiter::Parenthesis => Some(g.stream()),
        _ => None,
    }
}

fn is_hash(t: &TokenTree) -> bool {
    matches!(t, TokenTree::Punct(p) if p.as_char() == '#')
}

/// Finds the annotated items in `tokens` (at any nesting, e.g. inside `mod`
/// blocks) and feeds every leaf token to `leaf`.
fn collect(tokens: TokenStream, label: &str, ui: bool, out: &mut Vec<Entry>, leaf: &mut dyn FnMut(&TokenTree)) {
    let toks: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, t) in toks.iter().enumerate() {
        match t {
            TokenTree::Group(g) => collect(g.stream(), label, ui, out, leaf),
            other => leaf(other),
        }
        let Some((kind, attr)) = (if is_hash(t) { toks.get(i + 1).and_then(is_nki_attr) } else { None }) else {
            continue;
        };
        // The outer attributes just before the macro's (doc comments) belong to the item.
        let mut first = i;
        while first >= 2
            && is_hash(&toks[first - 2])
            && matches!(&toks[first - 1], TokenTree::Group(g) if g.delimiter() == Delimiter::Bracket)
        {
            first -= 2;
        }
        let mut item: Vec<TokenTree> = toks[first..i].to_vec();
        for t in &toks[i + 2..] {
            item.push(t.clone());
            let ends = matches!(t, TokenTree::Group(g) if g.delimiter() == Delimiter::Brace)
                || matches!(t, TokenTree::Punct(p) if p.as_char() == ';');
            if ends {
                break;
            }
        }
        let name = item.windows(2).find_map(|w| match w {
            [TokenTree::Ident(f), TokenTree::Ident(name)] if f == "fn" => Some(name.to_string()),
            _ => None,
        });
        let origin = format!("{label}: {}", name.unwrap_or_else(|| "(not a function)".into()));
        out.push(Entry { origin, ui, kind, attr, item: item.into_iter().collect() });
    }
}
