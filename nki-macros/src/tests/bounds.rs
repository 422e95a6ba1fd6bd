//! The bounds hold end to end: kernels nested as deeply as the macro accepts
//! expand without errors on a small stack, into Rust and Python within their
//! limits, and one level more is a nesting error at the user's tokens.

use crate::ast::FnKind;
use crate::bounds::{MAX_EMITTED_DEPTH, MAX_NESTING, group_depth};
use crate::expand::expand;
use proc_macro2::{TokenStream, TokenTree};
use std::str::FromStr;

/// The stack the expansions run on here: a quarter of the 8 MiB that rustc
/// gives the thread running a proc macro (the deepest kernels need about 1.3 MiB,
/// mostly syn's recursion over nested brackets, with or without optimisations).
const SMALL_STACK: usize = 2 << 20;

/// CPython's parser limits: nested brackets, and indentation levels.
const PYTHON_MAX_BRACKETS: usize = 200;
const PYTHON_MAX_INDENT: usize = 100;

/// A kernel with one construct nested `n` deep.
fn nested(construct: &str, n: usize) -> String {
    let body = match construct {
        "sum chain" => format!("-> i64 {{ {} }}", vec!["a"; n].join(" + ")),
        "right-nested difference" => format!("-> i64 {{ {}a{} }}", "a - (".repeat(n), ")".repeat(n)),
        "method chain" => format!("-> i64 {{ a{} }}", ".div_ceil(3)".repeat(n)),
        "float methods" => format!("-> f64 {{ x{} }}", ".powf(x).min(1.0)".repeat(n / 2)),
        "casts" => format!("-> f64 {{ {}a{} }}", "(x + (".repeat(n / 2), " as f64))".repeat(n / 2)),
        "negations" => format!("-> i64 {{ {}a }}", "- ".repeat(n)),
        "calls" => format!("-> i64 {{ let r: i64 = {}a{}; r }}", "helper(".repeat(n), ")".repeat(n)),
        "lists" => format!("{{ let l = {}a{}; }}", "[".repeat(n), "]".repeat(n)),
        "options" => format!("{{ let o = {}a{}; }}", "Some(".repeat(n), ")".repeat(n)),
        "if values" => format!("-> i64 {{ let v = {}a{}; v }}", "if c { a } else { ".repeat(n), " }".repeat(n)),
        "loops" => {
            let heads: String = (0..n).map(|i| format!("for i{i} in 0..a {{ ")).collect();
            format!("{{ {heads} assert!(a > 0); {} }}", "}".repeat(n))
        }
        "ifs" => format!("{{ {} assert!(a > 0); {} }}", "if c { ".repeat(n), "}".repeat(n)),
        other => unreachable!("no construct {other}"),
    };
    format!("fn k(a: i64, x: f64, c: bool, t: Sbuf) {body}")
}

const CONSTRUCTS: &[&str] = &[
    "sum chain",
    "right-nested difference",
    "method chain",
    "float methods",
    "casts",
    "negations",
    "calls",
    "lists",
    "options",
    "if values",
    "loops",
    "ifs",
];

fn expansion(src: &str) -> TokenStream {
    expand(FnKind::Kernel, TokenStream::new(), TokenStream::from_str(src).expect("test kernels lex"))
}

/// The string literals following `marker` in `ts` (at any depth), read token by
/// token: parsing the expansion with syn would recurse through its nesting.
fn strings_after(ts: &TokenStream, marker: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![ts.clone().into_iter()];
    let mut armed = false;
    while let Some(level) = stack.last_mut() {
        match level.next() {
            None => {
                stack.pop();
            }
            Some(TokenTree::Group(g)) => stack.push(g.stream().into_iter()),
            Some(TokenTree::Ident(i)) => armed = i == marker || armed,
            Some(TokenTree::Literal(l)) if armed => {
                armed = false;
                out.extend(syn::parse_str::<syn::LitStr>(&l.to_string()).ok().map(|s| s.value()));
            }
            Some(_) => {}
        }
    }
    out
}

/// The messages of the `compile_error!`s of an expansion.
fn errors(out: &TokenStream) -> Vec<String> {
    strings_after(out, "compile_error")
}

/// The emitted `NKI_SOURCE` of a clean expansion.
fn python(out: &TokenStream) -> String {
    strings_after(out, "NKI_SOURCE").into_iter().next().expect("a clean expansion has NKI_SOURCE")
}

/// The deepest bracket nesting and indentation level of Python source without strings.
fn python_depths(py: &str) -> (usize, usize) {
    let (mut depth, mut max) = (0usize, 0usize);
    for c in py.chars() {
        match c {
            '(' | '[' | '{' => {
                depth += 1;
                max = max.max(depth);
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    let indent = py.lines().map(|l| (l.len() - l.trim_start().len()) / 4).max().unwrap_or(0);
    (max, indent)
}

fn on_small_stack(test: fn()) {
    let t = std::thread::Builder::new().stack_size(SMALL_STACK).spawn(test).expect("a test thread");
    if let Err(panic) = t.join() {
        std::panic::resume_unwind(panic);
    }
}

#[test]
fn the_deepest_accepted_kernels_expand_within_every_limit() {
    on_small_stack(|| {
        for construct in CONSTRUCTS {
            // The deepest nesting accepted: the next one reports the bound.
            let deepest = (1..=2 * MAX_NESTING)
                .take_while(|&n| !errors(&expansion(&nested(construct, n))).iter().any(|e| e.contains("nested more than")))
                .last()
                .unwrap_or(0);
            assert!(deepest + 8 >= MAX_NESTING && deepest < MAX_NESTING, "{construct}: {deepest} levels accepted");
            let out = expansion(&nested(construct, deepest));
            assert_eq!(errors(&out), Vec::<String>::new(), "{construct} nested {deepest} deep");
            let depth = group_depth(&out);
            assert!(depth <= MAX_EMITTED_DEPTH, "{construct}: the expansion nests {depth} groups deep");
            let (brackets, indent) = python_depths(&python(&out));
            assert!(
                brackets < PYTHON_MAX_BRACKETS && indent < PYTHON_MAX_INDENT,
                "{construct}: Python nests {brackets} brackets, {indent} indents"
            );
        }
    });
}

#[test]
fn nesting_past_the_bound_is_one_error_at_the_users_tokens() {
    on_small_stack(|| {
        for construct in CONSTRUCTS {
            let errs = errors(&expansion(&nested(construct, 2000)));
            assert_eq!(errs.len(), 1, "{construct}: {errs:?}");
            assert!(errs[0].contains(&format!("more than {MAX_NESTING}")), "{construct}: {errs:?}");
        }
    });
}
