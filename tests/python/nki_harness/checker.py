"""`python -m nki_harness check PACKAGE_DIR`: checks emitted Python against the
official NKI API without running it.

Reported, one `file:line: message` per problem:
* an attribute chain rooted at `nki`, `nl`, `nisa` or `ncc` (or another alias
  the file imports) that is not a public name, class member or enum member;
* a call of an `nl` / `nisa` / `ncc` function that passes a keyword it does not
  have, passes positional arguments (the project passes keywords to every NKI
  function), or more positionals than it has parameters;
* a call of an API class that the stub gives no parameters for, except the
  positional-only `ncc.ReplicaGroup(groups)`;
* a call of a method named like an `NkiTensor` method with a keyword that the
  method does not have, or too many positionals.
"""

import ast
import sys
from pathlib import Path

from .signatures import POSITIONAL_CLASSES, Api

DEFAULT_ALIASES = {"nki": "nki", "nl": "nki.language", "nisa": "nki.isa", "ncc": "nki.collectives"}


class FileChecker(ast.NodeVisitor):
    """Collects `(line, message)` problems of one module."""

    def __init__(self, api):
        self.api = api
        self.aliases = dict(DEFAULT_ALIASES)
        self.problems = []
        self.calls = 0

    def report(self, node, message):
        self.problems.append((node.lineno, message))

    def visit_Import(self, node):
        for alias in node.names:
            parts = alias.name.split(".")
            if parts[0] != "nki":
                continue
            r = self.api.resolve(parts)
            if r.error or r.kind != "module":
                self.report(node, f"unknown module {alias.name}")
            elif alias.asname:
                self.aliases[alias.asname] = alias.name

    def visit_ImportFrom(self, node):
        if node.level or not node.module or node.module.split(".")[0] != "nki":
            return
        for alias in node.names:
            r = self.api.resolve(node.module.split(".") + [alias.name])
            if r.error:
                self.report(node, f"unknown name {node.module}.{alias.name}: {r.error}")
            elif r.kind == "module":
                self.aliases[alias.asname or alias.name] = r.qualname

    def chain(self, node):
        """(dotted path from `nki`, source text) of an attribute chain on an NKI alias, else None."""
        attrs = []
        while isinstance(node, ast.Attribute):
            attrs.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.aliases or not attrs:
            return None
        attrs.reverse()
        return self.aliases[node.id].split(".") + attrs, ".".join([node.id] + attrs)

    def visit_Attribute(self, node):
        found = self.chain(node)
        if found is None:
            self.generic_visit(node)
            return
        parts, text = found
        r = self.api.resolve(parts)
        if r.error:
            self.report(node, f"unknown name {text}: {r.error}")

    def visit_Call(self, node):
        found = self.chain(node.func)
        if found is not None:
            self.check_api_call(node, *found)
        elif isinstance(node.func, ast.Attribute) and node.func.attr in self.api.methods:
            self.check_method_call(node, node.func.attr)
        self.generic_visit(node)

    def check_keywords(self, node, text, params, any_keyword=False):
        for kw in node.keywords:
            if kw.arg is None:
                self.report(node, f"{text}: **-arguments cannot be checked; pass keywords explicitly")
            elif kw.arg not in params and not any_keyword:
                self.report(node, f"{text} has no parameter {kw.arg!r} (it takes {', '.join(params) or 'none'})")

    def check_api_call(self, node, parts, text):
        r = self.api.resolve(parts)
        if r.error:
            return  # reported as an unknown name
        self.calls += 1
        n = len(node.args)
        if r.kind == "function":
            params = self.api.params(r.qualname)
            if params is None:
                return  # nki.jit / nki.simulate: no signature in the stub tables
            self.check_keywords(node, text, params, self.api.accepts_any_keyword(r.qualname))
            if n > len(params):
                self.report(node, f"{text} takes at most {len(params)} arguments, {n} positional given")
            elif n:
                self.report(node, f"{text} is called with {n} positional argument(s); NKI calls must pass every "
                                  "argument by keyword")
        elif r.kind == "class":
            limit = POSITIONAL_CLASSES.get(r.qualname)
            if limit is None:
                self.report(node, f"{text}: the stub shows no parameters for this class, so the call cannot be "
                                  "checked")
                return
            if node.keywords:
                self.report(node, f"{text} takes its {limit} argument(s) positionally; the stub names no "
                                  "parameters")
            if n > limit:
                self.report(node, f"{text} takes {limit} positional argument(s), {n} given")
        else:
            self.report(node, f"{text} is a {r.kind}, not a function")

    def check_method_call(self, node, name):
        sig = self.api.methods[name]
        params = sig["params"][1:] + sig["kwonly"]
        text = f".{name}() (NkiTensor.{name})"
        self.calls += 1
        self.check_keywords(node, text, params, sig.get("has_var_kwargs", False))
        if len(node.args) > len(params) and "var_positional" not in sig:
            self.report(node, f"{text} takes at most {len(params)} arguments, {len(node.args)} positional given")


def check_file(api, path):
    """Problems `(line, message)` of one file and its number of checked calls."""
    try:
        tree = ast.parse(Path(path).read_text(), filename=str(path))
    except SyntaxError as e:
        return [(e.lineno or 1, f"syntax error: {e.msg}")], 0
    fc = FileChecker(api)
    fc.visit(tree)
    return sorted(fc.problems), fc.calls


def main(package_dir, signatures_path, names_path):
    """Checks every `.py` under `package_dir`; prints problems; returns the exit code."""
    root = Path(package_dir)
    if not root.is_dir():
        print(f"error: {root} is not a directory", file=sys.stderr)
        return 1
    api = Api(names_path, signatures_path)
    files = sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)
    problems, calls = [], 0
    for f in files:
        found, n = check_file(api, f)
        calls += n
        problems += [f"{f}:{line}: {msg}" for line, msg in found]
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problem(s) in {root}", file=sys.stderr)
        return 1
    print(f"checked {len(files)} file(s), {calls} NKI call(s): no problems")
    return 0
