"""Command line: `python -m nki_harness check PACKAGE_DIR`,
`python -m nki_harness run --package DIR --spec SPEC.json --out OUTDIR` and
`python -m nki_harness serve` (many of those commands in one process)."""

RUN_HELP = """\
Runs one @nki.jit kernel of any NKI 2.x package on the NumPy executor (a CPU
implementation of the public nki, nki.language, nki.isa and nki.collectives
API) and writes its outputs. The package may be one nki-rs emitted or one
written by hand: a directory with an __init__.py that does `import nki`,
`import nki.language as nl`, ... and exports the kernel by name.

SPEC.json names the kernel and its arguments, per rank:
  {"kernel": "scaled_softmax", "lnc": 1, "ranks": 1, "precision": "fp32",
   "generation": "trn2", "args": [[{"npy": "x.npy", "dtype": "float32"},
   {"float": 0.5}]], "kwargs": [{}]}
An argument is {"npy": PATH, "dtype": NAME} (an HBM input; a relative PATH is
taken from the spec's directory), {"int": 5}, {"float": 0.5}, {"bool": true},
{"none": true}, {"dtype": "bfloat16"}, {"tuple": [ARG, ...]},
{"object": "Cfg", "fields": {"bs": ARG, ...}} (an nl.NKIObject class the package
exports, built from the fields given, the others at their defaults),
{"enum": "Act", "member": "SOFTMAX"} (a member of an Enum class the package
exports; classes are looked up in the kernel's module first) or
{"replica_group": [[0, 1], [2, 3]]} (an ncc.ReplicaGroup of those rings). "lnc": 2 runs
kernel[2] (an LNC2 pair); "ranks" > 1 runs one copy per rank for
nki.collectives; "precision": "hardware" rounds every result to its dtype;
"generation" is trn1, trn2 or trn3.

OUTDIR receives rank{r}_out{i}.npy for every returned tensor (float32 or int32
values) and result.json listing them. To compare a hand-written NKI kernel with
a DSL kernel, run both packages on the same spec inputs and compare the .npy
files. Example (from tests/python):
  python -m nki_harness run --package nki_packages/hand_written \\
      --spec SPEC.json --out OUT
A read of memory the kernel never wrote (undefined behaviour: on hardware it
holds whatever was there) reads zero bits and prints one `warning:` line per
tensor, instruction and kernel line; --strict-uninit (or NKI_STRICT_UNINIT=1)
makes it an error.
Exit status: 0 on success, 1 (one `error:` line) when the kernel breaks an NKI
or hardware rule, or the spec is malformed."""

import argparse
import os
import sys
import traceback
import warnings

from . import checker, runner, serve
from .fake_nki.errors import NkiError
from .fake_nki.undefined import STRICT_ENV, UndefinedRead
from .signatures import DEFAULT_NAMES, DEFAULT_SIGNATURES
from .spec import SpecError


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m nki_harness", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="check emitted Python against the official NKI API")
    c.add_argument("package_dir")
    c.add_argument("--signatures", default=str(DEFAULT_SIGNATURES))
    c.add_argument("--names", default=str(DEFAULT_NAMES))
    r = sub.add_parser("run", help="execute a kernel of any NKI package with NumPy", description=RUN_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("--package", required=True, help="directory of the NKI package (holds __init__.py)")
    r.add_argument("--spec", required=True, help="SPEC.json: the kernel, its arguments and the launch")
    r.add_argument("--out", required=True, help="directory for rank{r}_out{i}.npy and result.json")
    r.add_argument("--timeout", type=float, default=600.0, help="seconds before the launch is abandoned")
    r.add_argument("--traceback", action="store_true",
                   help="on failure, print the Python traceback (the kernel's frames) before the error line")
    r.add_argument("--strict-uninit", action="store_true",
                   help="make a read of memory the kernel never wrote an error (else a warning line)")
    sub.add_parser("serve", help="run many check and run commands in one process (one JSON request per line)",
                   description=serve.HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    a = p.parse_args(argv)
    if a.command == "serve":
        return serve.main(main)
    if a.command == "check":
        return checker.main(a.package_dir, a.signatures, a.names)
    if a.strict_uninit:
        os.environ[STRICT_ENV] = "1"
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UndefinedRead)
            try:
                runner.run(a.package, a.spec, a.out, a.timeout)
            finally:
                for w in caught:
                    if issubclass(w.category, UndefinedRead):
                        print(f"warning: {w.message}", file=sys.stderr)
                    else:
                        warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    except Exception as e:  # any failure is one `error:` line and exit status 1
        msg = str(e) if isinstance(e, (NkiError, SpecError)) else f"{type(e).__name__}: {e}"
        if a.traceback:
            print(getattr(e, "traceback", None) or traceback.format_exc(), end="", file=sys.stderr)
        print("error: " + " ".join(msg.split()), file=sys.stderr)
        return 1
    return 0

