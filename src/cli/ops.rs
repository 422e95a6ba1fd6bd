//! `nki ops`: the vocabulary kernels speak, from the spec tables.

use clap::Args;
use nki::io::json;
use nki::spec::{self, Op, Status};

/// Options of `nki ops`.
#[derive(Args)]
pub struct OpsArgs {
    /// Print a JSON array of `{"name", "engines", "generations", "summary", "status"}`.
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

/// The JSON array of `ops`, one object per line.
pub fn to_json<'a>(ops: impl Iterator<Item = &'a Op>) -> String {
    let rows: Vec<String> = ops
        .map(|op| {
            format!(
                "  {{\"name\": {}, \"engines\": {}, \"generations\": {}, \"summary\": {}, \"status\": {}}}",
                json::string(&op.official_name()),
                json_list(&engines(op)),
                json_list(&generations(op)),
                json::string(op.summary),
                json::string(status(op))
            )
        })
        .collect();
    format!("[\n{}\n]", rows.join(",\n"))
}

/// Prints the vocabulary as a table or JSON.
pub fn run(args: &OpsArgs) {
    let ops = || spec::ops().filter(|o| !args.implemented || o.binding().is_some());
    if args.json {
        outln!("{}", to_json(ops()));
        return;
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
}
