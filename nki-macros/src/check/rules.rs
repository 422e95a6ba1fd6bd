//! The static hardware rules of individual ops, checked whenever the shapes,
//! memory spaces or constants involved are known at compile time. Whatever is not
//! known here is checked by the emulator at run time.

use super::types::{TensorTy, Ty, dims_text, known_product};
use super::value::Val;
use super::{ArgInfo, CallSite, Check};
use crate::ast::{Expr, ExprKind, Space, Spn};
use crate::diag::Diagnostics;
use nki_spec::Rule;

/// Bytes per element of an `nl` dtype.
pub(super) fn dtype_bytes(name: &str) -> i64 {
    match name {
        "float32" | "tfloat32" | "int32" | "uint32" | "float8_e5m2_x4" | "float8_e4m3fn_x4" => 4,
        "bfloat16" | "float16" | "int16" | "uint16" | "float4_e2m1fn_x4" => 2,
        _ => 1,
    }
}

/// The element expressions of a tuple / list literal argument.
fn elements(e: &Expr) -> Option<&[Expr]> {
    match &e.kind {
        ExprKind::Tuple(items) | ExprKind::List(items) => Some(items),
        _ => None,
    }
}

/// Reports a shape whose element count does not fit an i64.
pub(super) fn countable(diag: &mut Diagnostics, dims: &[Val], span: Spn) {
    if let Some(Err(_)) = known_product(dims) {
        diag.error(span, format!("integer overflow: a tensor of shape {} has more elements than fit in an i64", dims_text(dims)));
    }
}

/// The static shape of a shape argument (`(a, b)`, `[a, b]`, or `t.shape()`).
pub(super) fn shape_of(arg: &ArgInfo<'_>) -> Option<Vec<Val>> {
    match &arg.ty {
        Ty::Tuple(items) | Ty::List(items) => {
            Some(items.iter().map(|t| if let Ty::Int(v) = t { v.clone() } else { Val::unknown() }).collect())
        }
        Ty::Shape(dims) => dims.clone(),
        _ => None,
    }
}

/// The check a spec row's rule id names.
pub fn rule(r: Rule) -> Check {
    match r {
        Rule::DmaCopy => dma_copy,
        Rule::DmaTranspose => super::dma_transpose::check,
        Rule::DmaCompute => super::dma_compute::check,
        Rule::Sendrecv => super::sendrecv::check,
        Rule::SameTileDstSrc => same_tile_dst_src,
        Rule::SameTileDstData => same_tile_dst_data,
        Rule::NcMatmul => nc_matmul,
        Rule::NcTranspose => nc_transpose,
        Rule::TensorTensor => tensor_tensor,
        Rule::TensorReduce => tensor_reduce,
        Rule::AffineSelect => affine_select,
        Rule::RangeSelect => range_select,
        Rule::Ndarray => ndarray,
        Rule::BnStats => super::stats::bn_stats,
        Rule::BnAggr => super::stats::bn_aggr,
        Rule::Ds => ds,
        Rule::Max8 => super::top8::max8,
        Rule::FindIndex8 => super::top8::find_index8,
        Rule::MatchReplace8 => super::top8::match_replace8,
        Rule::TensorTensorScan => tensor_tensor_scan,
        Rule::PartitionReduce => super::partition_reduce::check,
        Rule::Topk => super::topk::check,
        Rule::Activate2 => super::activate2::check,
        Rule::QuantizeMx => super::mx::quantize,
        Rule::MatmulMx => super::mx::matmul,
        Rule::CopyPredicated => super::select::copy_predicated,
        Rule::SelectReduce => super::select::select_reduce,
        Rule::Nonzero => super::gather::nonzero_with_count,
        Rule::NGather => super::gather::nc_n_gather,
        Rule::LocalGather => super::gather::local_gather,
        Rule::Rng => super::random::rng,
        Rule::Rand2 => super::random::rand2,
        Rule::Dropout => super::random::dropout,
        Rule::SetRngSeed => super::random::set_rng_seed,
        Rule::RandState => super::random::rand_state,
        Rule::SequenceBounds => super::random::sequence_bounds,
        Rule::NlDropout => super::random::nl_dropout,
        Rule::Load => load,
        Rule::Store => store,
        Rule::NlElementwise => super::nl_tiles::elementwise,
        Rule::NlMatmul => super::nl_tiles::matmul,
        Rule::NlTranspose => super::nl_tiles::transpose,
        Rule::NlReduce => super::nl_tiles::reduce,
        Rule::NlWhere => super::nl_tiles::where_,
        Rule::NlNormalize => super::nl_tiles::normalize,
        Rule::NlLike => super::nl_tiles::like,
        Rule::NlExpandDims => super::nl_tiles::expand_dims,
        Rule::NlBroadcastTo => super::nl_tiles::broadcast_to,
        Rule::NlGatherFlattened => super::nl_tiles::gather_flattened,
        Rule::NlLoadTranspose2d => super::nl_tiles::load_transpose2d,
        Rule::NlIdentity => super::nl_tiles::identity,
        Rule::NlSharedConstant => super::constant::check,
        Rule::Collective => super::collectives::collective,
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

fn geometry(t: &TensorTy) -> (Option<i64>, Option<i64>) {
    (t.partitions(), t.free_size())
}

/// Reports when two tiles' partition counts or free sizes are known to differ.
pub(super) fn same_geometry(diag: &mut Diagnostics, site: &CallSite<'_>, a: &str, b: &str) {
    let (Some((ta, _)), Some((tb, sb))) = (site.tensor(a), site.tensor(b)) else {
        return;
    };
    let ((pa, fa), (pb, fb)) = (geometry(ta), geometry(tb));
    let mismatch = matches!((pa, pb), (Some(x), Some(y)) if x != y) || matches!((fa, fb), (Some(x), Some(y)) if x != y);
    if mismatch {
        diag.error(
            sb,
            format!(
                "{} of {} has shape {} ({} partitions x {} elements) but {} has shape {} ({} x {}); the op needs equal partition counts and elements per partition",
                site.label(b),
                site.spec.py,
                tb.shape_text(),
                pb.map_or("?".into(), |v| v.to_string()),
                fb.map_or("?".into(), |v| v.to_string()),
                site.label(a),
                ta.shape_text(),
                pa.map_or("?".into(), |v| v.to_string()),
                fa.map_or("?".into(), |v| v.to_string()),
            ),
        );
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

/// `dst` and `data` of an element-wise op have the same geometry.
pub fn same_tile_dst_data(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    same_geometry(diag, site, "dst", "data");
    Ty::Unit
}

/// `dst` and `src` of a copy have the same geometry.
pub fn same_tile_dst_src(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    same_geometry(diag, site, "dst", "src");
    Ty::Unit
}

/// Equal geometry of the inputs `a`, `b` and `dst`; at most one input in PSUM.
pub(super) fn two_inputs(diag: &mut Diagnostics, site: &CallSite<'_>, a: &str, b: &str) -> Ty {
    same_geometry(diag, site, a, b);
    same_geometry(diag, site, a, "dst");
    if let (Some((ta, _)), Some((tb, sb))) = (site.tensor(a), site.tensor(b))
        && ta.space == Some(Space::Psum)
        && tb.space == Some(Space::Psum)
    {
        diag.error(
            sb,
            format!("{a} and {b} of {} are both in PSUM; at most one input may be in PSUM (copy one to SBUF first)", site.spec.py),
        );
    }
    Ty::Unit
}

/// `tensor_tensor`: equal geometry of all three tiles; at most one input in PSUM.
pub fn tensor_tensor(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    two_inputs(diag, site, "data1", "data2")
}

/// `tensor_tensor_scan`: as `tensor_tensor`, for `data0` and `data1`.
pub fn tensor_tensor_scan(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    two_inputs(diag, site, "data0", "data1")
}

/// `dma_copy`: equal element counts when known.
pub fn dma_copy(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    same_count(diag, site, "src")
}

/// `nl.store`: as `dma_copy`, from `value`.
pub fn store(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    same_count(diag, site, "value")
}

/// Reports when `dst` and `src` are known to hold different element counts.
fn same_count(diag: &mut Diagnostics, site: &CallSite<'_>, src: &str) -> Ty {
    let (Some((d, _)), Some((s, ss))) = (site.tensor("dst"), site.tensor(src)) else {
        return Ty::Unit;
    };
    let count = |t: &TensorTy| known_product(t.shape.as_ref()?)?.ok();
    if let (Some(a), Some(b)) = (count(d), count(s))
        && a != b
    {
        diag.error(
            ss,
            format!(
                "{} moves {b} elements from {} into {a} elements of {}; the counts must match",
                site.spec.py,
                site.label(src),
                site.label("dst")
            ),
        );
    }
    Ty::Unit
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

/// `nc_matmul`: operands contract over equal partition counts, stationary free ≤
/// 128, moving free ≤ the generation's moving limit, dst shaped (M, N).
pub fn nc_matmul(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let reported = diag.count();
    let st = site.tensor("stationary");
    let mv = site.tensor("moving");
    if let (Some((s, _)), Some((m, ms))) = (st, mv)
        && let (Some(ks), Some(km)) = (s.partitions(), m.partitions())
        && ks != km
    {
        diag.error(
            ms,
            format!(
                "matmul operands contract over their partition dim: stationary {} has {ks} partitions {} but moving {} has {km} {}",
                site.label("stationary"),
                s.shape_text(),
                site.label("moving"),
                m.shape_text()
            ),
        );
    }
    if let Some((s, ss)) = st
        && let Some(f) = s.free_size()
        && f > site.hw.gemm_stationary_fmax as i64
    {
        diag.error(
            ss,
            format!(
                "stationary {} has free size {f} > gemm_stationary_fmax = {}: the stationary operand covers at most 128 columns",
                site.label("stationary"),
                site.hw.gemm_stationary_fmax
            ),
        );
    }
    if let Some((m, ms)) = mv
        && let Some(f) = m.free_size()
        && f > site.hw.gemm_moving_fmax as i64
    {
        diag.error(
            ms,
            format!(
                "moving {} has free size {f} > gemm_moving_fmax = {} on {}: one matmul writes at most one PSUM bank of {} fp32 per partition",
                site.label("moving"),
                site.hw.gemm_moving_fmax,
                site.target,
                site.hw.gemm_moving_fmax
            ),
        );
    }
    // A dst mismatch that only follows from an operand already reported is not repeated.
    if diag.count() > reported {
        return Ty::Unit;
    }
    if let (Some((d, ds)), Some((s, _)), Some((m, _))) = (site.tensor("dst"), st, mv)
        && let Some(dims) = &d.shape
    {
        let (dp, df) = (d.partitions(), d.free_size());
        let transpose = matches!(site.arg("is_transpose").map(|a| &a.expr.kind), Some(ExprKind::Bool(true)));
        let want_f = if transpose { s.partitions() } else { m.free_size() };
        let bad = matches!((dp, s.free_size()), (Some(a), Some(b)) if a != b) || matches!((df, want_f), (Some(a), Some(b)) if a != b);
        if bad && !dims.is_empty() {
            diag.error(
                ds,
                format!(
                    "dst {} has shape {} but stationaryᵀ·moving is [{}, {}] (stationary free size x moving free size)",
                    site.label("dst"),
                    d.shape_text(),
                    s.free_size().map_or("?".into(), |v| v.to_string()),
                    want_f.map_or("?".into(), |v| v.to_string())
                ),
            );
        }
    }
    Ty::Unit
}

/// `nc_transpose`: dst is data's partitions and free elements swapped.
pub fn nc_transpose(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let (Some((d, ds)), Some((x, _))) = (site.tensor("dst"), site.tensor("data")) else {
        return Ty::Unit;
    };
    let ((dp, df), (xp, xf)) = (geometry(d), geometry(x));
    if matches!((dp, xf), (Some(a), Some(b)) if a != b) || matches!((df, xp), (Some(a), Some(b)) if a != b) {
        diag.error(
            ds,
            format!(
                "nc_transpose of {} {} needs a dst with its partitions and free elements swapped, but dst is {}",
                site.label("data"),
                x.shape_text(),
                d.shape_text()
            ),
        );
    }
    Ty::Unit
}

/// `tensor_reduce`: never the partition dim.
pub fn tensor_reduce(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    if let Some(a) = site.arg("axis") {
        let axes: Vec<Option<i64>> = match &a.ty {
            Ty::Int(v) => vec![v.as_const()],
            Ty::Tuple(items) | Ty::List(items) => items.iter().map(Ty::const_int).collect(),
            _ => Vec::new(),
        };
        if axes.contains(&Some(0)) {
            diag.error(a.expr.span, "tensor_reduce cannot reduce axis 0, the partition dim; reduce free dims (1, 2, ...) instead");
        }
    }
    Ty::Unit
}

/// `affine_select`: dst and on_true_tile alike.
pub fn affine_select(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    same_geometry(diag, site, "dst", "on_true_tile");
    Ty::Unit
}

/// `range_select`: the fill value is fixed by the hardware.
pub fn range_select(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    same_geometry(diag, site, "dst", "on_true_tile");
    if let Some(a) = site.arg("on_false_value") {
        let v = match &a.expr.kind {
            ExprKind::Float(v) => Some(*v),
            ExprKind::Unary(crate::ast::UnOp::Neg, x) => match x.kind {
                ExprKind::Float(v) => Some(-v),
                _ => None,
            },
            ExprKind::Path(p) if p == &["f32", "MIN"] => Some(f32::MIN as f64),
            _ => None,
        };
        if let Some(v) = v.filter(|&v| v as f32 != f32::MIN) {
            diag.error(a.expr.span, format!("range_select's on_false_value must be FLOAT32_MIN (f32::MIN = -3.4028235e38), the only fill the hardware supports; got {v:e}"));
        }
    }
    Ty::Unit
}
