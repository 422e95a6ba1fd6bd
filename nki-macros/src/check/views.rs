//! Static shapes of views: indexing (`t[s![..]]`) and the tensor methods
//! (`.ap()`, `.reshape()`, `.permute()`, ...), with their rules.

use super::operands::{countable, dtype_bytes};
use super::split_views;
use super::types::{TensorTy, Ty, known_product};
use super::value::{Val, slice_len};
use crate::ast::{Expr, Space, Spn};
use crate::diag::Diagnostics;

/// One item of a tensor index, with its static values.
pub enum IndexTy {
    At(Val, Spn),
    Range(Option<Val>, Option<Val>, Option<Val>, Spn),
}

/// The type of `t[items]`, reporting constant indices outside known dims.
pub fn index_tensor(diag: &mut Diagnostics, t: &TensorTy, items: &[IndexTy], span: Spn) -> Ty {
    let on_chip = matches!(t.space, Some(Space::Sbuf | Space::Psum));
    let Some(dims) = &t.shape else {
        return Ty::Tensor(TensorTy { shape: None, ..t.clone() });
    };
    if items.len() > dims.len() {
        diag.error(span, format!("{} indices for a tensor of rank {}", items.len(), dims.len()));
        return Ty::Tensor(TensorTy { shape: None, ..t.clone() });
    }
    let mut out = Vec::new();
    for (d, dim) in dims.iter().enumerate() {
        let n = dim.as_const();
        match items.get(d) {
            None => out.push(dim.clone()),
            Some(IndexTy::At(v, s)) => {
                if let (Some(i), Some(n)) = (v.as_const(), n)
                    && (if i >= 0 { i >= n } else { i.checked_add(n).is_none_or(|j| j < 0) })
                {
                    diag.error(*s, format!("index {i} is out of range for dim {d} of extent {n}"));
                }
                if on_chip && d == 0 {
                    out.push(Val::konst(1));
                }
            }
            Some(IndexTy::Range(start, stop, step, s)) => {
                let lo = start.clone().unwrap_or_else(|| Val::konst(0));
                let hi = stop.clone().unwrap_or_else(|| dim.clone());
                let step_c = step.as_ref().map_or(Some(1), Val::as_const);
                let before = diag.count();
                if let (Some(h), Some(n)) = (hi.as_const(), n)
                    && h > n
                {
                    diag.error(*s, format!("slice end {h} is past the end of dim {d} (extent {n})"));
                }
                if let Some(l) = lo.as_const().filter(|&l| l < 0 && start.is_some()) {
                    diag.error(*s, format!("slice start {l} is negative"));
                }
                if diag.count() > before {
                    // The extent of a reported slice is unknown; nothing downstream should re-report it.
                    out.push(Val::unknown());
                    continue;
                }
                let Ok(len) = hi.sub(&lo) else {
                    let show = |v: &Val| v.as_const().map_or("?".into(), |c| c.to_string());
                    diag.error(
                        *s,
                        format!("integer overflow: the length `{} - {}` of this slice does not fit in an i64", show(&hi), show(&lo)),
                    );
                    out.push(Val::unknown());
                    continue;
                };
                out.push(match (len.as_const(), step_c) {
                    (Some(l), Some(st)) if st > 0 => Val::konst(slice_len(l, st)),
                    (_, Some(1)) => len,
                    _ => Val::unknown(),
                });
            }
        }
    }
    if on_chip && out.len() < 2 && dims.len() >= 2 {
        out.push(Val::konst(1));
    }
    Ty::Tensor(TensorTy { shape: Some(out), ..t.clone() })
}

/// The rules of an `.ap(vector_offset=)` view: its rows are addressed by the DMA
/// engines, so it is written directly as an operand of `nisa::dma_copy` or
/// `nisa::dma_compute` (a
/// compute engine, or a view of it, cannot follow the offsets), and a
/// `scalar_offset` cannot be added to it.
pub fn vector_offset_view(diag: &mut Diagnostics, what: &str, direct_dma_operand: bool, scalar_offset: bool, span: Spn) {
    if !direct_dma_operand {
        diag.error(
            span,
            format!(
                "{what} view is addressed by the DMA engines: write it directly as the `src` or `dst` of `nisa::dma_copy` (or an operand of `nisa::dma_compute`)"
            ),
        );
    }
    if scalar_offset {
        diag.error(span, nki_spec::registers::OFFSETS_EXCLUSIVE);
    }
}

/// `t` seen as `dtype` (`.view(dtype)`, `.ap(dtype=)`): PSUM is never
/// reinterpreted, and the known last dim scales by the element size ratio (a
/// wider dtype needs it to be a multiple of the ratio).
fn reinterpret(diag: &mut Diagnostics, t: &TensorTy, dtype: Option<&'static str>, what: &str, span: Spn) -> Ty {
    if t.space == Some(Space::Psum) {
        diag.error(span, format!("`{what}` cannot reinterpret a PSUM tensor; only SBUF and HBM bytes can be viewed as another dtype"));
    }
    let (Some(from), Some(to)) = (t.dtype, dtype) else {
        return Ty::Tensor(TensorTy { shape: None, dtype, ..t.clone() });
    };
    if from == to {
        return Ty::Tensor(t.clone());
    }
    let (a, b) = (dtype_bytes(from), dtype_bytes(to));
    let shape = t.shape.as_ref().map(|dims| {
        let mut dims = dims.clone();
        if let Some(last) = dims.last_mut() {
            *last = match last.as_const() {
                Some(n) if b <= a => n.checked_mul(a / b).map_or(Val::unknown(), Val::konst),
                Some(n) if n % (b / a) != 0 => {
                    diag.error(span, format!("`{what}` as {to} needs the last dim ({n} {from} elements) to be a multiple of {}", b / a));
                    Val::unknown()
                }
                Some(n) => Val::konst(n / (b / a)),
                None => Val::unknown(),
            };
        }
        dims
    });
    Ty::Tensor(TensorTy { shape, dtype: Some(to), ..t.clone() })
}

/// The result of a tensor method, with its static checks.
pub fn tensor_method<'a>(
    diag: &mut Diagnostics,
    t: &TensorTy,
    name: &str,
    arg: &dyn Fn(&str) -> Option<(&'a Ty, &'a Expr)>,
    span: Spn,
) -> Ty {
    let int = |n: &str| arg(n).and_then(|(t, _)| t.const_int());
    let on_chip = matches!(t.space, Some(Space::Sbuf | Space::Psum));
    let result = match name {
        "shape" => Ty::Shape(t.shape.clone()),
        "dtype" => Ty::Dtype(t.dtype),
        "ndim" => Ty::Int(t.shape.as_ref().map_or(Val::unknown(), |s| Val::konst(s.len() as i64))),
        "is_contiguous" | "is_indirect" => Ty::Bool,
        "ap" => {
            let shape = arg("pattern").and_then(|(pt, _)| match pt {
                Ty::List(pairs) | Ty::Tuple(pairs) => Some(
                    pairs
                        .iter()
                        .map(|p| match p {
                            Ty::List(x) | Ty::Tuple(x) => x.get(1).and_then(Ty::const_int).map_or(Val::unknown(), Val::konst),
                            _ => Val::unknown(),
                        })
                        .collect(),
                ),
                _ => None,
            });
            // With `dtype`, the pattern counts elements of `t` seen as that dtype.
            let dtype = match arg("dtype") {
                Some((Ty::Dtype(d), _)) => {
                    reinterpret(diag, t, *d, ".ap(dtype=)", span);
                    *d
                }
                Some(_) => None,
                None => t.dtype,
            };
            Ty::Tensor(TensorTy { shape, dtype, ..t.clone() })
        }
        "indirect" => {
            if t.space.is_some_and(|s| s != Space::Sbuf) {
                diag.error(span, "`.indirect()` views an SBUF tensor: tensor indirection reads the free elements of SBUF partitions");
            }
            let index = match arg("index") {
                Some((Ty::Tensor(i), _)) => Some(i),
                _ => None,
            };
            if let Some(i) = index
                && i.dtype.is_some_and(|d| d.starts_with("float") || d.starts_with("bfloat"))
            {
                diag.error(span, "the index of `.indirect()` holds integer offsets; use an integer SBUF tile");
            }
            let size = index.and_then(|i| i.shape.as_ref()).and_then(|s| known_product(s)).and_then(Result::ok);
            let n = int("num_elem").or(size);
            let shape =
                t.shape.as_ref().map(|s| vec![s.first().cloned().unwrap_or_else(Val::unknown), n.map_or(Val::unknown(), Val::konst)]);
            Ty::Tensor(TensorTy { shape, ..t.clone() })
        }
        "view" | "reinterpret_cast" => match arg("dtype") {
            Some((Ty::Dtype(d), _)) => reinterpret(diag, t, *d, &format!(".{name}()"), span),
            _ => Ty::Tensor(TensorTy { shape: None, dtype: None, ..t.clone() }),
        },
        "reshape" => {
            let shape = arg("shape").and_then(|(st, _)| match st {
                Ty::Tuple(items) | Ty::List(items) => {
                    Some(items.iter().map(|x| if let Ty::Int(v) = x { v.clone() } else { Val::unknown() }).collect::<Vec<_>>())
                }
                Ty::Shape(d) => d.clone(),
                _ => None,
            });
            if on_chip
                && let (Some(new), Some(old)) = (&shape, &t.shape)
                && let (Some(a), Some(b)) = (new.first().and_then(Val::as_const), old.first().and_then(Val::as_const))
                && a != b
            {
                diag.error(span, format!("reshape of an on-chip tensor must keep its partition dim {b}, got {a}"));
            }
            Ty::Tensor(TensorTy { shape, ..t.clone() })
        }
        "permute" => {
            let dims: Option<Vec<Option<i64>>> = arg("dims").and_then(|(dt, _)| match dt {
                Ty::Tuple(items) | Ty::List(items) => Some(items.iter().map(Ty::const_int).collect()),
                _ => None,
            });
            let shape = match (&dims, &t.shape) {
                (Some(ds), Some(old)) if ds.iter().all(Option::is_some) => {
                    let ds: Vec<i64> = ds.iter().flatten().copied().collect();
                    let mut sorted = ds.clone();
                    sorted.sort_unstable();
                    if sorted != (0..old.len() as i64).collect::<Vec<_>>() {
                        diag.error(span, format!("`.permute({ds:?})` is not a permutation of the tensor's {} dims", old.len()));
                        None
                    } else {
                        if on_chip && ds.first() != Some(&0) {
                            diag.error(span, "`.permute()` of an on-chip tensor must keep the partition dim (0) first");
                        }
                        Some(ds.iter().map(|&d| old[d as usize].clone()).collect())
                    }
                }
                _ => None,
            };
            Ty::Tensor(TensorTy { shape, ..t.clone() })
        }
        "squeeze_dim" => {
            let dim = int("dim");
            if on_chip && dim == Some(0) {
                diag.error(span, "`.squeeze_dim()` cannot remove the partition dim (dim 0) of an on-chip tensor");
            }
            let shape = t.shape.as_ref().and_then(|s| {
                let d = usize::try_from(dim?).ok()?;
                if let Some(n) = s.get(d)?.as_const().filter(|&n| n != 1) {
                    diag.error(span, format!("`.squeeze_dim({d})` removes a dim of size 1, but dim {d} has size {n}"));
                }
                let mut s = s.clone();
                s.remove(d);
                Some(s)
            });
            Ty::Tensor(TensorTy { shape, ..t.clone() })
        }
        "flatten_dims" => {
            let (a, b) = (int("start_dim"), int("end_dim"));
            if on_chip && a == Some(0) {
                diag.error(span, "`.flatten_dims()` of an on-chip tensor must start after the partition dim (start_dim > 0)");
            }
            let shape = t.shape.as_ref().and_then(|s| {
                let (a, b) = (usize::try_from(a?).ok()?, usize::try_from(b?).ok()?);
                let merged = s.get(a..=b)?;
                let size = known_product(merged).and_then(Result::ok).map_or(Val::unknown(), Val::konst);
                let mut s = s.clone();
                s.splice(a..=b, [size]);
                Some(s)
            });
            Ty::Tensor(TensorTy { shape, ..t.clone() })
        }
        "get_pattern" => t.shape.as_ref().map_or(Ty::Unknown, |dims| {
            Ty::List(dims.iter().map(|n| Ty::List(vec![Ty::Int(Val::unknown()), Ty::Int(n.clone())])).collect())
        }),
        "vector_select" => {
            let dim = int("dim");
            if dim.is_some_and(|d| d != 0) || on_chip {
                diag.error(span, "`.vector_select()` selects rows of dim 0 of an HBM tensor: dim must be 0 and the tensor in HBM");
            }
            let rows = match arg("vector_offset") {
                Some((Ty::Tensor(v), _)) => v.shape.as_ref().and_then(|s| s.first().cloned()),
                _ => None,
            };
            let shape = t.shape.as_ref().map(|s| {
                let mut s = s.clone();
                if let Some(first) = s.first_mut() {
                    *first = rows.unwrap_or_else(Val::unknown);
                }
                s
            });
            Ty::Tensor(TensorTy { shape, ..t.clone() })
        }
        "reshape_dim" => {
            let shape = arg("shape").and_then(|(st, _)| match st {
                Ty::Tuple(items) | Ty::List(items) => Some(items.iter().map(Ty::const_int).collect()),
                _ => None,
            });
            split_views::reshape_dim(diag, t, int("dim"), shape, on_chip, span)
        }
        "rearrange" => {
            let pattern = |n: &str| arg(n).and_then(|(_, e)| split_views::literal_pattern(e));
            // Sizes that are not (name, size) pairs are reported by their kind check.
            let fixed: Option<Vec<(&str, Option<i64>)>> = match arg("fixed_sizes") {
                None => Some(Vec::new()),
                Some((ty, e)) => split_views::literal_sizes(e, ty),
            };
            match (pattern("src_pattern"), pattern("dst_pattern"), fixed) {
                (Some(src), Some(dst), Some(fixed)) => split_views::rearrange(diag, t, &src, &dst, &fixed, on_chip, span),
                _ => Ty::Tensor(TensorTy { shape: None, ..t.clone() }),
            }
        }
        "broadcast" | "expand_dim" | "select" | "slice" => {
            let dim = int("dim");
            if on_chip && dim == Some(0) {
                diag.error(span, format!("`.{name}()` cannot act on the partition dim (dim 0) of an on-chip tensor"));
            }
            if name == "slice"
                && let (Some(a), Some(b)) = (int("start"), int("end"))
                && b.checked_sub(a).is_none()
            {
                diag.error(span, format!("integer overflow: the length `{b} - {a}` of this slice does not fit in an i64"));
            }
            let shape = t.shape.as_ref().and_then(|s| {
                let d = usize::try_from(dim?).ok()?;
                let mut s = s.clone();
                match name {
                    "broadcast" => *s.get_mut(d)? = int("size").map_or(Val::unknown(), Val::konst),
                    "expand_dim" => s.insert(d.min(s.len()), Val::konst(1)),
                    "select" => {
                        s.get(d)?;
                        s.remove(d);
                    }
                    _ => {
                        let len = match (int("start"), int("end"), int("step").unwrap_or(1)) {
                            (Some(a), Some(b), st) if st > 0 => {
                                b.checked_sub(a).map_or(Val::unknown(), |len| Val::konst(slice_len(len, st)))
                            }
                            _ => Val::unknown(),
                        };
                        *s.get_mut(d)? = len;
                    }
                }
                Some(s)
            });
            Ty::Tensor(TensorTy { shape, ..t.clone() })
        }
        _ => Ty::Unknown,
    };
    if let Ty::Tensor(TensorTy { shape: Some(dims), .. }) = &result {
        countable(diag, dims, span);
    }
    result
}
