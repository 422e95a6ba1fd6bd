"""The official NKI API surface, from the JSON facts in `tests/data/`.

`nki-api-names.json` maps each module (`nki`, `nki.language`, ...) to its
module-level names: `"function"`, `"value"`, `"import"` (not public), or
`{"kind": ..., "members": [...]}` for classes and values with known members.
`nki-api-signatures.json` maps qualified functions and `NkiTensor` methods to
their parameter names.
"""

import json
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_SIGNATURES = REPO_ROOT / "tests" / "data" / "nki-api-signatures.json"
DEFAULT_NAMES = REPO_ROOT / "tests" / "data" / "nki-api-names.json"
TENSOR_CLASS = "nki.language.NkiTensor"

# Classes whose stub shows no parameter names; NKI code constructs them positionally.
POSITIONAL_CLASSES = {"nki.collectives.ReplicaGroup": 1}


@dataclass
class Resolved:
    """What a dotted path names: `qualname` and its `kind` (module, function,
    class, value or member), or an `error` explaining why it is not public."""

    qualname: str
    kind: str = ""
    error: str = ""


class Api:
    """Lookups over the names and signatures tables."""

    def __init__(self, names_path=DEFAULT_NAMES, signatures_path=DEFAULT_SIGNATURES):
        names = json.loads(Path(names_path).read_text())
        self.modules = {m: entries for m, entries in names.items() if not m.startswith("_")}
        self.signatures = json.loads(Path(signatures_path).read_text())
        prefix = TENSOR_CLASS + "."
        self.methods = {k[len(prefix):]: v for k, v in self.signatures.items() if k.startswith(prefix)}

    def resolve(self, parts):
        """Resolves a dotted path rooted at the `nki` package. Attributes past a
        member (or past a function or plain value) are not the API's business."""
        for cut in range(len(parts), 0, -1):
            module = ".".join(parts[:cut])
            if module in self.modules:
                break
        else:
            return Resolved(".".join(parts), error="is not an nki module")
        if cut == len(parts):
            return Resolved(module, "module")
        name = parts[cut]
        qualname = f"{module}.{name}"
        entry = self.modules[module].get(name)
        if entry is None or entry == "import":
            return Resolved(qualname, error=f"{module} has no public name {name!r}")
        if isinstance(entry, str):
            return Resolved(qualname, entry)
        if cut + 1 == len(parts):
            return Resolved(qualname, entry["kind"])
        member = parts[cut + 1]
        if member not in entry["members"]:
            return Resolved(f"{qualname}.{member}", error=f"{qualname} has no member {member!r}")
        return Resolved(f"{qualname}.{member}", "member")

    def params(self, qualname):
        """Parameter names of a function, or None when no signature is known."""
        sig = self.signatures.get(qualname)
        return None if sig is None else sig["params"] + sig["kwonly"]

    def accepts_any_keyword(self, qualname):
        return bool(self.signatures.get(qualname, {}).get("has_var_kwargs"))
