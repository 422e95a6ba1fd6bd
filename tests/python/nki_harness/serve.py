"""`python -m nki_harness serve`: many `check` and `run` commands in one
process, so a caller that runs hundreds of kernels (the Rust test suites) pays
the interpreter's and NumPy's start-up once instead of once per kernel."""

HELP = """\
Reads one JSON request per line from stdin and answers each with one JSON line
on stdout, in order:
  request:  {"argv": ["run", "--package", DIR, "--spec", SPEC, "--out", OUT],
             "env": {"NKI_STRICT_UNINIT": "1", "OTHER": null}}
  answer:   {"status": 0, "stdout": "...", "stderr": "..."}
"argv" is what would follow `python -m nki_harness` (check or run); "env" sets
(a string) or removes (null) environment variables for that request only.
"status", "stdout" and "stderr" are what that command's own process would have
exited with and printed. Each request loads its package afresh (a package that
changed between requests runs as changed). The server exits at the end of its
input, and after answering a request whose launch was abandoned at its time
limit (the kernel's threads are still running; a fresh process starts clean)."""

import contextlib
import io
import json
import os
import sys
import threading

# Modules `runner` imports a package under (`nki_kernels_under_test_N`).
_PACKAGE_PREFIX = "nki_kernels_under_test_"


def main(command):
    """Serves requests with `command(argv) -> status` until stdin ends."""
    # The answers own the real stdout. Anything else written to file
    # descriptor 1 (a C extension's message) goes to stderr instead.
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            answer = _serve_one(command, request["argv"], request.get("env") or {})
        except (ValueError, KeyError, TypeError) as e:
            answer = {"status": 2, "stdout": "", "stderr": f"error: malformed request: {e}\n"}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
        if threading.active_count() > 1:
            return 0
    return 0


def _serve_one(command, argv, env):
    """Runs one command with its output captured and its environment
    changes undone afterwards."""
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise TypeError("argv must be a list of strings")
    saved = dict(os.environ)
    out, err = io.StringIO(), io.StringIO()
    try:
        for name, value in env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = str(value)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = command(argv)
            except SystemExit as e:  # argparse's usage errors and --help
                status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if not isinstance(e.code, (int, type(None))):
                    print(e.code, file=sys.stderr)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        for name in [m for m in sys.modules if m.startswith(_PACKAGE_PREFIX)]:
            del sys.modules[name]
    return {"status": status or 0, "stdout": out.getvalue(), "stderr": err.getvalue()}
