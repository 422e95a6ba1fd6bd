//! Rules of the `nki.language` calls that allocate, index and move tensors:
//! `nl.ndarray` (and its `address=`), `nl.ds`, `nl.load`, `nl.store`.

use crate::ast::{Expr, ExprKind, Space, Spn};
use crate::check::operands::{countable, dtype_bytes, same_count, shape_of};
use crate::check::site::CallSite;
use crate::check::types::{TensorTy, Ty, known_product};
use crate::check::value::Val;
use crate::diag::Diagnostics;

/// The element expressions of a tuple / list literal argument.
fn elements(e: &Expr) -> Option<&[Expr]> {
    match &e.kind {
        ExprKind::Tuple(items) | ExprKind::List(items) => Some(items),
        _ => None,
    }
}

/// `nl.ndarray`: partition dim within pmax, PSUM tiles within one bank, dims
/// positive; returns the tensor type.
pub fn ndarray(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let shape = site.arg("shape").and_then(shape_of);
    let dtype = match site.arg("dtype").map(|a| &a.ty) {
        Some(Ty::Dtype(d)) => *d,
        _ => None,
    };
    let buffer = match site.arg("buffer").map(|a| &a.ty) {
        None => Some("sbuf"),
        Some(Ty::Buffer(b)) => *b,
        _ => None,
    };
    let space = buffer.map(|b| match b {
        "sbuf" => Space::Sbuf,
        "psum" => Space::Psum,
        _ => Space::Hbm,
    });
    if let (Some(dims), Some(arg)) = (&shape, site.arg("shape")) {
        let spans: Vec<Spn> = elements(arg.expr).map(|es| es.iter().map(|e| e.span).collect()).unwrap_or_default();
        let span_of = |i: usize| spans.get(i).copied().unwrap_or(arg.expr.span);
        if dims.is_empty() {
            diag.error(arg.expr.span, "a tensor needs at least one dim");
        }
        countable(diag, dims, arg.expr.span);
        for (i, d) in dims.iter().enumerate() {
            if let Some(v) = d.as_const().filter(|&v| v < 1) {
                diag.error(span_of(i), format!("dim {i} is {v}; every dim of a tensor must be at least 1"));
            }
        }
        if let (Some(sp @ (Space::Sbuf | Space::Psum)), Some(p)) = (space, dims.first().and_then(Val::as_const)) {
            let pmax = site.hw.pmax as i64;
            if p > pmax {
                diag.error(
                    span_of(0),
                    format!(
                        "partition dim {p} exceeds pmax = {pmax}: dim 0 of {} tensor is the partition dim, so it holds at most {pmax} rows (tile the data into chunks of {pmax})",
                        sp.with_article()
                    ),
                );
            }
        }
        // In i128, a free size that fits an i64 times a few bytes cannot overflow.
        let free: Option<i128> = dims.get(1..).and_then(known_product).and_then(Result::ok).map(i128::from);
        if let (Some(Space::Psum), Some(f), Some(dt)) = (space, free, dtype) {
            let bytes = f * i128::from(dtype_bytes(dt));
            let cap = site.hw.psum_bytes_per_partition() as i128;
            if bytes > cap {
                diag.error(
                    arg.expr.span,
                    format!(
                        "PSUM tensor of {f} {dt} elements per partition needs {bytes} bytes, more than the {cap} bytes of PSUM a partition holds on {} ({} banks of {} bytes)",
                        site.target, site.hw.psum_banks, site.hw.psum_bank_bytes
                    ),
                );
            }
        }
        if let (Some(Space::Sbuf), Some(f), Some(dt)) = (space, free, dtype) {
            let bytes = f * i128::from(dtype_bytes(dt));
            let cap = site.hw.sbuf_bytes_per_partition as i128;
            if bytes > cap {
                diag.error(
                    arg.expr.span,
                    format!("SBUF tile needs {bytes} bytes per partition, more than the {cap} bytes a partition holds on {}", site.target),
                );
            }
        }
    }
    address(diag, site, space, shape.as_deref(), dtype);
    // A shape whose element count overflowed is in error already: forget it, so
    // values built from the tensor stay small.
    let shape = shape.filter(|d| !matches!(known_product(d), Some(Err(_))));
    Ty::Tensor(TensorTy { space, shape, dtype })
}

/// The parts of an `address=(partition, byte)` known at compile time, checked as
/// the emulator checks the whole placement: non-negative, a PSUM byte offset at a
/// bank start, and the tensor inside the memory.
fn address(diag: &mut Diagnostics, site: &CallSite<'_>, space: Option<Space>, dims: Option<&[Val]>, dtype: Option<&str>) {
    let Some(arg) = site.arg("address") else { return };
    let Ty::Tuple(items) = &arg.ty else { return };
    let known = |i: usize| match items.get(i) {
        Some(Ty::Int(v)) => v.as_const(),
        _ => None,
    };
    let (p, b) = (known(0), known(1));
    if p.is_some_and(|v| v < 0) || b.is_some_and(|v| v < 0) {
        diag.error(arg.expr.span, "the partition and byte offsets of an address must be non-negative");
        return;
    }
    let hw = site.hw;
    let parts = dims.and_then(|d| d.first()).and_then(Val::as_const);
    // In i128, two i64 offsets cannot overflow.
    if let (Some(p), Some(n)) = (p, parts)
        && i128::from(p) + i128::from(n) > hw.pmax as i128
    {
        diag.error(arg.expr.span, format!("the tensor's {n} partitions from partition {p} reach past the {} partitions", hw.pmax));
    }
    let (width, bank, memory) = match space {
        Some(Space::Psum) => (hw.psum_bytes_per_partition() as i128, Some(hw.psum_bank_bytes as i64), "PSUM"),
        Some(Space::Sbuf) => (hw.sbuf_bytes_per_partition as i128, None, "SBUF"),
        _ => return,
    };
    let Some(b) = b else { return };
    if let Some(bank) = bank.filter(|&k| b % k != 0) {
        diag.error(
            arg.expr.span,
            format!(
                "PSUM address byte {b} is not at a bank start: a PSUM tensor must start at the beginning of a bank (a multiple of {bank} B)"
            ),
        );
    }
    let free: Option<i128> = dims.and_then(|d| d.get(1..)).and_then(known_product).and_then(Result::ok).map(i128::from);
    if let (Some(f), Some(dt)) = (free, dtype) {
        let end = i128::from(b) + f * i128::from(dtype_bytes(dt));
        if end > width {
            diag.error(
                arg.expr.span,
                format!(
                    "the tensor's bytes from byte {b} end at byte {end}, past the {width} B of a {memory} partition on {}",
                    site.target
                ),
            );
        }
    }
}

/// `nl.ds(start, size)`: an index value; a size known to be below 1 selects nothing.
pub fn ds(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let int = |name: &str| match site.arg(name).map(|a| &a.ty) {
        Some(Ty::Int(v)) => v.clone(),
        _ => Val::unknown(),
    };
    let (start, size) = (int("start"), int("size"));
    if let (Some(n), Some(a)) = (size.as_const(), site.arg("size"))
        && n < 1
    {
        diag.error(a.expr.span, format!("nl.ds selects `size` elements, which must be at least 1, not {n}"));
    }
    Ty::Slice(start, size)
}

/// `nl.store`: as `dma_copy`, from `value`.
pub fn store(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    same_count(diag, site, "value")
}

/// `nl.load`: a new SBUF tile of `src`'s shape, `dtype` or `src`'s dtype, at most `pmax` partitions.
pub fn load(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let Some((s, ss)) = site.tensor("src") else { return Ty::Tensor(TensorTy { space: Some(Space::Sbuf), ..Default::default() }) };
    if let Some(p) = s.partitions()
        && p > site.hw.pmax as i64
    {
        diag.error(
            ss,
            format!(
                "nl.load of {} makes an SBUF tile of {p} partitions, more than pmax = {}; load it in blocks",
                site.label("src"),
                site.hw.pmax
            ),
        );
    }
    let dtype = match site.arg("dtype").map(|a| &a.ty) {
        Some(Ty::Dtype(d)) => *d,
        _ => s.dtype,
    };
    Ty::Tensor(TensorTy { space: Some(Space::Sbuf), shape: s.shape.clone(), dtype })
}
