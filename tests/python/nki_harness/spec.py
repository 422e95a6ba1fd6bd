"""The run spec (SPEC.json) written by the Rust tests.

```
{"kernel": "softmax", "lnc": 1, "ranks": 1, "precision": "fp32", "generation": "trn2",
 "args": [[ARG, ...], ...],          # one positional list per rank
 "kwargs": [{"name": ARG}, ...]}     # optional, one dict per rank
ARG = {"npy": PATH, "dtype": "bfloat16"} | {"int": 5} | {"float": 0.5} | {"bool": true}
    | {"none": true} | {"dtype": "float32"} | {"tuple": [ARG, ...]}
    | {"object": "Cfg", "fields": {"name": ARG, ...}}   # an nl.NKIObject the package exports
    | {"enum": "Act", "member": "SOFTMAX"}              # a member of an Enum the package exports
    | {"replica_group": [[0, 1], [2, 3]]}               # an ncc.ReplicaGroup of these rings
```
A relative `npy` path is taken from the spec file's directory. An `object` or
`enum` class is looked up in the kernel's own module first, then in the
package: two modules may each define a class of one name (two emitted kernels
each taking the library's `NormType`), and the package exports only one.
"""

import enum
import json
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np


class SpecError(Exception):
    """The spec is malformed or names something that does not exist."""


@dataclass
class Spec:
    kernel: str
    lnc: int
    ranks: int
    precision: str
    generation: str
    args: list
    kwargs: list
    base_dir: Path


def load(path):
    """Reads and validates a spec file."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise SpecError(f"cannot read the spec {path}: {e}") from None
    if not isinstance(raw, dict):
        raise SpecError("the spec must be a JSON object")

    def field(name, kind, default=None):
        v = raw.get(name, default)
        if not isinstance(v, kind) or isinstance(v, bool) and kind is int:
            raise SpecError(f"spec field {name!r} must be a {kind.__name__}, got {v!r}")
        return v

    ranks = field("ranks", int, 1)
    spec = Spec(field("kernel", str), field("lnc", int, 1), ranks, field("precision", str, "fp32"),
                field("generation", str, "trn2"), field("args", list), field("kwargs", list, [{}] * ranks),
                path.parent)
    if spec.lnc not in (1, 2):
        raise SpecError(f"lnc must be 1 or 2, got {spec.lnc}")
    if spec.precision not in ("fp32", "hardware"):
        raise SpecError(f"precision must be fp32 or hardware, got {spec.precision!r}")
    if len(spec.args) != ranks or len(spec.kwargs) != ranks:
        raise SpecError(f"args and kwargs need one entry per rank ({ranks}), got {len(spec.args)} and "
                        f"{len(spec.kwargs)}")
    if not all(isinstance(a, list) for a in spec.args) or not all(isinstance(k, dict) for k in spec.kwargs):
        raise SpecError("each rank's args must be a list and its kwargs an object")
    return spec


def input_paths(spec):
    """The `.npy` files the spec's arguments name, as given (relative to the spec's directory)."""
    found = []

    def walk(arg):
        if isinstance(arg, dict):
            if isinstance(arg.get("npy"), str):
                p = Path(arg["npy"])
                found.append(p if p.is_absolute() else spec.base_dir / p)
            for v in arg.get("tuple", []) if isinstance(arg.get("tuple"), list) else []:
                walk(v)
            for v in arg.get("fields", {}).values() if isinstance(arg.get("fields"), dict) else []:
                walk(v)

    for rank in spec.args:
        for a in rank:
            walk(a)
    for rank in spec.kwargs:
        for a in rank.values():
            walk(a)
    return found


def load_npy(spec, path):
    """The array of an `npy` argument (bfloat16 files saved by ml_dtypes read as bfloat16)."""
    p = Path(path) if Path(path).is_absolute() else spec.base_dir / path
    try:
        a = np.load(p, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise SpecError(f"cannot read {p}: {e}") from None
    if a.dtype.kind == "V" and a.dtype.itemsize == 2:
        a = a.view(ml_dtypes.bfloat16)
    return a


def decode(spec, arg, tensor, dtype, bundle=None, group=None):
    """The Python value of one ARG: `tensor(array, dtype_name)` builds HBM inputs,
    `dtype(name)` resolves dtype names, `bundle(name)` the classes the package
    exports (a configuration dataclass built from its fields, an `Enum`),
    `group(rings)` the running `nki`'s `ncc.ReplicaGroup`."""
    if isinstance(arg, dict) and "object" in arg:
        return _bundle(spec, arg, tensor, dtype, bundle, group)
    if isinstance(arg, dict) and "enum" in arg:
        return _member(arg, bundle)
    if isinstance(arg, dict) and "replica_group" in arg:
        return _replica_group(arg, group)
    if not isinstance(arg, dict) or len(arg.keys() - {"dtype"}) > 1:
        raise SpecError(f"malformed argument {arg!r}")
    if "npy" in arg:
        a = load_npy(spec, arg["npy"])
        return tensor(a, arg.get("dtype", "float32" if a.dtype.kind in "fV" else "int32"))
    for key, kind in (("int", int), ("float", (int, float)), ("bool", bool)):
        if key in arg:
            v = arg[key]
            if not isinstance(v, kind) or (key != "bool" and isinstance(v, bool)):
                raise SpecError(f"argument {arg!r} must hold a {key}")
            return float(v) if key == "float" else v
    if "none" in arg:
        return None
    if "tuple" in arg:
        return tuple(decode(spec, a, tensor, dtype, bundle, group) for a in arg["tuple"])
    if "dtype" in arg:
        return dtype(arg["dtype"])
    raise SpecError(f"malformed argument {arg!r}")


def _bundle(spec, arg, tensor, dtype, bundle, group):
    """An `{"object": NAME, "fields": {...}}` argument: the class NAME the package
    exports, built with its fields as keyword arguments (the others keep their
    defaults)."""
    name, fields = arg.get("object"), arg.get("fields", {})
    if arg.keys() - {"object", "fields"} or not isinstance(name, str) or not isinstance(fields, dict):
        raise SpecError(f"malformed argument {arg!r}")
    cls = bundle(name) if bundle else None
    if cls is None:
        raise SpecError(f"the package exports no class named {name!r}")
    values = {k: decode(spec, v, tensor, dtype, bundle, group) for k, v in fields.items()}
    try:
        return cls(**values)
    except TypeError as e:
        raise SpecError(f"cannot build {name}: {e}") from None


def _member(arg, bundle):
    """An `{"enum": NAME, "member": MEMBER}` argument: the member MEMBER of the
    `Enum` class NAME the package exports."""
    name, member = arg.get("enum"), arg.get("member")
    if arg.keys() - {"enum", "member"} or not isinstance(name, str) or not isinstance(member, str):
        raise SpecError(f"malformed argument {arg!r}")
    cls = bundle(name) if bundle else None
    if cls is None or not issubclass(cls, enum.Enum):
        raise SpecError(f"the package exports no Enum class named {name!r}")
    if member not in cls.__members__:
        raise SpecError(f"{name} has no member {member!r}; its members are {', '.join(cls.__members__)}")
    return cls[member]


def _replica_group(arg, group):
    """A `{"replica_group": [[rank, ...], ...]}` argument: an `ncc.ReplicaGroup`
    of those rings, as the library's collectives take one."""
    rings = arg.get("replica_group")
    well_formed = isinstance(rings, list) and all(
        isinstance(g, list) and all(isinstance(r, int) and not isinstance(r, bool) for r in g) for g in rings)
    if arg.keys() - {"replica_group"} or not well_formed:
        raise SpecError(f"malformed argument {arg!r}: a replica group is a list of lists of ranks")
    if group is None:
        raise SpecError("this runner builds no ncc.ReplicaGroup")
    return group(rings)
