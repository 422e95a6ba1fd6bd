//! Static shapes of the splitting views: `.reshape_dim(dim, shape)` and the
//! einops-style `.rearrange(src_pattern, dst_pattern, fixed_sizes)`, whose
//! patterns are literals parsed here, so a pattern that does not fit a known
//! shape is a compile error.

use super::types::{TensorTy, Ty};
use super::value::Val;
use crate::ast::{Expr, ExprKind, Spn};
use crate::diag::Diagnostics;

/// A literal pattern: per dim, its name or its group of names
/// (`("b", ("h", "w"))`); `None` unless it is written as such a literal.
pub fn literal_pattern(e: &Expr) -> Option<Vec<Vec<String>>> {
    let (ExprKind::Tuple(items) | ExprKind::List(items)) = &e.kind else { return None };
    let name = |x: &Expr| if let ExprKind::Str(s) = &x.kind { Some(s.clone()) } else { None };
    items
        .iter()
        .map(|x| match &x.kind {
            ExprKind::Str(s) => Some(vec![s.clone()]),
            ExprKind::Tuple(group) | ExprKind::List(group) => group.iter().map(name).collect(),
            _ => None,
        })
        .collect()
}

/// The `(name, size)` pairs of a `fixed_sizes` literal (`[("h", 4)]`), with the
/// sizes' static values.
pub fn literal_sizes<'a>(e: &'a Expr, t: &Ty) -> Option<Vec<(&'a str, Option<i64>)>> {
    let (ExprKind::Tuple(items) | ExprKind::List(items), Ty::List(tys) | Ty::Tuple(tys)) = (&e.kind, t) else { return None };
    items
        .iter()
        .zip(tys)
        .map(|(x, ty)| match (&x.kind, ty) {
            (ExprKind::Tuple(kv), Ty::Tuple(kt)) if kv.len() == 2 && kt.len() == 2 => match (&kv[0].kind, &kt[1]) {
                (ExprKind::Str(n), Ty::Int(v)) => Some((n.as_str(), v.as_const())),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The sizes a dim of (known or unknown) `extent` splits into: `sizes` may hold
/// one `-1`, inferred. Reports sizes that cannot hold the extent.
fn split(diag: &mut Diagnostics, extent: Option<i64>, sizes: &[Option<i64>], what: &str, span: Spn) -> Vec<Val> {
    let unknown = || sizes.iter().map(|_| Val::unknown()).collect();
    let free = sizes.iter().filter(|&&k| k == Some(-1)).count();
    if free > 1 || sizes.iter().flatten().any(|&k| k < 1 && k != -1) {
        diag.error(span, format!("{what}: the sizes may hold one -1 (inferred) and otherwise positive sizes, got {}", show(sizes)));
        return unknown();
    }
    let known = sizes.iter().flatten().filter(|&&k| k != -1).try_fold(1i64, |acc, &k| acc.checked_mul(k));
    let (Some(n), Some(known), true) = (extent, known, sizes.iter().all(Option::is_some)) else {
        return sizes.iter().map(|k| k.filter(|&k| k != -1).map_or(Val::unknown(), Val::konst)).collect();
    };
    let missing = if free == 1 && n % known == 0 { n / known } else { 1 };
    let fits = if free == 1 { n % known == 0 } else { known == n };
    if !fits {
        diag.error(span, format!("{what}: the sizes {} do not split a dim of extent {n}", show(sizes)));
        return unknown();
    }
    sizes.iter().flatten().map(|&k| Val::konst(if k == -1 { missing } else { k })).collect()
}

fn show(sizes: &[Option<i64>]) -> String {
    let parts: Vec<String> = sizes.iter().map(|k| k.map_or("?".into(), |k| k.to_string())).collect();
    format!("[{}]", parts.join(", "))
}

/// `t.reshape_dim(dim, shape)`: dim `dim` split into `shape`; on chip the
/// partition dim cannot be split.
pub fn reshape_dim(
    diag: &mut Diagnostics,
    t: &TensorTy,
    dim: Option<i64>,
    shape: Option<Vec<Option<i64>>>,
    on_chip: bool,
    span: Spn,
) -> Ty {
    let Some(sizes) = shape else { return Ty::Tensor(TensorTy { shape: None, ..t.clone() }) };
    if on_chip && dim == Some(0) && sizes.len() != 1 {
        diag.error(span, "`.reshape_dim()` cannot split the partition dim (dim 0) of an on-chip tensor");
    }
    let shape = t.shape.as_ref().and_then(|s| {
        let d = usize::try_from(dim?).ok()?;
        let Some(extent) = s.get(d) else {
            diag.error(span, format!("`.reshape_dim({d}, ..)`: the tensor has no dim {d} (rank {})", s.len()));
            return None;
        };
        let parts = split(diag, extent.as_const(), &sizes, "`.reshape_dim()`", span);
        let mut s = s.clone();
        s.splice(d..=d, parts);
        Some(s)
    });
    Ty::Tensor(TensorTy { shape, ..t.clone() })
}

/// `t.rearrange(src, dst, fixed)`: the groups of `src` split (sizes from
/// `fixed`, one per group inferred), the names reordered as in `dst`, `dst`'s
/// groups merged. Reports patterns that do not name the same dims once each,
/// that do not match the rank, that move or split an on-chip partition dim, or
/// whose sizes do not split their dims.
pub fn rearrange(
    diag: &mut Diagnostics,
    t: &TensorTy,
    src: &[Vec<String>],
    dst: &[Vec<String>],
    fixed: &[(&str, Option<i64>)],
    on_chip: bool,
    span: Spn,
) -> Ty {
    let unknown = Ty::Tensor(TensorTy { shape: None, ..t.clone() });
    let flat = |p: &[Vec<String>]| p.iter().flatten().cloned().collect::<Vec<_>>();
    let (from, to) = (flat(src), flat(dst));
    for (which, p, names) in [("src_pattern", src, &from), ("dst_pattern", dst, &to)] {
        let repeated = names.iter().enumerate().any(|(i, n)| names[..i].contains(n));
        if repeated || p.iter().any(Vec::is_empty) {
            diag.error(span, format!("`.rearrange()`: {which} must hold names or groups of names, each name once"));
            return unknown;
        }
    }
    let (mut a, mut b) = (from.clone(), to.clone());
    a.sort_unstable();
    b.sort_unstable();
    if a != b {
        diag.error(span, format!("`.rearrange()`: src_pattern names {from:?} but dst_pattern names {to:?}; they must name the same dims"));
        return unknown;
    }
    if on_chip && (src.first().is_some_and(|g| g.len() != 1) || src.first() != dst.first()) {
        diag.error(span, "`.rearrange()` of an on-chip tensor must keep the partition dim (dim 0) first, unsplit and unmerged");
    }
    let Some(dims) = &t.shape else { return unknown };
    if dims.len() != src.len() {
        diag.error(span, format!("`.rearrange()`: src_pattern names {} dims but the tensor has rank {}", src.len(), dims.len()));
        return unknown;
    }
    let mut sizes: Vec<(String, Val)> = Vec::new();
    for (group, extent) in src.iter().zip(dims) {
        if group.len() == 1 {
            sizes.push((group[0].clone(), extent.clone()));
            continue;
        }
        let want: Vec<Option<i64>> = group.iter().map(|n| fixed.iter().find(|(k, _)| k == n).map_or(Some(-1), |&(_, v)| v)).collect();
        let parts = split(diag, extent.as_const(), &want, &format!("`.rearrange()` group {group:?}"), span);
        sizes.extend(group.iter().cloned().zip(parts));
    }
    let size = |n: &String| sizes.iter().find(|(k, _)| k == n).map_or(Val::unknown(), |(_, v)| v.clone());
    let shape = dst
        .iter()
        .map(|g| {
            let vals: Vec<Option<i64>> = g.iter().map(|n| size(n).as_const()).collect();
            match vals.iter().try_fold(1i64, |acc, v| acc.checked_mul((*v)?)) {
                Some(n) if g.len() > 1 => Val::konst(n),
                _ if g.len() == 1 => size(&g[0]),
                _ => Val::unknown(),
            }
        })
        .collect();
    Ty::Tensor(TensorTy { shape: Some(shape), ..t.clone() })
}
