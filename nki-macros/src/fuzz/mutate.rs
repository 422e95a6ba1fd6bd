//! Token-tree mutations of a kernel: deletions, duplications, swaps, extreme
//! literals and shapes, removed/duplicated/swapped arguments and statements,
//! deeper nesting and long operator chains. Each keeps most of the kernel
//! intact, so the result usually still parses and reaches the checker and the
//! emitters.

use super::rng::Rng;
use proc_macro2::{Delimiter, Group, Spacing, TokenStream, TokenTree};
use std::str::FromStr;

/// A token tree with its groups opened up for editing.
#[derive(Clone)]
pub enum Node {
    Leaf(TokenTree),
    Group(Delimiter, Vec<Node>),
}

pub fn to_nodes(ts: TokenStream) -> Vec<Node> {
    ts.into_iter()
        .map(|t| match t {
            TokenTree::Group(g) => Node::Group(g.delimiter(), to_nodes(g.stream())),
            leaf => Node::Leaf(leaf),
        })
        .collect()
}

pub fn to_stream(nodes: &[Node]) -> TokenStream {
    nodes
        .iter()
        .map(|n| match n {
            Node::Leaf(t) => t.clone(),
            Node::Group(d, inner) => TokenTree::Group(Group::new(*d, to_stream(inner))),
        })
        .collect()
}

/// Source text parsed into nodes (the fragments below are all valid token streams).
pub fn nodes(src: &str) -> Vec<Node> {
    to_nodes(TokenStream::from_str(src).unwrap_or_default())
}

/// Literal replacements: the integer and float extremes, zero, minus one, and
/// values that do not fit.
const LITERALS: &[&str] = &[
    "9223372036854775807",
    "(-9223372036854775807 - 1)",
    "-9223372036854775807",
    "9223372036854775808",
    "0",
    "-1",
    "1",
    "2",
    "128",
    "129",
    "512",
    "2147483648",
    "4294967296",
    "100_000_000",
    "1099511627776",
    "(1 << 40)",
    "1e400",
    "-1e400",
    "1e-400",
    "0.0",
    "-0.0",
    "1.5",
    "f32::MAX",
    "f32::MIN",
    "\"\"",
    "true",
    "None",
];

/// Shape replacements for a bracketed list.
const SHAPES: &[&str] = &[
    "128, 9223372036854775807",
    "9223372036854775807, 9223372036854775807",
    "128, 4611686018427387904, 4",
    "128; 512",
    "0; 1099511627776",
    "0; 100_000_000",
    "128, 512, 512, 512",
    "-1, 128",
    "0, 0",
    "128, 0",
    "",
    "128",
    "(-9223372036854775807 - 1), 2",
    "9223372036854775807..9223372036854775807, ..",
    "(-9223372036854775807 - 1)..9223372036854775807",
    "nl::ds(9223372036854775807, 9223372036854775807), ..",
];

/// Wrappers for nesting: `$` stands for the wrapped tokens.
const WRAPPERS: &[&str] = &[
    "($)",
    "Some($)",
    "[$]",
    "($, $)",
    "$.abs()",
    "$.powf()",
    "$.powi(9223372036854775807)",
    "$.min()",
    "$.max($, $)",
    "$.pow(9223372036854775807)",
    "$.div_ceil(0)",
    "$.unwrap_or($)",
    "$.len()",
    "$.shape()",
    "$.shape()[9223372036854775807]",
    "$.0",
    "$.9223372036854775807",
    "$.reshape([128, 9223372036854775807])",
    "$.broadcast(1, 9223372036854775807)",
    "$.slice(1, (-9223372036854775807 - 1), 9223372036854775807)",
    "$.slice(1, 0, 9223372036854775807, 9223372036854775807)",
    "$.ap([[9223372036854775807, 9223372036854775807]])",
    "$.select(1, 9223372036854775807)",
    "$.expand_dim(9223372036854775807)",
    "nl::ds($, $)",
    "-$",
    "!$",
    "$ as f64",
    "$ as i64",
    "if true { $ } else { $ }",
    "[$; 9223372036854775807]",
    "[$; 64]",
    "$ / -1",
    "$ % -1",
    "$ * 9223372036854775807",
    "$ - 9223372036854775807",
    "$ / 0",
];

/// One operator tokens for chains and replacements.
const OPERATORS: &[&str] = &["+", "-", "*", "/", "%", "==", "<", "&&", "||", "..", "<<", "=", ";", ",", ".", "!", "?", "&", "|"];

/// The most tokens a nesting mutation grows a part to.
const MAX_TOKENS: usize = 20_000;

/// The number of tokens in `nodes`, groups included.
pub fn size(nodes: &[Node]) -> usize {
    nodes.iter().map(|n| if let Node::Group(_, inner) = n { 1 + size(inner) } else { 1 }).sum()
}

/// A path to a group: child indices from the top level.
type Path = Vec<usize>;

fn groups(nodes: &[Node], here: &mut Path, out: &mut Vec<Path>) {
    for (i, n) in nodes.iter().enumerate() {
        if let Node::Group(_, inner) = n {
            here.push(i);
            out.push(here.clone());
            groups(inner, here, out);
            here.pop();
        }
    }
}

fn seq_at<'a>(nodes: &'a mut Vec<Node>, path: &[usize]) -> Option<&'a mut Vec<Node>> {
    match path.split_first() {
        None => Some(nodes),
        Some((&i, rest)) => match nodes.get_mut(i) {
            Some(Node::Group(_, inner)) => seq_at(inner, rest),
            _ => None,
        },
    }
}

fn delimiter_at(nodes: &[Node], path: &[usize]) -> Option<Delimiter> {
    let (last, parents) = path.split_last()?;
    let mut cur = nodes;
    for &i in parents {
        match cur.get(i) {
            Some(Node::Group(_, inner)) => cur = inner,
            _ => return None,
        }
    }
    match cur.get(*last) {
        Some(Node::Group(d, _)) => Some(*d),
        _ => None,
    }
}

/// Splits a sequence at top-level `sep` punctuation.
fn split(seq: &[Node], sep: char) -> Vec<Vec<Node>> {
    let mut parts = vec![Vec::new()];
    for n in seq {
        match n {
            Node::Leaf(TokenTree::Punct(p)) if p.as_char() == sep && p.spacing() == Spacing::Alone => parts.push(Vec::new()),
            other => parts.last_mut().map_or((), |p| p.push(other.clone())),
        }
    }
    parts
}

fn join(parts: &[Vec<Node>], sep: char) -> Vec<Node> {
    let mut out = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            out.push(Node::Leaf(TokenTree::Punct(proc_macro2::Punct::new(sep, Spacing::Alone))));
        }
        out.extend(p.iter().cloned());
    }
    out
}

/// `template` with every `$` replaced by `inner`.
pub fn fill(template: &str, inner: &[Node]) -> Vec<Node> {
    let marked = template.replace('$', " __FUZZ_HOLE__ ");
    substitute(nodes(&marked), inner)
}

fn substitute(nodes: Vec<Node>, inner: &[Node]) -> Vec<Node> {
    let mut out = Vec::new();
    for n in nodes {
        match n {
            Node::Leaf(TokenTree::Ident(i)) if i == "__FUZZ_HOLE__" => out.extend(inner.iter().cloned()),
            Node::Group(d, g) => out.push(Node::Group(d, substitute(g, inner))),
            leaf => out.push(leaf),
        }
    }
    out
}

/// The kinds of mutation, with their weights: mostly ones that keep the kernel
/// parseable (so that it reaches the checker and the emitters), some that do not.
#[derive(Clone, Copy)]
enum Kind {
    Delete,
    Duplicate,
    Swap,
    Literal,
    Shape,
    Parts,
    Nest,
    Chain,
    Ident,
    Insert,
    Operator,
}

const KINDS: &[(Kind, usize)] = &[
    (Kind::Delete, 1),
    (Kind::Duplicate, 1),
    (Kind::Swap, 1),
    (Kind::Literal, 5),
    (Kind::Shape, 3),
    (Kind::Parts, 4),
    (Kind::Nest, 4),
    (Kind::Chain, 1),
    (Kind::Ident, 2),
    (Kind::Insert, 1),
    (Kind::Operator, 1),
];

fn pick_kind(rng: &mut Rng) -> Kind {
    let total: usize = KINDS.iter().map(|k| k.1).sum();
    let mut x = rng.below(total);
    for &(kind, w) in KINDS {
        if x < w {
            return kind;
        }
        x -= w;
    }
    Kind::Literal
}

/// The positions `(group path, index)` of the leaves matching `want`, in the whole tree.
fn leaves(nodes: &[Node], here: &mut Path, want: &dyn Fn(&TokenTree) -> bool, out: &mut Vec<(Path, usize)>) {
    for (i, n) in nodes.iter().enumerate() {
        match n {
            Node::Leaf(t) if want(t) => out.push((here.clone(), i)),
            Node::Leaf(_) => {}
            Node::Group(_, inner) => {
                here.push(i);
                leaves(inner, here, want, out);
                here.pop();
            }
        }
    }
}

/// Replaces a random leaf matching `want` with `with`.
fn replace_leaf(tree: &mut Vec<Node>, rng: &mut Rng, want: &dyn Fn(&TokenTree) -> bool, with: Vec<Node>) {
    let mut found = Vec::new();
    leaves(tree, &mut Vec::new(), want, &mut found);
    if let Some((path, i)) = rng.pick(&found).cloned()
        && let Some(seq) = seq_at(tree, &path)
        && i < seq.len()
    {
        seq.splice(i..=i, with);
    }
}

/// Applies one random mutation to `tree`; `pool` holds the corpus's leaf tokens.
pub fn mutate(tree: &mut Vec<Node>, rng: &mut Rng, pool: &[TokenTree]) {
    let mut paths = vec![Vec::new()];
    groups(tree, &mut Vec::new(), &mut paths);
    let kind = pick_kind(rng);
    match kind {
        Kind::Literal => {
            let lit = nodes(rng.pick(LITERALS).copied().unwrap_or("0"));
            return replace_leaf(tree, rng, &|t| matches!(t, TokenTree::Literal(_)), lit);
        }
        Kind::Ident => {
            let idents: Vec<&TokenTree> = pool.iter().filter(|t| matches!(t, TokenTree::Ident(_))).collect();
            let id = rng.pick(&idents).map(|&t| vec![Node::Leaf(t.clone())]).unwrap_or_default();
            return replace_leaf(tree, rng, &|t| matches!(t, TokenTree::Ident(_)), id);
        }
        Kind::Operator => {
            let op = nodes(rng.pick(OPERATORS).copied().unwrap_or("+"));
            return replace_leaf(tree, rng, &|t| matches!(t, TokenTree::Punct(_)), op);
        }
        Kind::Shape => {
            let brackets: Vec<&Path> = paths.iter().filter(|p| delimiter_at(tree, p) == Some(Delimiter::Bracket)).collect();
            let shape = nodes(rng.pick(SHAPES).copied().unwrap_or(""));
            if let Some(path) = rng.pick(&brackets).map(|p| (*p).clone())
                && let Some(seq) = seq_at(tree, &path)
            {
                *seq = shape;
            }
            return;
        }
        _ => {}
    }
    let path = rng.pick(&paths).cloned().unwrap_or_default();
    let delim = delimiter_at(tree, &path);
    let Some(seq) = seq_at(tree, &path) else { return };
    let n = seq.len();
    let k = rng.below(n);
    // Arguments and list items are separated by commas, statements by semicolons.
    let sep = if delim == Some(Delimiter::Brace) { ';' } else { ',' };
    match kind {
        Kind::Delete if n > 0 => {
            seq.remove(k);
        }
        Kind::Duplicate if n > 0 => {
            let dup = seq[k].clone();
            seq.insert(k, dup);
        }
        Kind::Swap if n > 1 => seq.swap(k.min(n - 2), k.min(n - 2) + 1),
        Kind::Parts => {
            // Remove, duplicate or swap an argument, list item or statement.
            let mut parts = split(seq, sep);
            let m = parts.len();
            let i = rng.below(m);
            match rng.below(3) {
                0 => {
                    parts.remove(i);
                }
                1 => {
                    let dup = parts[i].clone();
                    parts.insert(i, dup);
                }
                _ => {
                    let j = rng.below(m);
                    parts.swap(i, j);
                }
            }
            *seq = join(&parts, sep);
        }
        Kind::Nest => {
            // Wrap a part in a wrapper, once or many times.
            let mut parts = split(seq, sep);
            let i = rng.below(parts.len());
            let times = *rng.pick(&[1, 1, 1, 2, 3, 8, 40, 70, 300]).unwrap_or(&1);
            let template = rng.pick(WRAPPERS).copied().unwrap_or("($)");
            if let Some(part) = parts.get_mut(i).filter(|p| !p.is_empty()) {
                for _ in 0..times {
                    *part = fill(template, part);
                    // Wrappers that repeat their content grow exponentially.
                    if size(part) > MAX_TOKENS {
                        break;
                    }
                }
            }
            *seq = join(&parts, sep);
        }
        Kind::Chain => {
            // A long operator chain of one part.
            let mut parts = split(seq, ',');
            let i = rng.below(parts.len());
            let len = *rng.pick(&[2, 3, 20, 70, 300, 2000]).unwrap_or(&2);
            let op = nodes(rng.pick(&["+", "*", "-", "&&", "=="]).copied().unwrap_or("+"));
            if let Some(part) = parts.get_mut(i).filter(|p| !p.is_empty() && size(p) * len <= MAX_TOKENS) {
                let one = part.clone();
                for _ in 1..len {
                    part.extend(op.iter().cloned());
                    part.extend(one.iter().cloned());
                }
            }
            *seq = join(&parts, ',');
        }
        _ => {
            // Insert a corpus token or an operator.
            let tok = if rng.one_in(2) {
                rng.pick(pool).cloned().map(|t| vec![Node::Leaf(t)]).unwrap_or_default()
            } else {
                nodes(rng.pick(OPERATORS).copied().unwrap_or("+"))
            };
            let at = rng.below(n + 1);
            seq.splice(at..at, tok);
        }
    }
}
