//! The flags of `nki run KERNEL` / `nki profile KERNEL` for any registered
//! kernel, read from the kernel's registry entry: one `--PARAM VALUE` per
//! parameter (its name with `-` for `_`; tensors as `.npy` paths, scalars and
//! dtypes as text) plus the launch flags.

use super::super::run::parse_timeout;
use nki::emit::{FunctionInfo, ParamInfo, ParamKind};
use nki::io::npy::NpyType;
use nki::spec::contract::either;
use nki::{Dtype, Precision};
use std::path::PathBuf;
use std::time::Duration;

/// The most ranks a launch holds.
const MAX_RANKS: usize = 64;

/// The most threads `--threads` takes (as the attention commands' flag).
const MAX_THREADS: usize = u16::MAX as usize;

/// What the command line gives one parameter.
#[derive(Debug)]
pub enum Given {
    /// A tensor's `.npy` path (per rank when it holds `{rank}`).
    Path(String),
    /// A scalar, dtype or replica groups, as text.
    Text(String),
}

/// A parsed invocation of one kernel.
pub struct Invocation {
    /// The kernel.
    pub kernel: &'static FunctionInfo,
    /// What was given for each parameter, in declaration order.
    pub params: Vec<(&'static ParamInfo, Option<Given>)>,
    /// `--lnc` (default: the target's default LNC).
    pub lnc: Option<usize>,
    /// `--threads` (default: every core).
    pub threads: Option<usize>,
    /// `--target` of `nki run` (`nki profile` takes its own).
    pub target: Option<nki::profile::Target>,
    /// `--ranks`.
    pub ranks: usize,
    /// `--precision`.
    pub precision: Precision,
    /// `--timeout`.
    pub timeout: Option<Duration>,
    /// `--out DIR`.
    pub out: Option<PathBuf>,
}

/// The launch flags every kernel takes, with their help.
pub const LAUNCH_FLAGS: &[(&str, &str)] = &[
    ("--out DIR", "write the outputs as DIR/out0.npy, DIR/out1.npy, ... (DIR/outI.rankR.npy with --ranks > 1)"),
    ("--lnc 1|2", "logical NeuronCore degree (default: the target's, 2 on trn2)"),
    ("--target trn1|trn2|trn3", "NeuronCore generation (default trn2)"),
    ("--threads N", "emulator threads (default: every core; results do not depend on it)"),
    ("--ranks N", "emulated ranks (default 1); a tensor path holding {rank} names one file per rank"),
    ("--precision hardware|fp32", "numeric model (default hardware)"),
    ("--timeout SECS", "stop a run that takes longer"),
];

/// The kernel parameter a registry parameter belongs to: `cfg` of a bundle's
/// field `cfg.tile` (and of a nested one's `cfg.inner.tile`), else the
/// parameter itself.
fn bundle_param(name: &str) -> &str {
    name.split_once('.').map_or(name, |(param, _)| param)
}

/// The command-line flag of a parameter.
pub fn flag_of(param: &str) -> String {
    format!("--{}", param.replace('_', "-"))
}

/// The registered kernel named `name` (`-` and `_` alike, any case), or an error with a suggestion.
pub fn find_kernel(name: &str) -> Result<&'static FunctionInfo, String> {
    let wanted = name.replace('-', "_");
    let kernels: Vec<&'static FunctionInfo> = nki::registry().into_iter().filter(|k| k.entry.is_some()).collect();
    if let Some(k) = kernels.iter().find(|k| k.name.eq_ignore_ascii_case(&wanted)) {
        return Ok(k);
    }
    let hint =
        nki::spec::did_you_mean(&wanted, kernels.iter().map(|k| k.name)).map(|s| format!("; did you mean '{s}'?")).unwrap_or_default();
    Err(format!("unknown kernel '{name}'{hint} (`{} list` shows every kernel)", super::super::program()))
}

/// The help of `nki run KERNEL --help`.
pub fn help(kernel: &FunctionInfo, command: &str) -> String {
    let mut text =
        format!("Usage: {} {command} {} [--PARAM VALUE]... [LAUNCH FLAGS]\n\nParameters:\n", super::super::program(), kernel.name);
    for p in kernel.params {
        let value = if p.kind == ParamKind::Tensor { "FILE.npy" } else { "VALUE" };
        let note = match (p.optional, p.default) {
            (false, _) if let Some(bundle) = p.optional_bundles.last() => format!("required when {bundle} is given"),
            (false, _) => "required".to_string(),
            (true, Some(d)) => format!("default {d}"),
            (true, None) => "optional".to_string(),
        };
        let what = if p.shape.is_empty() { p.kind.describe().to_string() } else { format!("{} {}", p.kind.describe(), p.shape) };
        let mut kind = match p.kind {
            ParamKind::Enum { class, members } => format!("a {class} member: {}", members.join("|")),
            ParamKind::Tuple { items } => format!("a tuple {} such as {}", python_type(p.kind), tuple_example(items)),
            _ if p.dtypes.is_empty() => what,
            _ => format!("{what} of {}", p.dtypes.join("|")),
        };
        if !p.range.is_empty() {
            kind += &format!(" {}", nki::spec::contract::range_rule(p.range));
        }
        if let Some(bundle) = p.bundle {
            kind += &format!(", a field of {bundle}");
        }
        text += &format!("  {:<32} {kind} ({note})\n", format!("{} {value}", flag_of(p.name)));
        for check in p.checks {
            text += &format!("  {:<32} - {check}\n", "");
        }
    }
    if kernel.params.iter().any(|p| p.dtypes.iter().any(|d| codes_type(d).is_some())) {
        text += "\nA tensor of float8 or packed MX dtype is given as the raw codes of its elements, its path ending in the dtype \
                 (FILE.npy:float4_e2m1fn_x4): uint8 codes for float8_e4m3, float8_e4m3fn and float8_e5m2; the packed words, \
                 element k in byte (nibble) k, as uint32 for float8_e4m3fn_x4 and float8_e5m2_x4 and uint16 for float4_e2m1fn_x4.\n";
    }
    let mut bundles: Vec<&ParamInfo> = kernel.params.iter().filter(|p| p.bundle.is_some()).collect();
    bundles.dedup_by_key(|p| bundle_param(p.name));
    for p in bundles {
        let param = bundle_param(p.name);
        // Its `Option` bundles, itself or nested, in the order their fields come.
        let mut optional: Vec<&str> = Vec::new();
        for q in kernel.params.iter().filter(|q| q.bundle.is_some() && bundle_param(q.name) == param) {
            for b in q.optional_bundles {
                if !optional.contains(b) {
                    optional.push(b);
                }
            }
        }
        let absent: String = optional.iter().map(|b| format!(" {b} is None unless one of its fields is given.")).collect();
        text += &format!(
            "\nThe configuration object {param} is given field by field ({}.FIELD VALUE, {}.BUNDLE.FIELD VALUE for a nested one); fields left out keep their defaults.{absent}\n",
            flag_of(param),
            flag_of(param)
        );
    }
    text += "\nLaunch flags:\n";
    for (flag, what) in LAUNCH_FLAGS {
        text += &format!("  {flag:<32} {what}\n");
    }
    text
}

/// Reads `args` (the flags after the kernel's name). `Ok(None)` for `--help`.
pub fn parse(kernel: &'static FunctionInfo, args: &[String]) -> Result<Option<Invocation>, String> {
    let mut inv = Invocation {
        kernel,
        params: kernel.params.iter().map(|p| (p, None)).collect(),
        lnc: None,
        threads: None,
        target: None,
        ranks: 1,
        precision: Precision::Hardware,
        timeout: None,
        out: None,
    };
    let mut seen: Vec<String> = Vec::new();
    let mut rest = args.iter().peekable();
    while let Some(arg) = rest.next() {
        if arg == "--help" || arg == "-h" {
            return Ok(None);
        }
        let Some(body) = arg.strip_prefix("--") else {
            return Err(format!("unexpected argument '{arg}': {} takes --PARAM VALUE pairs (see --help)", kernel.name));
        };
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n.replace('-', "_"), Some(v.to_string())),
            None => (body.replace('-', "_"), None),
        };
        let flag = flag_of(&name);
        if seen.contains(&name) {
            return Err(format!("{flag} is given twice"));
        }
        seen.push(name.clone());
        let slot = inv.params.iter_mut().find(|(p, _)| p.name == name);
        let is_bool = slot.as_ref().is_some_and(|(p, _)| p.kind == ParamKind::Bool);
        // A bool parameter alone means true, as a switch does.
        let value = match inline {
            Some(v) => v,
            None if is_bool && rest.peek().is_none_or(|v| v.starts_with("--")) => "true".to_string(),
            None => rest.next().cloned().ok_or_else(|| format!("{flag} needs a value"))?,
        };
        match (slot, name.as_str()) {
            (Some((p, given)), _) => *given = Some(if p.kind == ParamKind::Tensor { Given::Path(value) } else { Given::Text(value) }),
            (None, "out") => inv.out = Some(PathBuf::from(value)),
            (None, "lnc") => inv.lnc = Some(parse_count(&flag, &value, 1, 2)?),
            (None, "target") => {
                inv.target =
                    Some(nki::profile::Target::parse(&value).ok_or_else(|| format!("{flag} {value}: expected trn1, trn2 or trn3"))?)
            }
            (None, "threads") => inv.threads = Some(parse_count(&flag, &value, 1, MAX_THREADS)?),
            (None, "ranks") => inv.ranks = parse_count(&flag, &value, 1, MAX_RANKS)?,
            (None, "precision") => {
                inv.precision = match value.as_str() {
                    "hardware" => Precision::Hardware,
                    "fp32" => Precision::Fp32,
                    _ => return Err(format!("{flag} {value}: expected hardware or fp32")),
                }
            }
            (None, "timeout") => inv.timeout = Some(parse_timeout(&value).map_err(|e| format!("{flag} {value}: {e}"))?),
            (None, _) => return Err(unknown_flag(kernel, &name)),
        }
    }
    // An `Option` bundle is built when any of its fields (a nested bundle's
    // included) is given, which then needs each of its fields without a default.
    let given_under =
        |path: &str| inv.params.iter().any(|(q, g)| g.is_some() && q.name.strip_prefix(path).is_some_and(|r| r.starts_with('.')));
    let built = |p: &ParamInfo| p.optional_bundles.iter().all(|b| given_under(b));
    let missing: Vec<String> = inv
        .params
        .iter()
        .filter(|(p, g)| !p.optional && g.is_none() && built(p))
        .map(|(p, _)| {
            let why = match p.optional_bundles.last() {
                Some(bundle) => format!(": {bundle} is given, and the field has no default"),
                None => String::new(),
            };
            format!("{} ({}{why})", flag_of(p.name), p.kind.describe())
        })
        .collect();
    if !missing.is_empty() {
        return Err(format!("{} requires {}", kernel.name, missing.join(", ")));
    }
    Ok(Some(inv))
}

/// A tensor flag's value split into its path and the dtype whose raw codes the
/// file holds: `w.npy:float4_e2m1fn_x4` names `w.npy` holding
/// `float4_e2m1fn_x4` codes. A value whose last `:` is followed by no dtype
/// name is a path as given.
pub fn split_codes(given: &str) -> (&str, Option<Dtype>) {
    match given.rsplit_once(':').and_then(|(path, name)| Some((path, Dtype::from_python_name(name)?))) {
        Some((path, dtype)) => (path, Some(dtype)),
        None => (given, None),
    }
}

/// The `.npy` type of the raw codes of the dtype named `nl` (none for a dtype
/// stored as its own element type).
fn codes_type(nl: &str) -> Option<NpyType> {
    Dtype::from_python_name(nl).and_then(NpyType::codes_of)
}

/// The dtypes `p` takes whose raw codes are stored as `.npy` type `ty`.
fn taken_as_codes(p: &ParamInfo, ty: NpyType) -> Vec<&'static str> {
    p.dtypes.iter().copied().filter(|d| codes_type(d) == Some(ty)).collect()
}

/// For a file of integers `p` refuses that holds the raw codes of a dtype it
/// takes, how to say so (empty otherwise).
pub fn codes_hint(p: &ParamInfo, dtype: Dtype) -> String {
    let ty = NpyType::of_dtype(dtype);
    match taken_as_codes(p, ty).as_slice() {
        [] => String::new(),
        named => format!(
            " ({} files of codes are read as {} when the path ends in the dtype, as FILE.npy:{})",
            ty.name(),
            either(named),
            named[0]
        ),
    }
}

/// An integer flag in `lo..=hi`.
fn parse_count(flag: &str, value: &str, lo: usize, hi: usize) -> Result<usize, String> {
    value
        .parse::<usize>()
        .ok()
        .filter(|n| (lo..=hi).contains(n))
        .ok_or_else(|| format!("{flag} {value}: expected a whole number from {lo} to {hi}"))
}

/// The error for a flag that is neither a parameter nor a launch flag.
fn unknown_flag(kernel: &FunctionInfo, name: &str) -> String {
    let launch = ["out", "lnc", "threads", "target", "ranks", "precision", "timeout"];
    let names = kernel.params.iter().map(|p| p.name).chain(launch);
    let hint = nki::spec::did_you_mean(name, names).map(|s| format!("; did you mean {}?", flag_of(s))).unwrap_or_default();
    let params: Vec<String> = kernel.params.iter().map(|p| flag_of(p.name)).collect();
    format!("{} is not a parameter of {}{hint} (its parameters: {})", flag_of(name), kernel.name, params.join(" "))
}

/// A scalar parameter's value from its text, within the parameter's range
/// (`kernel` names the kernel in the refusal).
pub fn parse_scalar(kernel: &str, p: &ParamInfo, text: &str) -> Result<nki::emit::ArgValue, String> {
    use nki::emit::ArgValue;
    let flag = flag_of(p.name);
    let v = parse_value(p, text)?;
    let number = match v {
        ArgValue::Int(n) => Some(n as f64),
        ArgValue::Float(x) => Some(x),
        _ => None,
    };
    if let Some(x) = number
        && !nki::spec::contract::in_range(p.range, x)
    {
        return Err(format!("{flag} {text}: {kernel} takes {} {}", p.name, nki::spec::contract::range_rule(p.range)));
    }
    Ok(v)
}

/// A scalar parameter's value from its text, as its kind reads it.
fn parse_value(p: &ParamInfo, text: &str) -> Result<nki::emit::ArgValue, String> {
    use nki::emit::ArgValue;
    let flag = flag_of(p.name);
    let bad = |what: &str| format!("{flag} {text}: expected {what}");
    let t = text.trim();
    Ok(match p.kind {
        ParamKind::Int => ArgValue::Int(t.parse().map_err(|_| bad("an int"))?),
        ParamKind::Float => ArgValue::Float(t.parse::<f64>().ok().filter(|v| v.is_finite()).ok_or_else(|| bad("a finite float"))?),
        ParamKind::Bool => ArgValue::Bool(match t {
            "true" | "True" | "1" => true,
            "false" | "False" | "0" => false,
            _ => return Err(bad("true or false")),
        }),
        ParamKind::Dtype => ArgValue::Dtype(Dtype::from_python_name(t).ok_or_else(|| bad("an nl dtype name such as float32 or bfloat16"))?),
        ParamKind::Str => ArgValue::Str(text.to_string()),
        ParamKind::Groups => ArgValue::Groups(parse_groups(t).ok_or_else(|| bad("replica groups such as 0,1;2,3"))?),
        // The rings of the `ncc.ReplicaGroup` the kernel receives.
        ParamKind::ReplicaGroup => {
            ArgValue::Groups(parse_groups(t).ok_or_else(|| bad("a replica group's rings such as 0,1,2,3 or 0,1;2,3"))?)
        }
        ParamKind::Enum { class, members } => match members.iter().find(|m| **m == t) {
            Some(m) => ArgValue::Member(m.to_string()),
            None => return Err(bad(&format!("a {class} member: {}", members.join(", ")))),
        },
        ParamKind::Tuple { items } => ArgValue::Tuple(
            parse_tuple(p, items, t).ok_or_else(|| bad(&format!("a tuple {} such as {}", python_type(p.kind), tuple_example(items))))?,
        ),
        ParamKind::Tensor => return Err(bad("a .npy file")),
    })
}

/// A tuple's items from `text`: Python's tuple syntax, the outer parentheses
/// optional (`1,2` or `(1, 2)`; `(0,0),(1,1)` for a tuple of pairs); `None`
/// when an item does not read as its kind or their number is not the tuple's.
fn parse_tuple(p: &ParamInfo, items: &[ParamKind], text: &str) -> Option<Vec<nki::emit::ArgValue>> {
    let t = text.trim();
    let inner = t.strip_prefix('(').and_then(|s| s.strip_suffix(')')).filter(|s| split_items(s).is_some()).unwrap_or(t);
    let parts = split_items(inner)?;
    if parts.len() != items.len() {
        return None;
    }
    let item = |kind: &ParamKind, part: &str| match *kind {
        // A tuple item is parenthesized, as Python writes it.
        ParamKind::Tuple { items } => {
            part.trim().starts_with('(').then(|| parse_tuple(p, items, part)).flatten().map(nki::emit::ArgValue::Tuple)
        }
        kind => parse_value(&ParamInfo { kind, ..*p }, part).ok(),
    };
    items.iter().zip(parts).map(|(kind, part)| item(kind, part)).collect()
}

/// `text` split at its top-level commas (one trailing comma allowed, as in
/// `(1,)`); `None` when its parentheses do not balance.
fn split_items(text: &str) -> Option<Vec<&str>> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.checked_sub(1)?,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    let last = &text[start..];
    if depth != 0 || (last.trim().is_empty() && parts.is_empty()) {
        return None;
    }
    if !last.trim().is_empty() {
        parts.push(last);
    }
    Some(parts)
}

/// A kind as Python names its type: `(int, int)`, `((int, int), (int, int))`.
fn python_type(kind: ParamKind) -> String {
    match kind {
        ParamKind::Tuple { items } => format!("({})", items.iter().map(|k| python_type(*k)).collect::<Vec<_>>().join(", ")),
        ParamKind::Int => "int".into(),
        ParamKind::Float => "float".into(),
        ParamKind::Bool => "bool".into(),
        other => other.describe().into(),
    }
}

/// A tuple value as the command line takes it: `1,1`, `(1,1),(1,1)`.
fn tuple_example(items: &[ParamKind]) -> String {
    let item = |kind: &ParamKind| match *kind {
        ParamKind::Tuple { items } => format!("({})", tuple_example(items)),
        ParamKind::Float => "1.0".into(),
        ParamKind::Bool => "true".into(),
        _ => "1".into(),
    };
    items.iter().map(item).collect::<Vec<_>>().join(",")
}

/// `0,1;2,3`: groups separated by `;`, ranks by `,`.
fn parse_groups(text: &str) -> Option<Vec<Vec<i64>>> {
    text.split(';').map(|g| g.split(',').map(|r| r.trim().parse::<i64>().ok()).collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    // Linking the example and library kernels registers them: the tests read theirs.
    use nki_examples as _;
    use nkilib as _;

    fn kernel(name: &str) -> &'static FunctionInfo {
        find_kernel(name).unwrap()
    }

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn parameters_and_launch_flags_are_read_by_name() {
        let inv = parse(kernel("layernorm"), &args(&["--x", "x.npy", "--gamma=g.npy", "--beta", "b.npy", "--eps", "1e-3", "--lnc", "2"]))
            .unwrap()
            .unwrap();
        assert_eq!(inv.lnc, Some(2));
        assert!(matches!(&inv.params[1].1, Some(Given::Path(p)) if p == "g.npy"));
        assert!(matches!(&inv.params[3].1, Some(Given::Text(t)) if t == "1e-3"));
        assert!(parse(kernel("tensor-add"), &args(&["--help"])).unwrap().is_none());
    }

    #[test]
    fn mistakes_are_named() {
        let err = |k: &str, a: &[&str]| parse(kernel(k), &args(a)).err().unwrap();
        assert_eq!(err("cumsum", &["--xx", "x.npy"]), "--xx is not a parameter of cumsum; did you mean --x? (its parameters: --x --axis)");
        assert_eq!(err("tensor_add", &["--a", "a.npy"]), "tensor_add requires --b (a tensor)");
        assert_eq!(err("cumsum", &["--x", "a", "--x", "b"]), "--x is given twice");
        assert!(err("cumsum", &["--x", "a", "--lnc", "3"]).contains("from 1 to 2"));
        assert!(find_kernel("cumsun").unwrap_err().contains("did you mean 'cumsum'"));
    }

    /// A kernel taking a tensor and an `Option` bundle `lim` whose `upper` has no default.
    static OPTIONAL_BUNDLE: FunctionInfo = FunctionInfo {
        name: "k",
        kind: nki::emit::FunctionKind::Kernel,
        source: "",
        module_path: "k",
        file: "k.rs",
        lines: &[],
        deps: &[],
        uses_math: false,
        params: &[
            ParamInfo::required("x", ParamKind::Tensor),
            ParamInfo { bundle: Some("Limits"), optional_bundles: &["lim"], ..ParamInfo::required("lim.upper", ParamKind::Float) },
            ParamInfo {
                optional: true,
                default: Some("None"),
                bundle: Some("Limits"),
                optional_bundles: &["lim"],
                ..ParamInfo::required("lim.lower", ParamKind::Float)
            },
        ],
        outputs: None,
        entry: None,
    };

    #[test]
    fn an_option_bundle_is_left_out_or_given_with_its_required_fields() {
        let given =
            |a: &[&str]| parse(&OPTIONAL_BUNDLE, &args(a)).map(|inv| inv.unwrap().params.iter().filter(|(_, g)| g.is_some()).count());
        assert_eq!(given(&["--x", "x.npy"]), Ok(1));
        assert_eq!(given(&["--x", "x.npy", "--lim.upper", "2"]), Ok(2));
        assert_eq!(given(&["--x", "x.npy", "--lim.lower=1", "--lim.upper", "2"]), Ok(3));
        // A field given builds the bundle, which needs the field without a default.
        assert_eq!(
            given(&["--x", "x.npy", "--lim.lower", "1"]),
            Err("k requires --lim.upper (a float: lim is given, and the field has no default)".into())
        );
        let help = help(&OPTIONAL_BUNDLE, "run");
        assert!(help.contains("a float, a field of Limits (required when lim is given)"), "{help}");
        assert!(help.contains("lim is None unless one of its fields is given."), "{help}");
    }

    #[test]
    fn scalars_parse_by_kind() {
        let p = |kind| ParamInfo::required("v", kind);
        assert!(matches!(parse_scalar("k", &p(ParamKind::Dtype), "nl.bfloat16"), Ok(nki::emit::ArgValue::Dtype(Dtype::Bf16))));
        assert!(matches!(parse_scalar("k", &p(ParamKind::Groups), "0,1;2,3"), Ok(nki::emit::ArgValue::Groups(g)) if g == [[0, 1], [2, 3]]));
        // A replica group is given by its rings too.
        assert!(
            matches!(parse_scalar("k", &p(ParamKind::ReplicaGroup), "0,1,2,3"), Ok(nki::emit::ArgValue::Groups(g)) if g == [[0, 1, 2, 3]])
        );
        assert!(parse_scalar("k", &p(ParamKind::ReplicaGroup), "0;x").unwrap_err().contains("expected a replica group's rings"));
        // A tuple by its items, the outer parentheses optional; its arity and items' kinds checked.
        const PAIR: ParamKind = ParamKind::Tuple { items: &[ParamKind::Int, ParamKind::Int] };
        let (pair, pairs) = (p(PAIR), p(ParamKind::Tuple { items: &[PAIR, PAIR] }));
        let ints = |v: &nki::emit::ArgValue| format!("{v:?}");
        assert_eq!(ints(&parse_scalar("k", &pair, "1,2").unwrap()), ints(&parse_scalar("k", &pair, " (1, 2) ").unwrap()));
        assert!(matches!(parse_scalar("k", &pair, "3,-4"), Ok(nki::emit::ArgValue::Tuple(v)) if v.len() == 2));
        assert!(matches!(parse_scalar("k", &pairs, "((0,0),(1, 2))"), Ok(nki::emit::ArgValue::Tuple(v)) if v.len() == 2));
        assert!(parse_scalar("k", &pairs, "(0,0),(1,2)").is_ok());
        for bad in ["1", "1,2,3", "1,x", "(1,2", "1,2)", "", ",", "(1),(2)"] {
            assert_eq!(parse_scalar("k", &pair, bad).unwrap_err(), format!("--v {bad}: expected a tuple (int, int) such as 1,1"), "{bad}");
        }
        for bad in ["0,0,1,1", "0,0;1,1", "(0,0),(1,x)", "(0,0)"] {
            let e = parse_scalar("k", &pairs, bad).unwrap_err();
            assert_eq!(e, format!("--v {bad}: expected a tuple ((int, int), (int, int)) such as (1,1),(1,1)"), "{bad}");
        }
        assert_eq!(parse_scalar("k", &p(ParamKind::Float), "nan").unwrap_err(), "--v nan: expected a finite float");
        assert!(parse_scalar("k", &p(ParamKind::Int), "1.5").is_err());
        let act = p(ParamKind::Enum { class: "RouterActFnType", members: &["SIGMOID", "SOFTMAX"] });
        assert!(matches!(parse_scalar("k", &act, "SOFTMAX"), Ok(nki::emit::ArgValue::Member(m)) if m == "SOFTMAX"));
        assert_eq!(parse_scalar("k", &act, "1").unwrap_err(), "--v 1: expected a RouterActFnType member: SIGMOID, SOFTMAX");
    }
}
