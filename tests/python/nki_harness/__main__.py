"""Command line: `python -m nki_harness check PACKAGE_DIR` and
`python -m nki_harness run --package DIR --spec SPEC.json --out OUTDIR`."""

import argparse
import sys

from . import checker, runner
from .fake_nki.errors import NkiError
from .signatures import DEFAULT_NAMES, DEFAULT_SIGNATURES
from .spec import SpecError


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m nki_harness", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="check emitted Python against the official NKI API")
    c.add_argument("package_dir")
    c.add_argument("--signatures", default=str(DEFAULT_SIGNATURES))
    c.add_argument("--names", default=str(DEFAULT_NAMES))
    r = sub.add_parser("run", help="execute an emitted kernel with NumPy")
    r.add_argument("--package", required=True)
    r.add_argument("--spec", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--timeout", type=float, default=600.0, help="seconds before the launch is abandoned")
    a = p.parse_args(argv)
    if a.command == "check":
        return checker.main(a.package_dir, a.signatures, a.names)
    try:
        runner.run(a.package, a.spec, a.out, a.timeout)
    except Exception as e:  # any failure is one `error:` line and exit status 1
        msg = str(e) if isinstance(e, (NkiError, SpecError)) else f"{type(e).__name__}: {e}"
        print("error: " + " ".join(msg.split()), file=sys.stderr)
        return 1
    return 0


sys.exit(main())
