//! The macro's own bounds on what one kernel may ask of it, so that every
//! expansion does a bounded amount of work and emits code that rustc and
//! CPython accept. Each bound is far above what real kernels use (the kernels of
//! this workspace nest at most 13 levels deep and build lists of at most 32
//! elements).

/// How deep a kernel may nest: brackets and blocks in its tokens, blocks and
/// expressions in its syntax tree (an `a + b + c` chain is as deep as it is long),
/// and type annotations; also the longest run of operators in a row (`- - x`)
/// and the most assignments one statement chains (`a = b = c`).
///
/// The parser, the checker and both emitters recurse once per level, and so does
/// rustc on the emitted code, so the bound keeps them all far from the end of the
/// stack; it also keeps the emitted Python within CPython's limits of 200
/// nested brackets (each level emits at most two) and 100 indentation levels.
pub const MAX_NESTING: usize = 64;

/// How many bundles deep a kernel's bundle parameter may nest (`spec:
/// MoECTESpec` holding `shard_on_block: Option<ShardOnBlockConfig>` is two):
/// its caller gives each field by its path, one command-line flag and one
/// registry entry apiece, and a bundle naming itself would otherwise never end.
pub const MAX_BUNDLE_NESTING: usize = 4;

#[path = "../../../nki-core/src/language/list_bounds.rs"]
mod list_bounds;

/// How many elements one list, tuple or `[x; n]` may hold, nested ones included
/// (the checker tracks the type of every element): the bound the emulator applies
/// to lengths only known at run time.
pub const MAX_ELEMENTS: usize = list_bounds::MAX_LIST_ELEMENTS;

/// The deepest group nesting of an expansion: [`MAX_NESTING`] levels of the
/// kernel, each emitted as at most [`EMITTED_GROUPS_PER_LEVEL`] nested groups
/// (`((x) as f64)` inside an operation's own parentheses is three), inside the
/// fixed frame of the generated function and module.
#[cfg(test)]
pub const MAX_EMITTED_DEPTH: usize = EMITTED_FRAME + EMITTED_GROUPS_PER_LEVEL * MAX_NESTING;
#[cfg(test)]
const EMITTED_GROUPS_PER_LEVEL: usize = 3;
#[cfg(test)]
const EMITTED_FRAME: usize = 8;

/// The group nesting of a token stream, which [`MAX_EMITTED_DEPTH`] bounds.
#[cfg(test)]
pub fn group_depth(ts: &proc_macro2::TokenStream) -> usize {
    ts.clone()
        .into_iter()
        .map(|t| if let proc_macro2::TokenTree::Group(g) = t { 1 + group_depth(&g.stream()) } else { 0 })
        .max()
        .unwrap_or(0)
}
