//! `nki ops`: the vocabulary kernels speak, from the spec tables; `nki ops NAME`
//! describes one op.

use super::error::CliError;
use clap::Args;
use nki::io::json;
use nki::spec::{self, Kind, Module, Op, OpClass, Spaces, Status};

/// Options of `nki ops`.
#[derive(Args)]
pub struct OpsArgs {
    /// One op to describe (`nonzero_with_count`, `nisa.nc_transpose`, `nki.language.add`):
    /// its signature, engines, generations, rules and an example.
    name: Option<String>,
    /// Print JSON: an array of `{"name", "engines", "generations", "summary", "status"}`,
    /// or, with NAME, one object that also has `params`, `rules` and `example`.
    #[arg(long)]
    json: bool,
    /// Only the ops kernels can call today.
    #[arg(long)]
    implemented: bool,
}

fn status(op: &Op) -> &'static str {
    match op.status {
        Status::Implemented(_) => "implemented",
        Status::Planned => "planned",
    }
}

fn engines(op: &Op) -> Vec<&'static str> {
    op.engines.iter().map(|e| e.name()).collect()
}

fn generations(op: &Op) -> Vec<String> {
    op.generations.iter().map(ToString::to_string).collect()
}

fn json_list<S: AsRef<str>>(items: &[S]) -> String {
    let parts: Vec<String> = items.iter().map(|s| json::string(s.as_ref())).collect();
    format!("[{}]", parts.join(", "))
}

/// The fields every op's JSON object has.
fn json_fields(op: &Op) -> String {
    format!(
        "\"name\": {}, \"engines\": {}, \"generations\": {}, \"summary\": {}, \"status\": {}",
        json::string(&op.official_name()),
        json_list(&engines(op)),
        json_list(&generations(op)),
        json::string(op.summary),
        json::string(status(op))
    )
}

/// The JSON array of `ops`, one object per line.
pub fn to_json<'a>(ops: impl Iterator<Item = &'a Op>) -> String {
    let rows: Vec<String> = ops.map(|op| format!("  {{{}}}", json_fields(op))).collect();
    format!("[\n{}\n]", rows.join(",\n"))
}

/// What a parameter of `kind` takes, in words.
fn kind_text(kind: Kind) -> String {
    let spaces = |s: Spaces| match s {
        Spaces::OnChip => "SBUF or PSUM",
        Spaces::Sbuf => "SBUF",
        Spaces::Psum => "PSUM",
        Spaces::Dma => "HBM or SBUF",
        Spaces::SharedHbmOrSbuf => "shared HBM or SBUF",
        Spaces::Any => "any memory",
    };
    match kind {
        Kind::Tensor(s) => format!("tensor in {}", spaces(s)),
        Kind::Operand => "scalar or (P, 1) tensor".into(),
        Kind::Op(OpClass::Alu) => "ALU op (nl::add, nl::maximum, ...)".into(),
        Kind::Op(OpClass::Act) => "activation function (nl::exp, nl::copy, ...)".into(),
        Kind::Op(OpClass::Any) => "ALU op or activation function".into(),
        Kind::Op(OpClass::AluScalar) => "ALU op, or a unary ALU op with no operand".into(),
        Kind::Int => "int".into(),
        Kind::Float => "float".into(),
        Kind::Bool => "bool".into(),
        Kind::OptBool => "bool or None".into(),
        Kind::Dtype => "nl dtype".into(),
        Kind::Buffer => "nl memory region".into(),
        Kind::Str => "string".into(),
        Kind::Pattern => "access pattern [[step, count], ...]".into(),
        Kind::Ints => "list of ints".into(),
        Kind::Floats => "list of numbers".into(),
        Kind::Constant => "number or nested list of numbers".into(),
        Kind::Axis => "int or tuple of ints".into(),
        Kind::Enum(e) => format!("nisa::{e} member"),
        Kind::Pair => "(int, int)".into(),
        Kind::RegisterSource => "register or int".into(),
        Kind::DynamicOffset => "register or one-element SBUF tensor".into(),
        Kind::Register => "virtual register".into(),
        Kind::ReplicaGroup => "ncc::ReplicaGroup".into(),
        Kind::Groups => "replica group rings ((0, 1), (2, 3))".into(),
        Kind::TensorLists => "per channel, a list of one tensor [[t]]".into(),
        Kind::Tensors => "list of tensors".into(),
        Kind::Names => "dim names pattern".into(),
        Kind::Sizes => "dim sizes [(\"h\", 4)]".into(),
        Kind::Callable => "closure".into(),
        Kind::Planned => "not supported yet".into(),
    }
}

/// The op's official signature: `nki.isa.nc_transpose(dst, data, engine=engine.unknown, name=None)`.
fn signature(op: &Op) -> String {
    let params: Vec<String> =
        op.params.iter().map(|p| if p.required { p.name.to_string() } else { format!("{}={}", p.name, p.default) }).collect();
    format!("{}({})", op.official_name(), params.join(", "))
}

/// How a kernel names the op: `nisa::nc_transpose`, or `t.permute` for a method.
fn callee(op: &Op) -> String {
    match op.module {
        Module::Tensor => format!("t.{}", op.name),
        m => format!("{}::{}", m.dsl(), op.name),
    }
}

/// The spec's example, or a call passing the required parameters by name.
fn example(op: &Op) -> String {
    if !op.example.is_empty() {
        return op.example.to_string();
    }
    let required: Vec<&str> = op.params.iter().filter(|p| p.required).map(|p| p.name).collect();
    format!("{}({});", callee(op), required.join(", "))
}

/// Every rule nki-rs enforces on the op, in words.
fn rules(op: &Op) -> Vec<String> {
    op.same_dtype.iter().map(|r| r.text()).chain(op.rules.iter().map(|r| r.to_string())).collect()
}

/// The op a command-line `name` means: an official path (`nki.isa.nc_transpose`),
/// a kernel path (`nisa.nc_transpose`, `nisa::nc_transpose`), or a bare name
/// when only one op has it.
fn find(name: &str) -> Result<&'static Op, CliError> {
    let dotted = name.replace("::", ".");
    let matches: Vec<&Op> = spec::ops()
        .filter(|o| o.official_name() == dotted || format!("{}.{}", o.module.dsl(), o.name) == dotted || o.name == dotted)
        .collect();
    match matches[..] {
        [op] => Ok(op),
        [] => {
            let names: Vec<String> =
                spec::ops().map(|o| format!("{}.{}", o.module.dsl(), o.name).trim_start_matches('.').to_string()).collect();
            let bare = dotted.rsplit('.').next().unwrap_or(&dotted);
            let close = spec::did_you_mean(&dotted, names.iter().map(String::as_str))
                .or_else(|| spec::did_you_mean(bare, spec::ops().map(|o| o.name)));
            let hint = close.map_or(" (`nki ops` lists them)".to_string(), |c| format!("; did you mean `{c}`?"));
            Err(CliError::usage(format!("no op named `{name}`{hint}")))
        }
        _ => {
            let all: Vec<String> = matches.iter().map(|o| o.official_name()).collect();
            Err(CliError::usage(format!("`{name}` names several ops: {}; give one in full", all.join(", "))))
        }
    }
}

/// One op as JSON: the list fields plus `params`, `rules` and `example`.
fn op_json(op: &Op) -> String {
    let params: Vec<String> = op
        .params
        .iter()
        .map(|p| {
            format!(
                "    {{\"name\": {}, \"kind\": {}, \"required\": {}, \"default\": {}}}",
                json::string(p.name),
                json::string(&kind_text(p.kind)),
                p.required,
                if p.required { "null".to_string() } else { json::string(p.default) }
            )
        })
        .collect();
    format!(
        "{{{},\n  \"signature\": {},\n  \"params\": [\n{}\n  ],\n  \"rules\": {},\n  \"example\": {}\n}}",
        json_fields(op),
        json::string(&signature(op)),
        params.join(",\n"),
        json_list(&rules(op)),
        json::string(&example(op))
    )
}

/// Describes one op.
fn describe(op: &Op, as_json: bool) {
    if as_json {
        outln!("{}", op_json(op));
        return;
    }
    let eng = engines(op);
    outln!("{}: {}", op.official_name(), op.summary);
    outln!();
    outln!("  {}", signature(op));
    outln!();
    outln!("parameters:");
    for p in op.params {
        let need = if p.required { "required".to_string() } else { format!("default {}", p.default) };
        outln!("  {:<22} {:<30} {}", p.name, need, kind_text(p.kind));
    }
    outln!();
    outln!("engines:     {}", if eng.is_empty() { "-".to_string() } else { eng.join(", ") });
    outln!("generations: {}", generations(op).join(", "));
    outln!("status:      {}", status(op));
    let rules = rules(op);
    if !rules.is_empty() {
        outln!();
        outln!("rules (checked by #[nki_kernel] when known at compile time, else by the emulator):");
        for r in rules {
            outln!("  - {r}");
        }
    }
    outln!();
    outln!("example (Rust):");
    outln!("  {}", example(op));
}

/// Prints the vocabulary as a table or JSON, or one op.
pub fn run(args: &OpsArgs) -> Result<(), CliError> {
    if let Some(name) = &args.name {
        describe(find(name)?, args.json);
        return Ok(());
    }
    let ops = || spec::ops().filter(|o| !args.implemented || o.binding().is_some());
    if args.json {
        outln!("{}", to_json(ops()));
        return Ok(());
    }
    for op in ops() {
        let eng = engines(op);
        outln!(
            "{:<52} {:<22} {:<15} {:<11} {}",
            op.official_name(),
            if eng.is_empty() { "-".to_string() } else { eng.join(",") },
            generations(op).join(","),
            status(op),
            op.summary
        );
    }
    Ok(())
}
