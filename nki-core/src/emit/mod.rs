//! Assembling emitted NKI source into an importable Python package.
//!
//! Each `#[nki_kernel]` / `#[nki_helper]` records a [`FunctionInfo`]: its Python
//! definition and the functions it calls; a kernel also adds itself to
//! [`KERNELS`], so [`registry`] lists every kernel linked into the program,
//! from any crate, with no list kept by hand. [`Package::new`] groups them into one
//! Python module per Rust source file, adds the imports every module needs
//! (including `from .other import f` for calls across files), orders
//! definitions so callees come first, and writes an `__init__.py` that re-exports
//! the kernels.

mod kernel_contract;
mod params;

pub use kernel_contract::CHECK_CONTRACT;
pub use params::{ArgValue, Entry, ParamInfo, ParamKind, PyEnum, check_dtype, check_range, given, required};

use crate::{ErrorKind, NkiError, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// Every `#[nki_kernel]` linked into the program: each kernel adds its
/// [`FunctionInfo`] to this slice where it is defined, and the linker gathers
/// them (a link section, no code run before `main`). A crate's kernels are
/// linked when the program names the crate (a `mod` of the binary, a `use` of
/// a library); [`registry`] reads the slice.
#[linkme::distributed_slice]
pub static KERNELS: [&'static FunctionInfo];

/// Every kernel linked into the program ([`KERNELS`]), sorted by name (case
/// ignored), then by Rust module path.
pub fn registry() -> Vec<&'static FunctionInfo> {
    let mut all: Vec<&'static FunctionInfo> = KERNELS.iter().copied().collect();
    all.sort_by_cached_key(|k| (k.name.to_ascii_lowercase(), k.module_path));
    all
}

/// Whether a function is a `@nki.jit` kernel or a plain helper.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FunctionKind {
    /// `#[nki_kernel]`.
    Kernel,
    /// `#[nki_helper]`.
    Helper,
    /// A `const` of an `#[nki_module]`: a Python module constant.
    Constant,
    /// An `#[nki_object]` struct of an `#[nki_module]`: an `nl.NKIObject` dataclass.
    Object,
    /// An `#[nki_enum]` of an `#[nki_module]`: a Python `Enum` class.
    Enum,
}

/// What `#[nki_kernel]` records about a function.
#[derive(Debug)]
pub struct FunctionInfo {
    /// The function's name (in Rust and Python).
    pub name: &'static str,
    /// Kernel or helper.
    pub kind: FunctionKind,
    /// The Python definition.
    pub source: &'static str,
    /// The Rust module path where it is defined.
    pub module_path: &'static str,
    /// The Rust source file where it is defined.
    pub file: &'static str,
    /// The line of `file` each line of `source` stands for (empty when not
    /// recorded, as for module constants).
    pub lines: &'static [u32],
    /// Kernels and helpers it calls.
    pub deps: &'static [&'static FunctionInfo],
    /// Whether the definition uses the `math` module.
    pub uses_math: bool,
    /// Its parameters, in declaration order.
    pub params: &'static [ParamInfo],
    /// How many tensors it returns, when its signature fixes the number (a
    /// tensor, a tuple of tensors, nothing); `None` for a list of outputs
    /// whose length the run decides.
    pub outputs: Option<usize>,
    /// Runs it with values chosen at run time (kernels whose parameters and
    /// outputs are all of [`ParamKind`]s and tensors; `None` for helpers).
    pub entry: Option<Entry>,
}

impl FunctionInfo {
    /// An item of `kind` named `name`, defined as `source` in the Rust module
    /// `module_path` of `file`, with no recorded lines, dependencies,
    /// parameters, outputs or entry (a module constant's, a helper's written
    /// in Python); a registration sets the fields it has over this.
    pub const fn item(kind: FunctionKind, name: &'static str, source: &'static str, module_path: &'static str, file: &'static str) -> Self {
        FunctionInfo {
            name,
            kind,
            source,
            module_path,
            file,
            lines: &[],
            deps: &[],
            uses_math: false,
            params: &[],
            outputs: None,
            entry: None,
        }
    }

    /// The Python module this function lands in: the Rust file's stem (the module
    /// path's last segment for `mod.rs` / `lib.rs` / `main.rs`).
    pub fn python_module(&self) -> String {
        let stem = Path::new(self.file).file_stem().and_then(|s| s.to_str()).unwrap_or("kernels");
        if matches!(stem, "mod" | "lib" | "main") {
            self.module_path.rsplit("::").next().unwrap_or("kernels").replace('-', "_")
        } else {
            stem.replace('-', "_")
        }
    }

    /// The Rust source file, with `..` components resolved.
    pub fn source_file(&self) -> String {
        clean_path(self.file)
    }

    fn id(&self) -> (String, &'static str) {
        (self.python_module(), self.name)
    }
}

/// Collects `roots` and everything they call, callees first.
fn closure(roots: &[&'static FunctionInfo]) -> Vec<&'static FunctionInfo> {
    fn visit(f: &'static FunctionInfo, seen: &mut Vec<&'static FunctionInfo>) {
        if seen.iter().any(|s| std::ptr::eq(*s, f)) {
            return;
        }
        for d in f.deps {
            visit(d, seen);
        }
        seen.push(f);
    }
    let mut seen = Vec::new();
    for r in roots {
        visit(r, &mut seen);
    }
    seen
}

/// `a/b/../c` → `a/c` (lexically; `file!()` keeps the `..` of `#[path]` modules).
fn clean_path(p: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            ".." if parts.last().is_some_and(|l| *l != "..") => {
                parts.pop();
            }
            "." | "" => {}
            c => parts.push(c),
        }
    }
    parts.join("/")
}

/// An emitted Python package: module file name → contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Package {
    files: BTreeMap<String, String>,
    /// Module file name → the Rust file and line each of its lines stands for
    /// (`None` for imports, blank lines and lines of items without a record).
    origins: BTreeMap<String, Vec<Option<(&'static str, u32)>>>,
}

const HEADER_IMPORTS: &str = "import nki\nimport nki.language as nl\nimport nki.isa as nisa\nimport nki.collectives as ncc\n";

impl Package {
    /// Builds the package holding `kernels` and everything they call.
    pub fn new(kernels: &[&'static FunctionInfo]) -> Result<Package> {
        let all = closure(kernels);
        let mut modules: BTreeMap<String, Vec<&'static FunctionInfo>> = BTreeMap::new();
        for f in &all {
            let list = modules.entry(f.python_module()).or_default();
            if let Some(other) = list.iter().find(|g| g.name == f.name) {
                return Err(NkiError::new(
                    ErrorKind::Argument,
                    format!(
                        "two functions named `{}` would land in Python module `{}` ({} and {})",
                        f.name,
                        f.python_module(),
                        other.module_path,
                        f.module_path
                    ),
                ));
            }
            list.push(f);
        }
        let (mut files, mut origins) = (BTreeMap::new(), BTreeMap::new());
        for (module, funcs) in &modules {
            let sources: Vec<String> = {
                let mut v: Vec<String> = funcs.iter().map(|f| f.source_file()).collect();
                v.dedup();
                v
            };
            let mut text = format!("\"\"\"NKI kernels generated by nki-rs from {}.\"\"\"\n\n", sources.join(", "));
            if funcs.iter().any(|f| f.uses_math) {
                text.push_str("import math\n\n");
            }
            if funcs.iter().any(|f| f.kind == FunctionKind::Object) {
                text.push_str("from dataclasses import dataclass\n\n");
            }
            if funcs.iter().any(|f| f.kind == FunctionKind::Enum) {
                text.push_str("from enum import Enum\n\n");
            }
            text.push_str(HEADER_IMPORTS);
            let mut imports: Vec<String> = funcs
                .iter()
                .flat_map(|f| f.deps.iter())
                .filter(|d| d.python_module() != *module)
                .map(|d| format!("from .{} import {}", d.python_module(), d.name))
                .collect();
            imports.sort();
            imports.dedup();
            for i in imports {
                text.push_str(&i);
                text.push('\n');
            }
            let mut origin = Vec::new();
            for f in funcs {
                text.push_str("\n\n");
                origin.resize(text.matches('\n').count(), None);
                text.push_str(f.source);
                let recorded = f.lines.len() == f.source.lines().count();
                origin.extend(f.source.lines().enumerate().map(|(i, _)| recorded.then(|| (f.file, f.lines[i]))));
            }
            files.insert(format!("{module}.py"), text);
            origins.insert(format!("{module}.py"), origin);
        }
        let mut init = String::from("\"\"\"NKI kernels generated by nki-rs.\"\"\"\n\n");
        let kernels = all.iter().filter(|f| f.kind == FunctionKind::Kernel);
        // The bundles and enums kernels take as parameters: their callers build them.
        let bundles = kernels.clone().flat_map(|k| {
            k.params.iter().filter_map(|p| p.bundle).filter_map(|b| k.deps.iter().find(|d| d.kind == FunctionKind::Object && d.name == b))
        });
        let enums = kernels.clone().flat_map(|k| {
            k.params
                .iter()
                .filter_map(|p| match p.kind {
                    ParamKind::Enum { class, .. } => Some(class),
                    _ => None,
                })
                .filter_map(|c| k.deps.iter().find(|d| d.kind == FunctionKind::Enum && d.name == c))
        });
        let mut exported: Vec<(String, &str)> = kernels.chain(bundles).chain(enums).map(|f| f.id()).collect();
        exported.sort();
        exported.dedup();
        // `from .a import X` then `from .b import X` would leave `X` the last
        // module's: a caller of the first module's kernel would build the wrong class.
        for (i, (m, n)) in exported.iter().enumerate() {
            if let Some((other, _)) = exported[i + 1..].iter().find(|(_, o)| o == n) {
                return Err(NkiError::new(
                    ErrorKind::Argument,
                    format!(
                        "`__init__.py` would export `{n}` from two Python modules, `{m}` and `{other}`: a package name must be unique (declare a shared enum or bundle once and import it with `use crate::..::{n};`)"
                    ),
                ));
            }
        }
        for (m, n) in &exported {
            init.push_str(&format!("from .{m} import {n}\n"));
        }
        let names: Vec<String> = exported.iter().map(|(_, n)| format!("    \"{n}\",")).collect();
        init.push_str(&format!("\n__all__ = [\n{}\n]\n", names.join("\n")));
        files.insert("__init__.py".into(), init);
        Ok(Package { files, origins })
    }

    /// The Rust source file (as [`FunctionInfo::source_file`] names it) and line
    /// that line `line` (1-based) of the module file `module` (`rope.py`) was
    /// emitted from, if it stands for Rust (not an import or a blank line).
    pub fn rust_line(&self, module: &str, line: usize) -> Option<(String, u32)> {
        let (file, rust) = (*self.origins.get(module)?.get(line.checked_sub(1)?)?)?;
        Some((clean_path(file), rust))
    }

    /// The files of the package: name → contents.
    pub fn files(&self) -> &BTreeMap<String, String> {
        &self.files
    }

    /// Writes the package into `dir` (created if needed).
    pub fn write_to(&self, dir: impl AsRef<Path>) -> Result<()> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|e| NkiError::new(ErrorKind::Io, format!("{}: {e}", dir.display())))?;
        for (name, text) in &self.files {
            let p = dir.join(name);
            std::fs::write(&p, text).map_err(|e| NkiError::new(ErrorKind::Io, format!("{}: {e}", p.display())))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixture's fields that the tests below do not vary.
    const BASE: FunctionInfo = FunctionInfo::item(FunctionKind::Kernel, "", "", "", "");

    static HELP: FunctionInfo = FunctionInfo {
        name: "helper",
        kind: FunctionKind::Helper,
        source: "def helper(x):\n    return x\n",
        module_path: "k::util",
        file: "src/util.rs",
        ..BASE
    };
    static KER: FunctionInfo = FunctionInfo {
        name: "kern",
        kind: FunctionKind::Kernel,
        source: "@nki.jit\ndef kern(a):\n    return helper(a)\n",
        module_path: "k::kern",
        file: "src/kern.rs",
        deps: &[&HELP],
        uses_math: true,
        ..BASE
    };

    #[test]
    fn modules_import_their_dependencies() {
        let p = Package::new(&[&KER]).unwrap();
        let names: Vec<&String> = p.files().keys().collect();
        assert_eq!(names, vec!["__init__.py", "kern.py", "util.py"]);
        let kern = &p.files()["kern.py"];
        assert!(kern.contains("import math\n") && kern.contains("from .util import helper\n"), "{kern}");
        assert!(p.files()["__init__.py"].contains("from .kern import kern\n"));
        assert!(!p.files()["__init__.py"].contains("helper"));
    }

    static LINED: FunctionInfo = FunctionInfo {
        name: "lined",
        source: "@nki.jit\ndef lined(a):\n    return helper(a)\n",
        module_path: "k::lined",
        file: "src/k/../lined.rs",
        lines: &[7, 7, 9],
        ..KER
    };

    #[test]
    fn each_emitted_line_maps_back_to_its_rust_line() {
        let p = Package::new(&[&LINED]).unwrap();
        let text = &p.files()["lined.py"];
        let line_of = |needle: &str| text.lines().position(|l| l == needle).unwrap() + 1;
        assert_eq!(p.rust_line("lined.py", line_of("def lined(a):")), Some(("src/lined.rs".into(), 7)));
        assert_eq!(p.rust_line("lined.py", line_of("    return helper(a)")), Some(("src/lined.rs".into(), 9)));
        assert_eq!(p.rust_line("lined.py", line_of("from .util import helper")), None, "an import stands for no Rust");
        assert_eq!(p.rust_line("util.py", line_of_in(&p, "util.py", "    return x")), None, "a helper without lines");
        assert_eq!(p.rust_line("lined.py", 0), None);
        assert_eq!(p.rust_line("lined.py", text.lines().count() + 1), None);
        assert_eq!(p.rust_line("other.py", 1), None);
    }

    fn line_of_in(p: &Package, module: &str, needle: &str) -> usize {
        p.files()[module].lines().position(|l| l == needle).unwrap() + 1
    }

    const CONF: (&str, &str) = ("k::conf", "src/conf.rs");
    static CFG: FunctionInfo =
        FunctionInfo::item(FunctionKind::Object, "Cfg", "@dataclass\nclass Cfg(nl.NKIObject):\n    n: int = 0\n", CONF.0, CONF.1);
    static OTHER: FunctionInfo = FunctionInfo { name: "Other", ..CFG };
    static CONFIGURED: FunctionInfo = FunctionInfo {
        deps: &[&CFG, &OTHER],
        params: &[ParamInfo { optional: true, default: Some("0"), bundle: Some("Cfg"), ..ParamInfo::required("cfg.n", ParamKind::Int) }],
        ..FunctionInfo::item(FunctionKind::Kernel, "configured", "@nki.jit\ndef configured(cfg):\n    pass\n", CONF.0, CONF.1)
    };

    #[test]
    fn the_package_exports_the_bundles_its_kernels_take() {
        let p = Package::new(&[&CONFIGURED]).unwrap();
        let init = &p.files()["__init__.py"];
        assert!(init.contains("from .conf import Cfg\nfrom .conf import configured\n"), "{init}");
        // A bundle the kernel only builds for its helpers stays private.
        assert!(!init.contains("Other"), "{init}");
        assert!(
            p.files()["conf.py"]
                .starts_with("\"\"\"NKI kernels generated by nki-rs from src/conf.rs.\"\"\"\n\nfrom dataclasses import dataclass\n")
        );
    }

    const PICK_AT: (&str, &str) = ("k::pick", "src/pick.rs");
    static ACT: FunctionInfo = FunctionInfo::item(FunctionKind::Enum, "Act", "class Act(Enum):\n    A = 0\n", PICK_AT.0, PICK_AT.1);
    static UNUSED: FunctionInfo = FunctionInfo { name: "Unused", ..ACT };
    static PICK: FunctionInfo = FunctionInfo {
        deps: &[&ACT, &UNUSED],
        params: &[ParamInfo::required("act", ParamKind::Enum { class: "Act", members: &["A"] })],
        ..FunctionInfo::item(FunctionKind::Kernel, "pick", "@nki.jit\ndef pick(act):\n    pass\n", PICK_AT.0, PICK_AT.1)
    };

    #[test]
    fn the_package_exports_the_enums_its_kernels_take() {
        let p = Package::new(&[&PICK]).unwrap();
        let init = &p.files()["__init__.py"];
        assert!(init.contains("from .pick import Act\nfrom .pick import pick\n"), "{init}");
        assert!(!init.contains("Unused"), "{init}");
        assert!(p.files()["pick.py"].contains("\n\nfrom enum import Enum\n"), "{}", p.files()["pick.py"]);
    }

    static ACT_ELSEWHERE: FunctionInfo = FunctionInfo { module_path: "k::choose", file: "src/choose.rs", ..ACT };
    static CHOOSE: FunctionInfo = FunctionInfo {
        name: "choose",
        source: "@nki.jit\ndef choose(act):\n    pass\n",
        module_path: "k::choose",
        file: "src/choose.rs",
        deps: &[&ACT_ELSEWHERE],
        ..PICK
    };

    #[test]
    fn two_modules_exporting_one_name_are_refused() {
        let e = Package::new(&[&PICK, &CHOOSE]).unwrap_err().to_string();
        assert!(e.contains("export `Act` from two Python modules, `choose` and `pick`"), "{e}");
        // Two kernels of one name in two modules collide the same way.
        static PICK_TOO: FunctionInfo = FunctionInfo { module_path: "k::choose", file: "src/choose.rs", deps: &[&ACT], ..PICK };
        let e = Package::new(&[&PICK, &PICK_TOO]).unwrap_err().to_string();
        assert!(e.contains("export `pick` from two Python modules, `choose` and `pick`"), "{e}");
    }

    static SHARED_ACT: FunctionInfo = FunctionInfo { module_path: "k::types", file: "src/types.rs", ..ACT };
    static PICK_SHARED: FunctionInfo = FunctionInfo { deps: &[&SHARED_ACT], ..PICK };
    static CHOOSE_SHARED: FunctionInfo = FunctionInfo { deps: &[&SHARED_ACT], ..CHOOSE };

    #[test]
    fn an_enum_shared_by_two_modules_is_exported_once() {
        let p = Package::new(&[&PICK_SHARED, &CHOOSE_SHARED]).unwrap();
        let init = &p.files()["__init__.py"];
        assert_eq!(init.matches("from .types import Act\n").count(), 1, "{init}");
        assert_eq!(init.matches("\"Act\",").count(), 1, "{init}");
        assert!(!init.contains("from .pick import Act") && !init.contains("from .choose import Act"), "{init}");
        assert!(p.files()["pick.py"].contains("from .types import Act\n"), "{}", p.files()["pick.py"]);
    }

    #[test]
    fn cleans_parent_components() {
        assert_eq!(clean_path("src/../examples/k/a.rs"), "examples/k/a.rs");
        assert_eq!(clean_path("../x/./y.rs"), "../x/y.rs");
    }
}
