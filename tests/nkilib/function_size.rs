//! The house rule for kernels written in the DSL: no `#[nki_kernel]` or
//! `#[nki_helper]` of the library ports (nki-attention, nkilib) or the
//! tutorials declares more than 12 parameters (a `#[spread]` group counts
//! once) or spans more than 150 lines. Long drop-in signatures are written as
//! parameter groups; long phases are split into helpers named like the
//! library's.

use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// The most parameters a DSL function declares.
const MAX_PARAMS: usize = 12;
/// The most lines a DSL function spans, attributes to closing brace.
const MAX_LINES: usize = 150;

/// The DSL functions of one file: name, declared parameters, lines.
#[derive(Default)]
struct DslFunctions(Vec<(String, usize, usize)>);

impl<'a> Visit<'a> for DslFunctions {
    fn visit_item_fn(&mut self, f: &'a syn::ItemFn) {
        let dsl = f.attrs.iter().any(|a| a.path().segments.last().is_some_and(|s| s.ident == "nki_kernel" || s.ident == "nki_helper"));
        if dsl {
            let first = f.attrs.first().map_or_else(|| f.sig.fn_token.span.start().line, |a| a.pound_token.span.start().line);
            let last = f.block.brace_token.span.close().end().line;
            self.0.push((f.sig.ident.to_string(), f.sig.inputs.len(), last + 1 - first));
        }
        syn::visit::visit_item_fn(self, f);
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_dsl_function_is_over_12_parameters_or_150_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["nki-attention/src", "examples/nkilib/src", "examples/kernels"] {
        rust_files(&root.join(dir), &mut files);
    }
    let (mut seen, mut broken) = (0, Vec::new());
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let parsed = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let mut found = DslFunctions::default();
        found.visit_file(&parsed);
        for (name, params, lines) in found.0 {
            seen += 1;
            if params > MAX_PARAMS || lines > MAX_LINES {
                broken.push(format!("{}: {name}: {params} parameters, {lines} lines", file.display()));
            }
        }
    }
    // The walk found the kernels (some six hundred functions today).
    assert!(seen > 500, "only {seen} DSL functions found under {}", root.display());
    assert!(broken.is_empty(), "over {MAX_PARAMS} parameters or {MAX_LINES} lines:\n{}", broken.join("\n"));
}
