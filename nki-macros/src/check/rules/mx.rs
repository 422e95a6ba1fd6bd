//! Rules of the MX instructions `quantize_mx` and `nc_matmul_mx`: dtypes,
//! quadrant-multiple partitions, and the shapes the 8-partition x 4-element
//! scale groups imply.

use crate::check::site::CallSite;
use crate::check::types::Ty;
use crate::diag::Diagnostics;
use nki_spec::mx::{GROUP_ELEMENTS, GROUP_PARTITIONS, QUADRANT, scale_partitions};

const PACKED_FP8: [&str; 2] = ["float8_e5m2_x4", "float8_e4m3fn_x4"];
const PACKED: [&str; 3] = ["float8_e5m2_x4", "float8_e4m3fn_x4", "float4_e2m1fn_x4"];
const SCALES: [&str; 2] = ["float8_e8m0fnu", "uint8"];

/// Reports a tile `role` of a known dtype outside `allowed`.
fn dtype_in(diag: &mut Diagnostics, site: &CallSite<'_>, role: &str, allowed: &[&str]) {
    if let Some((t, sp)) = site.tensor(role)
        && let Some(d) = t.dtype
        && !allowed.contains(&d)
    {
        let names: Vec<String> = allowed.iter().map(|a| format!("nl.{a}")).collect();
        diag.error(sp, format!("{} of {} must be {}, not nl.{d}", site.label(role), site.spec.py, names.join(" or ")));
    }
}

/// The known (partitions, free size) of `role`.
fn dims(site: &CallSite<'_>, role: &str) -> (Option<i64>, Option<i64>) {
    site.tensor(role).map_or((None, None), |(t, _)| (t.partitions(), t.free_size()))
}

/// Reports a tile `role` whose known shape is not `want` (unknown parts skipped).
fn shaped(diag: &mut Diagnostics, site: &CallSite<'_>, role: &str, want: (Option<i64>, Option<i64>), why: &str) {
    let Some((_, sp)) = site.tensor(role) else { return };
    let (p, f) = dims(site, role);
    let bad = |got: Option<i64>, want: Option<i64>| matches!((got, want), (Some(g), Some(w)) if g != w);
    if bad(p, want.0) || bad(f, want.1) {
        let show = |v: Option<i64>| v.map_or("?".to_string(), |v| v.to_string());
        diag.error(
            sp,
            format!(
                "{} of {} is {} x {}; it must be {} x {} ({why})",
                site.label(role),
                site.spec.py,
                show(p),
                show(f),
                show(want.0),
                show(want.1)
            ),
        );
    }
}

/// Reports a scale tile `role` of known shape that cannot hold the scales of
/// `data` partitions x `cols` columns: exactly `cols` elements, and at least
/// the partitions the quadrant placement of the groups' scales spans.
fn scales(diag: &mut Diagnostics, site: &CallSite<'_>, role: &str, data: Option<i64>, cols: Option<i64>) {
    let Some((_, sp)) = site.tensor(role) else { return };
    let (p, f) = dims(site, role);
    let need = data.map(|d| scale_partitions(d.max(0) as usize / GROUP_PARTITIONS) as i64);
    let short = matches!((p, need), (Some(p), Some(n)) if p < n);
    let wrong = matches!((f, cols), (Some(f), Some(c)) if f != c);
    if short || wrong {
        let show = |v: Option<i64>| v.map_or("?".to_string(), |v| v.to_string());
        diag.error(
            sp,
            format!(
                "{} of {} is {} x {}; it must be at least {} partitions x {} (one scale per 8 partitions x 4 elements, kept in \
                 the group's quadrant: group g at row 32 (g / 4) + g % 4)",
                site.label(role),
                site.spec.py,
                show(p),
                show(f),
                show(need),
                show(cols)
            ),
        );
    }
}

/// Reports a known partition count of `role` that is not a multiple of 32.
fn quadrants(diag: &mut Diagnostics, site: &CallSite<'_>, role: &str) {
    if let (Some((_, sp)), (Some(p), _)) = (site.tensor(role), dims(site, role))
        && p % QUADRANT as i64 != 0
    {
        diag.error(sp, format!("{} of {} has {p} partitions; MX operands have a multiple of {QUADRANT}", site.label(role), site.spec.py));
    }
}

/// `quantize_mx`: fp16/bf16 in, fp8 x4 out, scales of 8 x 4 groups.
pub fn quantize(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    dtype_in(diag, site, "src", &["float16", "bfloat16"]);
    dtype_in(diag, site, "dst", &PACKED_FP8);
    dtype_in(diag, site, "dst_scale", &SCALES);
    quadrants(diag, site, "src");
    let (p, f) = dims(site, "src");
    if let (Some((_, sp)), Some(f)) = (site.tensor("src"), f)
        && f % GROUP_ELEMENTS as i64 != 0
    {
        diag.error(
            sp,
            format!(
                "{} of nisa.quantize_mx holds {f} elements per partition; it must hold a multiple of {GROUP_ELEMENTS}",
                site.label("src")
            ),
        );
    }
    let cols = f.map(|f| f / GROUP_ELEMENTS as i64);
    shaped(diag, site, "dst", (p, cols), "src's partitions, a quarter of its elements: four per packed value");
    scales(diag, site, "dst_scale", p, cols);
    Ty::Unit
}

/// `nc_matmul_mx`: packed operands sharing a quadrant-multiple partition
/// count, an even stationary free size of at most 128, scales per group, a
/// float32 / bfloat16 dst of stationary free x moving free.
pub fn matmul(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    dtype_in(diag, site, "stationary", &PACKED);
    dtype_in(diag, site, "moving", &PACKED);
    dtype_in(diag, site, "stationary_scale", &SCALES);
    dtype_in(diag, site, "moving_scale", &SCALES);
    dtype_in(diag, site, "dst", &["float32", "bfloat16"]);
    quadrants(diag, site, "stationary");
    let ((k, m), (_, n)) = (dims(site, "stationary"), dims(site, "moving"));
    shaped(diag, site, "moving", (k, None), "the contraction runs over stationary's partitions");
    if let (Some((_, sp)), Some(m)) = (site.tensor("stationary"), m)
        && (m % 2 != 0 || m > 128)
    {
        diag.error(sp, format!("{} of nisa.nc_matmul_mx has free size {m}; it must be even and at most 128", site.label("stationary")));
    }
    scales(diag, site, "stationary_scale", k, m);
    scales(diag, site, "moving_scale", k, n);
    shaped(diag, site, "dst", (m, n), "stationary free x moving free");
    Ty::Unit
}
