//! `nki traceback`: the output of a failed run of the emitted package — a
//! Python traceback, the NumPy executor's `error:` line, a compiler message —
//! with the Rust file and line under each place it names in one of the
//! package's modules.

use super::CliError;
use clap::Args;
use nki::emit::Package;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Arguments of `nki traceback`.
#[derive(Args)]
pub struct TracebackArgs {
    /// The output to translate; standard input when absent or `-`.
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
}

/// A place a line of output names: a module file of the package and a line.
struct Place {
    module: String,
    line: usize,
    /// Python's `File "...", line N` frame, which the traceback follows with the
    /// line's code.
    frame: bool,
}

/// Prints the input with `--> FILE.rs:LINE` under every line naming a line of
/// the package the program's kernels emit. Fails when no line does.
pub fn run(args: &TracebackArgs) -> Result<(), CliError> {
    let mut text = String::new();
    let read = match args.file.as_deref() {
        None => std::io::stdin().read_to_string(&mut text).map(|_| ()),
        Some(p) if p == Path::new("-") => std::io::stdin().read_to_string(&mut text).map(|_| ()),
        Some(p) => std::fs::read_to_string(p).map(|t| text = t),
    };
    let source = args.file.as_deref().map_or("standard input".into(), |p| p.display().to_string());
    read.map_err(|e| CliError::usage(format!("{source}: {e}")))?;
    let pkg = Package::new(&nki::registry()).map_err(|e| CliError::failure(e.to_string()))?;
    let lines: Vec<&str> = text.lines().collect();
    let mut mapped = 0;
    for (i, l) in lines.iter().enumerate() {
        outln!("{l}");
        for place in places(l) {
            let Some((file, rust)) = pkg.rust_line(&place.module, place.line) else { continue };
            if place.frame && !shows_emitted_code(&pkg, &place, lines.get(i + 1).copied()) {
                continue;
            }
            let indent = &l[..l.len() - l.trim_start().len()];
            outln!("{indent}--> {file}:{rust}");
            mapped += 1;
        }
    }
    if mapped == 0 {
        return Err(CliError::usage(format!(
            "{source} names no line of the modules `{} emit` writes (a package emitted by another build maps differently: emit it again)",
            super::program()
        )));
    }
    Ok(())
}

/// Whether the code Python shows after a frame (when it shows any) is the
/// line this program emits there; a traceback of an edited or older package,
/// or of another file of the same name, is not mapped.
fn shows_emitted_code(pkg: &Package, place: &Place, next: Option<&str>) -> bool {
    let Some(shown) = next.filter(|n| n.starts_with("    ") && !n.trim_start().starts_with("File \"")) else { return true };
    let emitted = pkg.files().get(&place.module).and_then(|t| t.lines().nth(place.line - 1));
    emitted.is_some_and(|e| e.trim() == shown.trim())
}

/// The places `line` names: a Python frame (`File "DIR/rope.py", line 12, in
/// RoPE`) or `rope.py:12` (the NumPy executor's and compilers' form).
fn places(line: &str) -> Vec<Place> {
    let t = line.trim_start();
    if let Some(rest) = t.strip_prefix("File \"") {
        let Some((path, after)) = rest.split_once('"') else { return Vec::new() };
        let number = after.strip_prefix(", line ").map(|n| n.split(|c: char| !c.is_ascii_digit()).next().unwrap_or(""));
        return match (module_name(path), number.and_then(|n| n.parse().ok())) {
            (Some(module), Some(line)) => vec![Place { module, line, frame: true }],
            _ => Vec::new(),
        };
    }
    let mut found = Vec::new();
    for (at, _) in line.match_indices(".py:") {
        let start = line[..at].rfind(|c: char| c.is_whitespace() || "(\"'[,".contains(c)).map_or(0, |s| s + 1);
        let digits: String = line[at + 4..].chars().take_while(char::is_ascii_digit).collect();
        if let (Some(module), Ok(n)) = (module_name(&line[start..at + 3]), digits.parse()) {
            found.push(Place { module, line: n, frame: false });
        }
    }
    found
}

/// The module file name (`rope.py`) of a path to it.
fn module_name(path: &str) -> Option<String> {
    let name = Path::new(path).file_name()?.to_str()?;
    name.ends_with(".py").then(|| name.to_string())
}
