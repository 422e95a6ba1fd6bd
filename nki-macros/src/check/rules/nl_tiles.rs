//! Rules of the `nki.language` tile functions that compute: the element-wise
//! calls on tiles (`nl.add(a, b)`, `nl.exp(x)`), `nl.matmul` and `nl.transpose`.
//! Each returns a new tile whose shape and dtype later calls are checked against.

use crate::ast::Space;
use crate::check::site::CallSite;
use crate::check::types::{TensorTy, Ty, dims_text};
use crate::check::value::Val;
use crate::diag::Diagnostics;
use nki_spec::Kind;

/// The dtype a call's `dtype=` names, when given.
fn dtype_arg(site: &CallSite<'_>) -> Option<Option<&'static str>> {
    match site.arg("dtype").map(|a| &a.ty) {
        Some(Ty::Dtype(d)) => Some(*d),
        _ => None,
    }
}

/// NumPy broadcasting of two known-rank shapes: `Err` when two known dims differ and neither is 1.
fn broadcast(a: &[Val], b: &[Val]) -> Result<Vec<Val>, ()> {
    let n = a.len().max(b.len());
    let dim = |s: &[Val], i: usize| if i + s.len() >= n { s[i + s.len() - n].clone() } else { Val::konst(1) };
    (0..n)
        .map(|i| {
            let (x, y) = (dim(a, i), dim(b, i));
            match (x.as_const(), y.as_const()) {
                (Some(1), _) => Ok(y),
                (_, Some(1)) => Ok(x),
                (Some(p), Some(q)) if p != q => Err(()),
                (Some(_), _) => Ok(x),
                _ => Ok(y),
            }
        })
        .collect()
}

/// Element-wise `nl.<op>(x[, y], dtype=None)`: operands on chip, known shapes that
/// broadcast; the result is an SBUF tile of the broadcast shape in `dtype`, else
/// the operands' common dtype.
pub fn elementwise(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let mut tiles: Vec<&TensorTy> = Vec::new();
    for role in ["x", "y"] {
        let Some((t, span)) = site.tensor(role) else { continue };
        // A tensor-kind parameter's memory space is checked with its kind; a tile-or-number one here.
        let operand = site.spec.params.iter().any(|p| p.name == role && p.kind == Kind::Operand);
        if operand && t.space == Some(Space::Hbm) {
            diag.error(
                span,
                format!(
                    "{} of {} is an HBM tensor: compute engines read only SBUF and PSUM (nl::load it first)",
                    site.label(role),
                    site.spec.py
                ),
            );
        }
        if nki_spec::constants::INTEGER_TOKENS.contains(&site.spec.name)
            && let Some(d) = t.dtype.filter(|d| d.contains("float"))
        {
            diag.error(
                span,
                format!("{} of {} is a {d} tile: {} takes integer tiles and numbers only", site.label(role), site.spec.py, site.spec.py),
            );
        }
        tiles.push(t);
    }
    if nki_spec::constants::INTEGER_TOKENS.contains(&site.spec.name) {
        for role in ["x", "y"] {
            if let Some(a) = site.arg(role)
                && matches!(a.ty, Ty::Float)
            {
                diag.error(
                    a.expr.span,
                    format!(
                        "{} of {} is a float number: {} takes integer tiles and numbers only",
                        site.label(role),
                        site.spec.py,
                        site.spec.py
                    ),
                );
            }
        }
    }
    let mut shape = tiles.first().and_then(|t| t.shape.clone());
    if let [a, b] = tiles[..]
        && let (Some(sa), Some(sb)) = (&a.shape, &b.shape)
    {
        shape = match broadcast(sa, sb) {
            Ok(s) => Some(s),
            Err(()) => {
                if let Some((_, span)) = site.tensor("y") {
                    diag.error(
                        span,
                        format!(
                            "{} of shape {} and {} of shape {} do not broadcast to one shape ({})",
                            site.label("x"),
                            dims_text(sa),
                            site.label("y"),
                            dims_text(sb),
                            site.spec.py
                        ),
                    );
                }
                None
            }
        };
    }
    let common = match tiles[..] {
        [a] => a.dtype,
        [a, b] if a.dtype == b.dtype => a.dtype,
        _ => None,
    };
    Ty::Tensor(TensorTy { space: Some(Space::Sbuf), shape, dtype: dtype_arg(site).unwrap_or(common) })
}

/// Reports a known `x` of `nl.transpose` / `nl.matmul` that is not 2-d or whose dims exceed `limits`.
fn two_d(diag: &mut Diagnostics, site: &CallSite<'_>, role: &str, limits: [(usize, &str); 2]) -> Option<[Val; 2]> {
    let (t, span) = site.tensor(role)?;
    let shape = t.shape.as_ref()?;
    let [p, f] = &shape[..] else {
        diag.error(span, format!("{} of {} must be a 2-d tile, its shape is {}", site.label(role), site.spec.py, dims_text(shape)));
        return None;
    };
    for ((dim, what), (limit, name)) in [(p, "partitions"), (f, "elements per partition")].into_iter().zip(limits) {
        if let Some(v) = dim.as_const()
            && v > limit as i64
        {
            diag.error(span, format!("{} of {} has {v} {what}, more than {name} = {limit}", site.label(role), site.spec.py));
        }
    }
    Some([p.clone(), f.clone()])
}

/// `nl.transpose(x, dtype=None)`: a 2-d tile of at most `pe_transpose_max` squared;
/// the result is a PSUM tile of the swapped shape in `dtype`, else `x`'s.
pub fn transpose(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let m = site.hw.pe_transpose_max;
    let dims = two_d(diag, site, "x", [(m, "pe_transpose_max"), (m, "pe_transpose_max")]);
    let dtype = dtype_arg(site).unwrap_or_else(|| site.tensor("x").and_then(|(t, _)| t.dtype));
    Ty::Tensor(TensorTy { space: Some(Space::Psum), shape: dims.map(|[p, f]| vec![f, p]), dtype })
}

/// `nl.matmul(x, y, transpose_x=False)`: `x` (M, K), or (K, M) with
/// `transpose_x`, and `y` (K, N) contract over K (≤ pmax), M ≤ 128, N ≤ the moving
/// limit; the result is a float32 PSUM tile (M, N).
pub fn matmul(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let hw = site.hw;
    let transposed = match site.arg("transpose_x").map(|a| &a.ty) {
        Some(Ty::Bool) => match &site.arg("transpose_x").map(|a| &a.expr.kind) {
            Some(crate::ast::ExprKind::Bool(b)) => Some(*b),
            _ => None,
        },
        None => Some(false),
        _ => None,
    };
    let stationary = (hw.gemm_stationary_fmax, "gemm_stationary_fmax");
    let x_limits = match transposed {
        Some(true) => [(hw.pmax, "pmax"), stationary],
        Some(false) => [stationary, (hw.pe_transpose_max, "pe_transpose_max")],
        None => [(hw.pmax, "pmax"), (hw.pmax, "pmax")],
    };
    let x = two_d(diag, site, "x", x_limits);
    let y = two_d(diag, site, "y", [(hw.pmax, "pmax"), (hw.gemm_moving_fmax, "gemm_moving_fmax")]);
    let (m, k) = match (transposed, &x) {
        (Some(true), Some([k, m])) => (m.clone(), k.clone()),
        (Some(false), Some([m, k])) => (m.clone(), k.clone()),
        _ => (Val::unknown(), Val::unknown()),
    };
    if let (Some(kv), Some(kyv)) = (k.as_const(), y.as_ref().and_then(|[ky, _]| ky.as_const()))
        && kv != kyv
        && let Some((_, span)) = site.tensor("y")
    {
        diag.error(
            span,
            format!(
                "{} of nl.matmul has {kyv} partitions but {} contributes a contraction dim of {kv}{}; they must match",
                site.label("y"),
                site.label("x"),
                if transposed == Some(true) { " (its partitions)" } else { " (its free size; pass transpose_x=True for a (K, M) x)" }
            ),
        );
    }
    let shape = match (&x, &y) {
        (Some(_), Some([_, n])) if transposed.is_some() => Some(vec![m, n.clone()]),
        _ => None,
    };
    Ty::Tensor(TensorTy { space: Some(Space::Psum), shape, dtype: Some("float32") })
}

/// The constant axes of an `axis` argument (an int or a tuple of ints), when all are known.
fn axes_of(t: &Ty) -> Option<Vec<i64>> {
    match t {
        Ty::Int(v) => Some(vec![v.as_const()?]),
        Ty::List(items) | Ty::Tuple(items) => items.iter().map(|i| if let Ty::Int(v) = i { v.as_const() } else { None }).collect(),
        _ => None,
    }
}

/// `nl.sum` / `max` / `min` / `prod` / `mean`: `axis` names the trailing free dims
/// of `x`; the result is an SBUF tile without them (or with them as 1 under
/// `keepdims=True`) in `dtype`, else `x`'s.
pub fn reduce(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let x = site.tensor("x");
    let dtype = dtype_arg(site).unwrap_or_else(|| x.and_then(|(t, _)| t.dtype));
    let keep = match site.arg("keepdims").map(|a| &a.expr.kind) {
        None => Some(false),
        Some(crate::ast::ExprKind::Bool(b)) => Some(*b),
        _ => None,
    };
    let shape = (|| {
        let dims = x?.0.shape.as_ref()?;
        let arg = site.arg("axis")?;
        let nd = dims.len() as i64;
        let mut axes: Vec<i64> = axes_of(&arg.ty)?.into_iter().map(|a| if a < 0 { a + nd } else { a }).collect();
        axes.sort_unstable();
        let trailing = axes.first().is_some_and(|&a| a >= 1) && axes.windows(2).all(|w| w[1] == w[0] + 1) && axes.last() == Some(&(nd - 1));
        if !trailing {
            diag.error(
                arg.expr.span,
                format!(
                    "axis of {} must name the trailing free dims of {} (shape {}), ending at dim {}; the partition dim 0 cannot be reduced",
                    site.spec.py,
                    site.label("x"),
                    dims_text(dims),
                    nd - 1
                ),
            );
            return None;
        }
        let keep = keep?;
        Some(
            dims.iter()
                .enumerate()
                .filter_map(|(d, n)| if !axes.contains(&(d as i64)) { Some(n.clone()) } else { keep.then(|| Val::konst(1)) })
                .collect(),
        )
    })();
    Ty::Tensor(TensorTy { space: Some(Space::Sbuf), shape, dtype })
}

/// `nl.where(condition, x, y, dtype=None)`: `x` and `y` are numbers or tiles of
/// `condition`'s shape; the result is an SBUF tile of that shape in `dtype`, else
/// the tiles' common dtype.
pub fn where_(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let cond = site.tensor("condition");
    let shape = cond.and_then(|(t, _)| t.shape.clone());
    let mut dtypes = Vec::new();
    for role in ["x", "y"] {
        let Some((t, span)) = site.tensor(role) else { continue };
        if t.space == Some(Space::Hbm) {
            diag.error(
                span,
                format!("{} of nl.where is an HBM tensor: compute engines read only SBUF and PSUM (nl::load it first)", site.label(role)),
            );
        }
        if let (Some(want), Some(got)) = (&shape, &t.shape)
            && (want.len() != got.len()
                || want.iter().zip(got).any(|(a, b)| matches!((a.as_const(), b.as_const()), (Some(p), Some(q)) if p != q)))
        {
            diag.error(
                span,
                format!(
                    "{} of shape {} must have the shape of {} ({}) or be a number (nl.where)",
                    site.label(role),
                    dims_text(got),
                    site.label("condition"),
                    dims_text(want)
                ),
            );
        }
        dtypes.push(t.dtype);
    }
    let common = match dtypes[..] {
        [] => cond.and_then(|(t, _)| t.dtype),
        [a] => a,
        [a, b] if a == b => a,
        _ => None,
    };
    Ty::Tensor(TensorTy { space: Some(Space::Sbuf), shape, dtype: dtype_arg(site).unwrap_or(common) })
}

/// `nl.var`, `nl.softmax`, `nl.rms_norm`: `axis` (when given; softmax defaults to
/// the last dim) names every free dim of `x`, each partition normalised whole;
/// the result is an SBUF tile of `x`'s shape (`var`: its free dims as 1s) in
/// `dtype`, else `x`'s.
pub fn normalize(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let x = site.tensor("x");
    let dtype = dtype_arg(site).unwrap_or_else(|| x.and_then(|(t, _)| t.dtype));
    let dims = x.and_then(|(t, _)| t.shape.clone());
    let given = match site.arg("axis") {
        Some(a) => axes_of(&a.ty).map(|axes| (axes, a.expr.span)),
        None => site.tensor("x").map(|(_, span)| (vec![-1], span)),
    };
    if let (Some(dims), Some((axes, span))) = (&dims, given) {
        let nd = dims.len() as i64;
        let mut norm: Vec<i64> = axes.iter().map(|&a| if a < 0 { a + nd } else { a }).collect();
        norm.sort_unstable();
        if norm != (1..nd).collect::<Vec<i64>>() {
            diag.error(
                span,
                format!(
                    "axis of {} must name every free dim of {} (shape {}): dims 1 to {} (nki-rs normalises whole partitions)",
                    site.spec.py,
                    site.label("x"),
                    dims_text(dims),
                    nd - 1
                ),
            );
        }
    }
    // Both the emulator and the NumPy executor compute the intermediates in
    // float32, so another compute dtype would be silently ignored: refuse it.
    if let Some(a) = site.arg("compute_dtype")
        && let Ty::Dtype(Some(d)) = a.ty
        && d != "float32"
    {
        diag.error(
            a.expr.span,
            format!("compute_dtype of {} must be nl.float32, got nl.{d}: nki-rs computes its intermediates in float32", site.spec.py),
        );
    }
    let shape = dims.map(|d| {
        if site.spec.name == "var" {
            d.iter().enumerate().map(|(i, v)| if i == 0 { v.clone() } else { Val::konst(1) }).collect()
        } else {
            d
        }
    });
    Ty::Tensor(TensorTy { space: Some(Space::Sbuf), shape, dtype })
}

/// `nl.zeros_like` / `nl.empty_like(x, dtype=None, buffer=None, name='')`: a
/// tensor of `x`'s shape, in `dtype` and `buffer` when given, else `x`'s.
pub fn like(_diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let x = site.tensor("x").map(|(t, _)| t.clone()).unwrap_or_default();
    let space = match site.arg("buffer").map(|a| &a.ty) {
        Some(Ty::Buffer(Some("sbuf"))) => Some(Space::Sbuf),
        Some(Ty::Buffer(Some("psum"))) => Some(Space::Psum),
        Some(Ty::Buffer(Some(_))) => Some(Space::Hbm),
        Some(_) => None,
        None => x.space,
    };
    Ty::Tensor(TensorTy { space, shape: x.shape, dtype: dtype_arg(site).unwrap_or(x.dtype) })
}

/// The constant `n` of an integer argument.
fn int_arg(site: &CallSite<'_>, name: &str) -> Option<i64> {
    match site.arg(name).map(|a| &a.ty) {
        Some(Ty::Int(v)) => v.as_const(),
        _ => None,
    }
}

/// `nl.expand_dims(x, axis)`: a view of `x` with a unit dim at `axis` (not before
/// an on-chip tile's partition dim).
pub fn expand_dims(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let Some((x, span)) = site.tensor("x") else { return Ty::Unknown };
    let mut out = x.clone();
    if let (Some(dims), Some([a])) = (&x.shape, site.arg("axis").and_then(|a| axes_of(&a.ty)).as_deref()) {
        let nd = dims.len() as i64;
        let at = if *a < 0 { a + nd + 1 } else { *a };
        let on_chip = matches!(x.space, Some(Space::Sbuf | Space::Psum));
        if !(0..=nd).contains(&at) || (on_chip && at == 0) {
            diag.error(
                span,
                format!(
                    "nl.expand_dims cannot insert a dim at axis {a} of {} (shape {}, partition dim 0 fixed on chip)",
                    site.label("x"),
                    dims_text(dims)
                ),
            );
            out.shape = None;
        } else {
            let mut d = dims.clone();
            d.insert(at as usize, Val::konst(1));
            out.shape = Some(d);
        }
    } else {
        out.shape = None;
    }
    Ty::Tensor(out)
}

/// `nl.broadcast_to(x, shape, dtype=None)`: `shape` has `x`'s rank and differs
/// from it only where `x` has a unit dim; the result is a tile of `shape` in
/// `x`'s memory space.
pub fn broadcast_to(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let x = site.tensor("x");
    let shape = site.arg("shape").and_then(crate::check::operands::shape_of);
    if let (Some((t, _)), Some(want), Some(arg)) = (x, &shape, site.arg("shape"))
        && let Some(have) = &t.shape
    {
        let bad = have.len() != want.len()
            || have.iter().zip(want).any(|(h, w)| matches!((h.as_const(), w.as_const()), (Some(p), Some(q)) if p != q && p != 1));
        if bad {
            diag.error(
                arg.expr.span,
                format!("{} of shape {} does not broadcast to {} (nl.broadcast_to)", site.label("x"), dims_text(have), dims_text(want)),
            );
        }
    }
    let dtype = dtype_arg(site).unwrap_or_else(|| x.and_then(|(t, _)| t.dtype));
    Ty::Tensor(TensorTy { space: x.and_then(|(t, _)| t.space), shape, dtype })
}

/// `nl.gather_flattened(data, indices, axis=0, dtype=None)`: `indices` is an
/// integer tile; the result is an SBUF tile of its shape in `dtype`, else `data`'s.
pub fn gather_flattened(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let idx = site.tensor("indices");
    if let Some((t, span)) = idx
        && let Some(d) = t.dtype.filter(|d| d.contains("float"))
    {
        diag.error(span, format!("indices {} of nl.gather_flattened is a {d} tile: indices must be integers", site.label("indices")));
    }
    let dtype = dtype_arg(site).unwrap_or_else(|| site.tensor("data").and_then(|(t, _)| t.dtype));
    Ty::Tensor(TensorTy { space: Some(Space::Sbuf), shape: idx.and_then(|(t, _)| t.shape.clone()), dtype })
}

/// `nl.load_transpose2d(src, dtype=None)`: a 2-d HBM `src`; the result is an SBUF
/// tile of the swapped shape in `dtype`, else `src`'s.
pub fn load_transpose2d(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let src = site.tensor("src");
    let mut shape = None;
    if let Some((t, span)) = src {
        if matches!(t.space, Some(Space::Sbuf | Space::Psum)) {
            diag.error(span, format!("src {} of nl.load_transpose2d must be an HBM tensor", site.label("src")));
        }
        match t.shape.as_deref() {
            Some([a, b]) => shape = Some(vec![b.clone(), a.clone()]),
            Some(dims) => {
                diag.error(span, format!("src {} of nl.load_transpose2d must be 2-d, its shape is {}", site.label("src"), dims_text(dims)))
            }
            None => {}
        }
    }
    let dtype = dtype_arg(site).unwrap_or_else(|| src.and_then(|(t, _)| t.dtype));
    Ty::Tensor(TensorTy { space: Some(Space::Sbuf), shape, dtype })
}

/// `nl.shared_identity_matrix(n, dtype=nl.uint8, dst=None)`: `1 <= n <= pmax`;
/// the result is an `(n, n)` SBUF tile in `dtype` (`dst`'s when given).
pub fn identity(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let n = int_arg(site, "n");
    if let (Some(v), Some(arg)) = (n, site.arg("n"))
        && !(1..=site.hw.pmax as i64).contains(&v)
    {
        diag.error(arg.expr.span, format!("n = {v} of nl.shared_identity_matrix must be between 1 and pmax = {}", site.hw.pmax));
    }
    if let Some((t, _)) = site.tensor("dst") {
        return Ty::Tensor(t.clone());
    }
    let shape = site.arg("n").map(|a| match &a.ty {
        Ty::Int(v) => vec![v.clone(), v.clone()],
        _ => vec![Val::unknown(), Val::unknown()],
    });
    Ty::Tensor(TensorTy { space: Some(Space::Sbuf), shape, dtype: dtype_arg(site).unwrap_or(Some("uint8")) })
}
