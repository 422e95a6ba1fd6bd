//! Methods of tensors (`NkiTensor` methods and properties).

use super::{Kind, Param, opt, req};

/// A tensor method or property.
pub struct MethodSpec {
    pub name: &'static str,
    /// A Python property (`t.shape`) rather than a method call.
    pub property: bool,
    pub params: &'static [Param],
}

static TENSOR_METHODS: &[MethodSpec] = &[
    MethodSpec { name: "shape", property: true, params: &[] },
    MethodSpec { name: "dtype", property: true, params: &[] },
    MethodSpec { name: "ndim", property: true, params: &[] },
    MethodSpec {
        name: "ap",
        property: false,
        params: &[
            req("pattern", Kind::Pattern),
            opt("offset", Kind::Int),
            opt("scalar_offset", Kind::DynamicOffset),
            opt("indirect_dim", Kind::Int),
        ],
    },
    MethodSpec { name: "reshape", property: false, params: &[req("shape", Kind::Ints)] },
    MethodSpec { name: "broadcast", property: false, params: &[req("dim", Kind::Int), req("size", Kind::Int)] },
    MethodSpec { name: "expand_dim", property: false, params: &[req("dim", Kind::Int)] },
    MethodSpec { name: "select", property: false, params: &[req("dim", Kind::Int), req("index", Kind::Int)] },
    MethodSpec {
        name: "slice",
        property: false,
        params: &[req("dim", Kind::Int), req("start", Kind::Int), req("end", Kind::Int), opt("step", Kind::Int)],
    },
];

/// Looks up a tensor method.
pub fn lookup_method(name: &str) -> Option<&'static MethodSpec> {
    TENSOR_METHODS.iter().find(|m| m.name == name)
}

/// Every tensor method name (for suggestions).
pub fn method_names() -> impl Iterator<Item = &'static str> {
    TENSOR_METHODS.iter().map(|m| m.name)
}
