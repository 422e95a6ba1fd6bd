//! `nki tune KERNEL --PARAM v1,v2,... [--PARAM VALUE ...]`: profiles every
//! variant of a grid of a registered kernel's tunable parameters (scalars,
//! dtypes, enum members, bools, and the `--lnc` / `--precision` launch flags
//! given as comma-separated lists), checks that each variant's outputs equal
//! the first variant's within a tolerance, and ranks the variants by their
//! estimated time with each one's bottleneck engine (`--json` for one JSON
//! object; `--trace FILE` writes the fastest variant's timeline).
//!
//! A variant the kernel refuses (a tile size that does not divide the shape,
//! a value out of range) is listed with the reason and left out of the
//! ranking; a variant whose outputs differ from the first's fails the command
//! after the ranking is printed, since a faster kernel that computes something
//! else is no improvement.

use super::generic::args::{self, Invocation, flag_of};
use super::generic::prepare;
use super::output_plan::STATUS_TO_STDERR;
use super::profile::{Report, take_report_flags, write_atomically};
use super::{CliError, deadline};
use clap::Args;
use nki::emit::{FunctionInfo, ParamKind};
use nki::io::json;
use nki::profile::{Profile, Target, Unit, human_time};
use nki::{Allocator, Launch, Tensor};
use std::sync::atomic::Ordering;

/// Arguments of `nki tune`.
#[derive(Args)]
pub struct TuneArgs {
    /// `KERNEL --PARAM v1,v2,... [--PARAM VALUE ...]`: a registered kernel (`nki
    /// list`) and its flags as `nki profile` takes them, a comma-separated list
    /// for each tuned parameter; `--tolerance T` (default 0.01) bounds each
    /// variant's largest output difference from the first variant's, relative
    /// to the first's largest magnitude; `--target`, `--allocator`, `--json` and
    /// `--trace FILE` (the fastest variant's timeline) as for `nki profile`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true, value_name = "KERNEL FLAGS")]
    raw: Vec<String>,
}

/// The default `--tolerance`: bf16-level, room for the different rounding of a
/// different tiling or accumulation order at hardware precision.
const DEFAULT_TOLERANCE: f64 = 1e-2;

/// The most variants one grid may hold: each is a whole emulated run.
const MAX_VARIANTS: usize = 256;

/// One tuned flag: where its value list sits among the flags, and its values.
#[derive(Debug, PartialEq)]
struct Axis {
    /// The flag as given (`--tiles-m`).
    flag: String,
    /// Index of the token holding the value list.
    token: usize,
    /// What precedes the values in that token (`--tiles-m=` for an inline value).
    prefix: String,
    /// The values, in the order given.
    values: Vec<String>,
}

/// Whether a kernel parameter, or launch flag, named `name` can be tuned:
/// scalars, dtypes, enum members and bools, and the launch's LNC and precision.
fn tunable(kernel: &FunctionInfo, name: &str) -> bool {
    match kernel.params.iter().find(|p| p.name == name) {
        Some(p) => matches!(p.kind, ParamKind::Int | ParamKind::Float | ParamKind::Bool | ParamKind::Dtype | ParamKind::Enum { .. }),
        None => matches!(name, "lnc" | "precision"),
    }
}

/// The grid's axes: every tunable flag whose value is a comma-separated list.
fn axes(kernel: &FunctionInfo, flags: &[String]) -> Result<Vec<Axis>, String> {
    let mut found = Vec::new();
    let mut i = 0;
    while i < flags.len() {
        let Some(body) = flags[i].strip_prefix("--") else {
            i += 1;
            continue;
        };
        let (name, token, prefix) = match body.split_once('=') {
            Some((n, _)) => (n, i, format!("--{n}=")),
            None if flags.get(i + 1).is_some_and(|v| !v.starts_with("--")) => (body, i + 1, String::new()),
            None => {
                i += 1;
                continue;
            }
        };
        let value = flags[token].strip_prefix(&prefix).unwrap_or(&flags[token]);
        if value.contains(',') && tunable(kernel, &name.replace('-', "_")) {
            let values: Vec<String> = value.split(',').map(|v| v.trim().to_string()).collect();
            let flag = flag_of(&name.replace('-', "_"));
            if values.iter().any(String::is_empty) {
                return Err(format!("{flag} {value}: an empty value in the list"));
            }
            if let Some(v) = values.iter().enumerate().find_map(|(j, v)| values[..j].contains(v).then_some(v)) {
                return Err(format!("{flag} {value}: {v} is listed twice"));
            }
            found.push(Axis { flag, token, prefix, values });
        }
        i = token + 1;
    }
    Ok(found)
}

/// Every combination of the axes' values, the first axis slowest: each as the
/// flags to run it with and its label (`--tiles-m 2 --tiles-n 1`).
fn variants(flags: &[String], axes: &[Axis]) -> Result<Vec<(Vec<String>, String)>, String> {
    let count = axes.iter().try_fold(1usize, |n, a| n.checked_mul(a.values.len())).filter(|&n| n <= MAX_VARIANTS);
    let count = count.ok_or_else(|| format!("the grid holds more than {MAX_VARIANTS} variants; tune fewer values at once"))?;
    let mut out = Vec::with_capacity(count);
    for k in 0..count {
        let (mut tokens, mut label, mut rest) = (flags.to_vec(), Vec::new(), k);
        for a in axes.iter().rev() {
            let v = &a.values[rest % a.values.len()];
            rest /= a.values.len();
            tokens[a.token] = format!("{}{v}", a.prefix);
            label.push(format!("{} {v}", a.flag));
        }
        label.reverse();
        out.push((tokens, label.join(" ")));
    }
    Ok(out)
}

/// How far `got` is from `want`: the largest absolute difference over their
/// largest magnitude (the difference itself when `want` is all zeros); infinite
/// when their counts, shapes or NaNs differ.
fn relative_difference(got: &[Vec<Tensor>], want: &[Vec<Tensor>]) -> f64 {
    let same_shapes = got.len() == want.len()
        && got.iter().zip(want).all(|(g, w)| g.len() == w.len() && g.iter().zip(w).all(|(a, b)| a.shape() == b.shape()));
    if !same_shapes {
        return f64::INFINITY;
    }
    let (mut diff, mut scale) = (0.0f64, 0.0f64);
    for (a, b) in got.iter().flatten().zip(want.iter().flatten()) {
        for (x, y) in a.to_f32_vec().into_iter().zip(b.to_f32_vec()) {
            let (x, y) = (f64::from(x), f64::from(y));
            let d = match (x.is_nan(), y.is_nan()) {
                (true, true) => 0.0,
                (false, false) if x == y => 0.0,
                (false, false) => (x - y).abs(),
                _ => f64::INFINITY,
            };
            diff = diff.max(d);
            if y.is_finite() {
                scale = scale.max(y.abs());
            }
        }
    }
    if scale > 0.0 { diff / scale } else { diff }
}

/// One profiled variant.
struct Tuned {
    label: String,
    profile: Profile,
    difference: f64,
}

/// The options `nki tune` takes beside the kernel's flags.
struct Options {
    report: Report,
    tolerance: f64,
}

/// Takes `--tolerance`, `--target`, `--json` and `--trace` out of the flags.
fn take_options(raw: &[String]) -> Result<(Options, Vec<String>), CliError> {
    let (report, raw) = take_report_flags(Report { target: Target::Trn2, trace: None, json: false, allocator: Allocator::Default }, raw)?;
    let (mut tolerance, mut rest) = (DEFAULT_TOLERANCE, Vec::with_capacity(raw.len()));
    let mut it = raw.into_iter();
    while let Some(arg) = it.next() {
        let value = match arg.strip_prefix("--tolerance") {
            Some("") => it.next(),
            Some(inline) if inline.starts_with('=') => Some(inline[1..].to_string()),
            _ => {
                rest.push(arg);
                continue;
            }
        };
        let parsed = value.as_deref().and_then(|v| v.parse::<f64>().ok()).filter(|t| t.is_finite() && *t >= 0.0);
        tolerance = parsed.ok_or_else(|| CliError::usage("--tolerance needs a value: a finite number ≥ 0"))?;
    }
    Ok((Options { report, tolerance }, rest))
}

/// Profiles every variant of the grid, then ranks them.
pub fn run(args: &TuneArgs) -> Result<(), CliError> {
    let (options, raw) = take_options(&args.raw)?;
    let (name, flags) =
        raw.split_first().ok_or_else(|| CliError::usage(format!("a kernel name is required (`{} list` shows them)", super::program())))?;
    let kernel = args::find_kernel(name).map_err(CliError::usage)?;
    STATUS_TO_STDERR.store(options.report.json, Ordering::Relaxed);
    let axes = axes(kernel, flags).map_err(CliError::usage)?;
    let grid = variants(flags, &axes).map_err(CliError::usage)?;
    let mut tuned: Vec<Tuned> = Vec::with_capacity(grid.len());
    let mut refused: Vec<(String, String)> = Vec::new();
    let mut reference: Option<Vec<Vec<Tensor>>> = None;
    let mut timed = false;
    for (tokens, label) in grid {
        let inv = match args::parse(kernel, &tokens) {
            Ok(Some(inv)) => inv,
            Ok(None) => {
                outln!("{}", help(kernel));
                return Ok(());
            }
            Err(e) => {
                refused.push((label, e));
                continue;
            }
        };
        if inv.out.is_some() {
            return Err(CliError::usage("nki tune writes no outputs: leave out --out (`nki run` writes the chosen variant's)"));
        }
        // `--timeout` bounds the whole command: armed once, by the first variant that parses.
        if !timed {
            deadline::start(inv.timeout);
            timed = true;
        }
        match profile(&inv, &options.report) {
            Ok((outputs, profile)) => {
                let difference = reference.as_ref().map_or(0.0, |r| relative_difference(&outputs, r));
                eprintln!("{label}: {}", human_time(profile.report.estimated_seconds));
                reference.get_or_insert(outputs);
                tuned.push(Tuned { label, profile, difference });
            }
            Err(e) if e.code == super::error::USAGE => refused.push((label, e.message)),
            Err(e) => return Err(e),
        }
    }
    if tuned.is_empty() {
        let why = refused.first().map(|(l, e)| format!("{l}: {e}")).unwrap_or_default();
        return Err(CliError::usage(format!("{} refused every variant ({why})", kernel.name)));
    }
    let order = ranking(&tuned);
    if let Some(path) = &options.report.trace {
        write_atomically(path, &tuned[order[0]].profile.trace_json())?;
    }
    if options.report.json {
        outln!("{}", to_json(kernel, &options, &tuned, &order, &refused));
    } else {
        print_text(kernel, &options, &tuned, &order, &refused);
    }
    let differ: Vec<&str> = tuned.iter().filter(|t| t.difference > options.tolerance).map(|t| t.label.as_str()).collect();
    if !differ.is_empty() {
        return Err(CliError::failure(format!(
            "{} variant(s) compute different outputs than the first (beyond --tolerance {}): {}",
            differ.len(),
            options.tolerance,
            differ.join("; ")
        )));
    }
    Ok(())
}

/// Runs one variant on a profiled launch of `report`'s target and allocator: its
/// outputs and profile.
fn profile(inv: &Invocation, report: &Report) -> Result<(Vec<Vec<Tensor>>, Profile), CliError> {
    let base = Launch::new().allocator(report.allocator).profile(report.target);
    let outputs = prepare(inv, base.clone())?.launch(inv)?;
    let profile = base.profiled().map_err(|e| CliError::failure(e.to_string()))?;
    Ok((outputs, profile))
}

/// Indices of `tuned`, fastest first (grid order among equals).
fn ranking(tuned: &[Tuned]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..tuned.len()).collect();
    order.sort_by(|&a, &b| tuned[a].profile.report.estimated_seconds.total_cmp(&tuned[b].profile.report.estimated_seconds));
    order
}

/// The bottleneck engine of a variant and its busy fraction.
fn bottleneck(t: &Tuned) -> (Unit, f64) {
    let r = &t.profile.report;
    (r.bottleneck, r.busy(r.bottleneck))
}

fn print_text(kernel: &FunctionInfo, options: &Options, tuned: &[Tuned], order: &[usize], refused: &[(String, String)]) {
    let best = tuned[order[0]].profile.report.estimated_seconds;
    outln!(
        "{} on {}: {} variant{} ranked by estimated time; outputs checked against the first within {}",
        kernel.name,
        options.report.target,
        tuned.len(),
        if tuned.len() == 1 { "" } else { "s" },
        options.tolerance
    );
    outln!("{:>4}  {:>12}  {:>7}  {:<18}  {:>10}  variant", "rank", "time", "vs best", "bottleneck (busy)", "difference");
    for (rank, &i) in order.iter().enumerate() {
        let t = &tuned[i];
        let s = t.profile.report.estimated_seconds;
        let (unit, busy) = bottleneck(t);
        let verdict = if t.difference <= options.tolerance { format!("{:.1e}", t.difference) } else { "DIFFERS".to_string() };
        let engine = format!("{} ({:.0} %)", unit.name(), busy * 100.0);
        outln!("{:>4}  {:>12}  {:>6.2}x  {engine:<18}  {verdict:>10}  {}", rank + 1, human_time(s), s / best, t.label);
    }
    for (label, why) in refused {
        outln!("refused: {label}: {why}");
    }
}

fn to_json(kernel: &FunctionInfo, options: &Options, tuned: &[Tuned], order: &[usize], refused: &[(String, String)]) -> String {
    let ranked = json::array(order.iter().map(|&i| {
        let t = &tuned[i];
        let (unit, busy) = bottleneck(t);
        json::object([
            ("variant", json::string(&t.label)),
            ("estimated_seconds", json::number(t.profile.report.estimated_seconds)),
            ("bottleneck", json::string(unit.name())),
            ("bottleneck_busy", json::number(busy)),
            ("difference", json::number(t.difference)),
            ("agrees", (t.difference <= options.tolerance).to_string()),
            ("report", t.profile.report.to_json()),
        ])
    }));
    let refused = json::array(refused.iter().map(|(l, e)| json::object([("variant", json::string(l)), ("error", json::string(e))])));
    json::object([
        ("kernel", json::string(kernel.name)),
        ("target", json::string(&options.report.target.to_string())),
        ("tolerance", json::number(options.tolerance)),
        ("ranking", ranked),
        ("refused", refused),
    ])
}

/// `nki tune KERNEL --help`: the kernel's flags, and how a grid is given.
fn help(kernel: &FunctionInfo) -> String {
    let mut text = args::help(kernel, "tune");
    text += "\nTuning: give a scalar, dtype, enum, bool, --lnc or --precision flag a comma-separated list\n\
             (--tiles-m 1,2,4) to profile every combination; --tolerance T (default 0.01) bounds each\n\
             variant's output difference from the first's, relative to its largest magnitude;\n\
             --target, --allocator, --json and --trace FILE (the fastest variant's timeline) as for `nki profile`.\n";
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    // Linking the example kernels registers them.
    use nki_examples as _;

    fn flags(list: &[&str]) -> Vec<String> {
        list.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn lists_of_tunable_flags_make_the_grid() {
        let k = args::find_kernel("matmul_blocked").unwrap();
        let f = flags(&["--a-t", "a,b.npy", "--b", "b.npy", "--tiles-m", "1,2", "--tiles-n=1,2,4", "--lnc", "1"]);
        let found = axes(k, &f).unwrap();
        // A tensor path with a comma is a path, not a list.
        assert_eq!(found.iter().map(|a| a.flag.as_str()).collect::<Vec<_>>(), ["--tiles-m", "--tiles-n"]);
        let grid = variants(&f, &found).unwrap();
        assert_eq!(grid.len(), 6);
        assert_eq!(grid[0].1, "--tiles-m 1 --tiles-n 1");
        assert_eq!(grid[5].1, "--tiles-m 2 --tiles-n 4");
        assert_eq!(grid[1].0[4..6], ["--tiles-m".to_string(), "1".to_string()]);
        assert_eq!(grid[1].0[6], "--tiles-n=2");
        assert!(axes(k, &flags(&["--tiles-m", "1,,2"])).unwrap_err().contains("empty value"));
        assert!(axes(k, &flags(&["--tiles-m", "2,2"])).unwrap_err().contains("listed twice"));
        let lnc = axes(k, &flags(&["--lnc", "1,2"])).unwrap();
        assert_eq!(lnc[0].values, ["1", "2"]);
    }

    #[test]
    fn a_grid_too_large_is_refused() {
        let k = args::find_kernel("matmul_blocked").unwrap();
        let many = (1..=20).map(|v| v.to_string()).collect::<Vec<_>>().join(",");
        let f = flags(&["--tiles-m", &many, "--tiles-n", &many]);
        assert!(variants(&f, &axes(k, &f).unwrap()).unwrap_err().contains("more than 256"));
    }

    #[test]
    fn tolerance_is_read_anywhere() {
        let (o, rest) = take_options(&flags(&["--json", "k", "--tolerance", "0.5", "--x", "1"])).unwrap();
        assert_eq!((o.tolerance, o.report.json), (0.5, true));
        assert_eq!(rest, ["k", "--x", "1"]);
        assert_eq!(take_options(&flags(&["k", "--tolerance=0"])).unwrap().0.tolerance, 0.0);
        assert!(take_options(&flags(&["k", "--tolerance", "nan"])).is_err());
    }
}
