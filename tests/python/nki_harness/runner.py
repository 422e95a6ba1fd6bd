"""`python -m nki_harness run`: executes a kernel of an NKI package (emitted by
nki-rs or written by hand) per a spec and writes its outputs.

For each rank r the kernel's return value (a tensor or a tuple of tensors) is
written as `OUT/rank{r}_out{i}.npy` (float32 for float dtypes, int32 for
integer dtypes: the values as stored), plus `OUT/result.json` =
`{"ranks": [[{"file": ..., "shape": [...], "dtype": "bfloat16"}, ...], ...]}`.
As `nki run` does, the outputs never overwrite an input (the spec or a file
it names, under any name: a symlink, a hard link) and are written all or
nothing: each to a temporary file next to it, renamed into place once all are
written.

The kernel runs on the NumPy fake `nki` unless a real `nki` package with
`nki.simulate` is importable, in which case that simulator runs it (one rank only,
as it has no collectives).
"""

import ast
import importlib
import importlib.util
import itertools
import json
import os
import sys
from pathlib import Path

import ml_dtypes  # noqa: F401  (registers the bfloat16 / float8 dtype names)
import numpy as np

from . import spec as specs
from .spec import SpecError

_packages = itertools.count()


def load_package(path):
    """Imports the emitted package at `path` under a fresh module name."""
    return complete(_new_package(path))


def load_export(path, name):
    """The package at `path` (as [`load_package`] imports it) and the object it
    exports as `name`. When its `__init__.py` says which module holds `name`
    (`from .module import name`), only that module and what it imports run: a
    package of a hundred kernels costs one kernel's import, and [`complete`]
    runs the rest on demand."""
    package = _new_package(path)
    source = _source_of(Path(path) / "__init__.py", name)
    if source is None:
        return complete(package), getattr(package, name, None)
    home, attr = source
    return package, getattr(importlib.import_module(f"{package.__name__}.{home}"), attr, None)


def _new_package(path):
    """The module object of the package at `path` under a fresh name, its
    `__init__.py` not run yet."""
    path = Path(path)
    init = path / "__init__.py"
    if not init.is_file():
        raise SpecError(f"{path} is not a Python package (no __init__.py)")
    # Bytecode goes under NKI_PACKAGE_PYCACHE or PYTHONPYCACHEPREFIX when one
    # is set (then later runs of the package skip compiling it), never into the
    # emitted (or snapshot) package itself. Set here, after the harness's own
    # imports, so only the modules imported from now on are cached there.
    sys.pycache_prefix = os.environ.get("NKI_PACKAGE_PYCACHE") or sys.pycache_prefix
    sys.dont_write_bytecode = sys.pycache_prefix is None
    name = f"nki_kernels_under_test_{next(_packages)}"
    module_spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(path)])
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    return module


def complete(package):
    """Runs the package's `__init__.py` unless it ran (after [`load_export`]
    imported one module, the other exports become attributes)."""
    if not getattr(package, "__nki_complete__", False):
        package.__spec__.loader.exec_module(package)
        package.__nki_complete__ = True
    return package


def _source_of(init, name):
    """(module, attribute) that `init` imports `name` from with a top-level
    `from .module import attribute [as name]`, or None."""
    try:
        tree = ast.parse(init.read_text())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                if (alias.asname or alias.name) == name and alias.name != "*":
                    return node.module, alias.name
    return None


def _real_nki():
    """The real `nki` package when it is installed and has `nki.simulate`, else None."""
    if "nki" not in sys.modules and importlib.util.find_spec("nki") is None:
        return None
    import nki

    from . import fake_nki

    return nki if hasattr(nki, "simulate") and nki is not fake_nki else None


def _kernel(package_dir, spec):
    """The spec's kernel, and a resolver of the classes the package exports (the
    configuration objects some kernels take)."""
    package, kernel = load_export(package_dir, spec.kernel)
    if kernel is None:
        raise SpecError(f"the package exports no kernel named {spec.kernel!r}")

    # The kernel's own module first: two modules of a package may each define a
    # class of the same name (an enum both kernels take), and the package
    # exports only one of them under that name.
    home = sys.modules.get(getattr(getattr(kernel, "fn", kernel), "__module__", ""), None)

    def bundle(name):
        cls = getattr(home, name, None) if home is not None else None
        if not isinstance(cls, type):
            cls = getattr(complete(package), name, None)
        return cls if isinstance(cls, type) else None

    return kernel, bundle


def _run_fake(package_dir, spec, timeout):
    from . import fake_nki
    from .fake_nki import language as nl
    from .fake_nki.tensor import SHARED_HBM, from_cells

    fake_nki.install()
    kernel, bundle = _kernel(package_dir, spec)
    if not isinstance(kernel, fake_nki.Kernel):
        raise SpecError(f"{spec.kernel!r} is not an @nki.jit kernel")

    def dtype(name):
        d = getattr(nl, name, None)
        if not isinstance(d, type(nl.float32)):
            raise SpecError(f"unknown dtype {name!r}")
        return d

    def tensor(array, name):
        d = dtype(name)
        if d.is_float:
            # A float32 array (the usual input, at times hundreds of MB) is used
            # as read: the float64 detour of other arrays leaves it as it is.
            wide = array if array.dtype == np.float32 else array.astype(np.float64).astype(np.float32)
            cells = d.round(wide)
        elif array.dtype.kind in "fV":
            cells = d.saturate(np.trunc(np.nan_to_num(array.astype(np.float64), nan=0.0)))
        else:
            cells = d.saturate(array.astype(np.int64))
        return from_cells("input", d, SHARED_HBM, np.asarray(cells))

    group = fake_nki.collectives.ReplicaGroup
    args = [[specs.decode(spec, a, tensor, dtype, bundle, group) for a in rank] for rank in spec.args]
    kwargs = [{k: specs.decode(spec, a, tensor, dtype, bundle, group) for k, a in rank.items()} for rank in spec.kwargs]
    target = kernel if spec.lnc == 1 else kernel[spec.lnc]
    results = fake_nki.launch(target, args, kwargs, spec.precision, spec.generation, timeout)
    return [[(t.read_cells(), t.dtype.name) for t in _outputs(r, nl.NkiTensor)] for r in results]


def _run_real(nki, package_dir, spec):
    if spec.ranks != 1:
        raise SpecError("nki.simulate does not implement nki.collectives; run several ranks on the NumPy fake")
    import nki.collectives as ncc
    import nki.language as nl

    kernel, bundle = _kernel(package_dir, spec)

    def tensor(array, name):
        return array.astype(np.dtype(name))  # ml_dtypes registers bfloat16 and the float8 names

    args = [specs.decode(spec, a, tensor, lambda n: getattr(nl, n), bundle, ncc.ReplicaGroup) for a in spec.args[0]]
    kwargs = {k: specs.decode(spec, a, tensor, lambda n: getattr(nl, n), bundle, ncc.ReplicaGroup)
              for k, a in spec.kwargs[0].items()}
    target = kernel if spec.lnc == 1 else kernel[spec.lnc]
    result = nki.simulate(target)(*args, **kwargs)
    return [[(np.asarray(o), np.asarray(o).dtype.name) for o in _outputs(result, np.ndarray)]]


def _outputs(value, kind):
    outs = list(value) if isinstance(value, (tuple, list)) else [] if value is None else [value]
    if not all(isinstance(o, kind) for o in outs):
        raise SpecError(f"the kernel returned {value!r}; expected a tensor or a tuple of tensors")
    return outs


def run(package_dir, spec_path, out_dir, timeout=600.0):
    """Runs the spec's kernel and writes its outputs into `out_dir`."""
    spec = specs.load(spec_path)
    os.environ["NKI_PRECISE_FP"] = "1" if spec.precision == "hardware" else "0"
    os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = spec.generation
    nki = _real_nki()
    out = Path(out_dir)
    inputs = [Path(spec_path)] + specs.input_paths(spec)
    _refuse_inputs(out / "result.json", inputs)
    ranks = _run_real(nki, package_dir, spec) if nki else _run_fake(package_dir, spec, timeout)
    files, listing = {}, []
    for r, outputs in enumerate(ranks):
        entries = []
        for i, (cells, dtype) in enumerate(outputs):
            file = f"rank{r}_out{i}.npy"
            kind = np.int32 if np.issubdtype(cells.dtype, np.integer) else np.float32
            files[file] = np.asarray(cells).astype(kind)
            entries.append({"file": file, "shape": list(cells.shape), "dtype": dtype})
        listing.append(entries)
    files["result.json"] = json.dumps({"ranks": listing})
    for file in files:
        _refuse_inputs(out / file, inputs)
    out.mkdir(parents=True, exist_ok=True)
    _write_all(out, files)


def _same_file(a, b):
    """Whether paths `a` and `b` lead to one file (by location or identity)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _refuse_inputs(output, inputs):
    """Refuses an output path that is one of the inputs."""
    for i in inputs:
        if _same_file(output, i):
            raise SpecError(f"the output {output} is the same file as the input {i}: an output never overwrites an input")


def _write_all(out, files):
    """Writes `files` ({name: array or text}) into `out` all or nothing: each to a
    temporary sibling first, then renamed over its target."""
    staged = []
    try:
        for name, value in files.items():
            tmp = out / f".{name}.nki-{os.getpid()}.tmp"
            staged.append(tmp)
            with open(tmp, "wb") as f:
                if isinstance(value, str):
                    f.write(value.encode())
                else:
                    np.save(f, value)
                f.flush()
                os.fsync(f.fileno())
        for tmp, name in zip(staged, files):
            os.replace(tmp, out / name)
    finally:
        for tmp in staged:
            if tmp.exists():
                tmp.unlink()
