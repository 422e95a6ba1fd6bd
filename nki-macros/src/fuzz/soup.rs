//! Token soup: random token trees from the corpus's tokens, extreme literals and
//! operators, placed where the macro parses them itself (function bodies,
//! `s![...]`, `assert!(...)`, `vec![...]`, parameters, the attribute) or as the
//! whole item.

use super::mutate::{Node, fill, nodes, to_stream};
use super::rng::Rng;
use crate::ast::FnKind;
use proc_macro2::{Delimiter, TokenStream, TokenTree};

const PUNCT: &[&str] =
    &["+", "-", "*", "/", "%", "=", "==", "<", ">", "!", "&&", "||", "..", ";", ",", ".", ":", "::", "#", "?", "&", "->", "=>"];
const EXTREMES: &[&str] = &["9223372036854775807", "9223372036854775808", "1e400", "0", "-1", "1099511627776", "f32::MIN"];

/// Where the soup goes: `$` is replaced by it.
const PLACES: &[&str] = &[
    "fn k(x: Hbm) { $ }",
    "fn k(x: Hbm) -> Hbm { let t = x[s![$]]; t }",
    "fn k(x: Hbm) { assert!($); }",
    "fn k(x: Hbm) { assert!(true, \"{}\", $); }",
    "fn k(x: Hbm) { let v = vec![$]; }",
    "fn k(x: Hbm) { let y = $; }",
    "fn k(x: Hbm) { nisa::dma_copy($); }",
    "fn k(x: Hbm) { let t = nl::ndarray($); }",
    "fn k($) {}",
    "fn k(x: Hbm) -> $ {}",
    "fn k(#[default($)] x: i64) {}",
    "fn k(x: Hbm) { for i in $ { } }",
    "$",
];

fn tree(rng: &mut Rng, pool: &[TokenTree], len: usize, depth: usize) -> Vec<Node> {
    let mut out = Vec::new();
    for _ in 0..len {
        match rng.below(10) {
            0 | 1 if depth < 6 => {
                let d = *rng.pick(&[Delimiter::Parenthesis, Delimiter::Bracket, Delimiter::Brace]).unwrap_or(&Delimiter::Parenthesis);
                let inner_len = rng.below(8);
                out.push(Node::Group(d, tree(rng, pool, inner_len, depth + 1)));
            }
            2 | 3 => out.extend(nodes(rng.pick(PUNCT).copied().unwrap_or("+"))),
            4 => out.extend(nodes(rng.pick(EXTREMES).copied().unwrap_or("0"))),
            _ => out.extend(rng.pick(pool).cloned().map(Node::Leaf)),
        }
    }
    out
}

/// A soup case on its own or on `kernel` (soup as its attribute's arguments):
/// the function kind, the attribute arguments and the item.
pub fn soup(rng: &mut Rng, pool: &[TokenTree], kernel: &TokenStream) -> (FnKind, TokenStream, TokenStream) {
    let len = 1 + rng.below(40);
    let soup = tree(rng, pool, len, 0);
    let kind = if rng.one_in(4) { FnKind::Helper } else { FnKind::Kernel };
    if rng.one_in(PLACES.len() + 1) {
        return (kind, to_stream(&soup), kernel.clone());
    }
    let place = rng.pick(PLACES).copied().unwrap_or("$");
    (kind, TokenStream::new(), to_stream(&fill(place, &soup)))
}
