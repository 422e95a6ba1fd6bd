use nki::prelude::*;

#[nki_module]
pub mod k {
    use nki::prelude::*;

    /// Two tensors.
    #[nki_object]
    pub struct Pair {
        pub a: Hbm,
        pub b: Hbm,
    }

    /// A group names a bundle; its fields carry their own attributes.
    #[nki_kernel]
    pub fn not_a_bundle(#[spread] x: f64, #[spread] #[default(None)] p: Pair) {}

    /// A field may not also be a parameter, nor be spread twice.
    #[nki_kernel]
    pub fn twice(a: Hbm, #[spread] p: Pair, #[spread] _: Pair, b: Hbm) {}

    /// Naming: a prefix that begins a name, fields the bundle has, and
    /// `key = value` pairs.
    #[nki_kernel]
    pub fn digit_prefix(#[spread(prefix = "9")] p: Pair) {}

    #[nki_kernel]
    pub fn no_such_field(#[spread(c = d)] q: Pair) {}

    #[nki_kernel]
    pub fn not_a_pair(#[spread(a)] r: Pair) {}

    #[nki_kernel]
    pub fn keyword(#[spread(prefix = "a")] s: Lone) {}

    /// A run of fields: both ends name fields, in order; the part is bound to `_`.
    #[nki_kernel]
    pub fn no_such_end(#[spread(from = z)] _: Pair) {}

    #[nki_kernel]
    pub fn empty_run(#[spread(from = b, to = a)] _: Pair) {}

    #[nki_kernel]
    pub fn part_bound(#[spread(to = a)] p: Pair) {}

    /// One field, which the prefix `a` makes the keyword `as`.
    #[nki_object]
    pub struct Lone {
        pub s: Hbm,
    }

    /// A parameter group, spread as `_` only.
    #[nki_params]
    pub struct Span2 {
        pub lo: f64,
        pub hi: f64,
    }

    #[nki_kernel]
    pub fn group_bound(#[spread] w: Span2) {}

    /// A group's field takes a range as a parameter does; a bundle's does not.
    #[nki_params]
    pub struct Ranged {
        #[range(>= 0)]
        pub n: Option<i64>,
        #[range(>= 0)]
        pub flag: bool,
        #[unknown]
        pub other: f64,
    }

    #[nki_object]
    pub struct RangedBundle {
        #[range(>= 0)]
        pub n: i64,
    }

    /// A group binds a plain name or `_`.
    #[nki_kernel]
    pub fn pattern(#[spread] Pair { a, b }: Pair) {}
}

fn main() {}
