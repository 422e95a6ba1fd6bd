"""`python -m nki_harness serve`: the command-line tests again, every command
through one long-lived server, plus what only a server can get wrong (state
leaking from one request into the next, malformed requests, a timed-out
launch)."""

import json
import os
import subprocess
import sys
import textwrap
import unittest

import numpy as np

import test_harness
from nki_harness.fake_nki.undefined import STRICT_ENV


class Server:
    """One `serve` process and its request/answer pipe."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, "-m", "nki_harness", "serve"], cwd=test_harness.HERE,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def send(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        return json.loads(answer) if answer else None

    def ask(self, *argv, env=None):
        """Runs `argv` with this process's `NKI_STRICT_UNINIT`, as a child
        process would inherit it, plus `env`."""
        request_env = {STRICT_ENV: os.environ.get(STRICT_ENV), **(env or {})}
        return self.send(json.dumps({"argv": list(argv), "env": request_env}))

    def close(self):
        """Ends the input; the server's exit status."""
        try:
            self.proc.stdin.close()
        except BrokenPipeError:  # it has exited already
            pass
        status = self.proc.wait(timeout=30)
        self.proc.stdout.close()
        return status


class ServedCommandLineTest(test_harness.CommandLineTest):
    """Every command-line test, each command answered by one shared server."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server()

    @classmethod
    def tearDownClass(cls):
        cls.server.close()

    def harness(self, *args):
        answer = self.server.ask(*args)
        self.assertIsNotNone(answer, "the server stopped")
        return subprocess.CompletedProcess(args, answer["status"], answer["stdout"], answer["stderr"])


class ServeTest(unittest.TestCase):
    def setUp(self):
        self.cli = test_harness.CommandLineTest("test_check_and_run")
        self.cli.setUp()
        self.server = Server()

    def tearDown(self):
        self.server.close()
        self.cli.tearDown()

    def padded_spec(self):
        np.save(self.cli.dir / "x.npy", np.ones((3, 2)))
        return self.cli.spec(kernel="padded", args=[[{"npy": "x.npy", "dtype": "float32"}]])

    def run_padded(self, out, env):
        return self.server.ask("run", "--package", self.cli.pkg, "--spec", self.padded_spec(), "--out",
                               str(self.cli.dir / out), env=env)

    def test_a_requests_environment_ends_with_it(self):
        strict = self.run_padded("o1", {STRICT_ENV: "1"})
        self.assertEqual(strict["status"], 1, strict)
        self.assertIn("undefined behaviour", strict["stderr"])
        lenient = self.run_padded("o2", {STRICT_ENV: None})
        self.assertEqual(lenient["status"], 0, lenient)
        self.assertTrue(lenient["stderr"].startswith("warning: undefined behaviour"), lenient)
        # --strict-uninit sets the variable inside the command; the next
        # request runs without it.
        flag = self.server.ask("run", "--strict-uninit", "--package", self.cli.pkg, "--spec", self.padded_spec(),
                               "--out", str(self.cli.dir / "o3"), env={STRICT_ENV: None})
        self.assertEqual(flag["status"], 1, flag)
        self.assertEqual(self.run_padded("o4", {STRICT_ENV: None})["status"], 0)

    def test_a_package_changed_between_requests_runs_as_changed(self):
        np.save(self.cli.dir / "x.npy", np.ones((2, 2)))
        spec = self.cli.spec(kernel="scale", args=[[{"npy": "x.npy", "dtype": "float32"}, {"float": 0.5}]])
        run = lambda out: self.server.ask("run", "--package", self.cli.pkg, "--spec", spec, "--out", str(self.cli.dir / out))
        self.assertEqual(run("before")["status"], 0)
        kernels = self.cli.dir / "pkg" / "kernels.py"
        kernels.write_text(kernels.read_text().replace("nl.multiply", "nl.add"))
        self.assertEqual(run("after")["status"], 0)
        before, after = (np.load(self.cli.dir / out / "rank0_out0.npy") for out in ("before", "after"))
        np.testing.assert_array_equal(before, np.full((2, 2), 0.5, np.float32))
        np.testing.assert_array_equal(after, np.full((2, 2), 1.5, np.float32))

    def test_malformed_requests_are_answered_and_the_server_goes_on(self):
        for line in ("not json", "{}", json.dumps({"argv": "run"}), json.dumps({"argv": [1]})):
            answer = self.server.send(line)
            self.assertEqual(answer["status"], 2, line)
            self.assertIn("malformed request", answer["stderr"])
        usage = self.server.ask("frobnicate")
        self.assertEqual(usage["status"], 2)
        self.assertIn("invalid choice", usage["stderr"])
        self.assertEqual(self.server.ask("check", self.cli.pkg)["status"], 0)
        self.assertEqual(self.server.close(), 0)

    def test_a_timed_out_launch_ends_the_server_after_its_answer(self):
        (self.cli.dir / "pkg" / "slow.py").write_text(textwrap.dedent("""
            import time
            import nki
            import nki.language as nl
            import nki.isa as nisa


            @nki.jit
            def slow(x):
                time.sleep(3)
                out = nl.ndarray(shape=x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
                nisa.dma_copy(dst=out, src=x)
                return out
        """))
        with open(self.cli.dir / "pkg" / "__init__.py", "a") as f:
            f.write("\nfrom .slow import slow\n")
        np.save(self.cli.dir / "x.npy", np.ones((2, 2)))
        spec = self.cli.spec(kernel="slow", args=[[{"npy": "x.npy", "dtype": "float32"}]])
        answer = self.server.ask("run", "--timeout", "0.2", "--package", self.cli.pkg, "--spec", spec,
                                 "--out", str(self.cli.dir / "out"))
        self.assertEqual(answer["status"], 1, answer)
        self.assertIn("did not finish within 0.2 s", answer["stderr"])
        self.assertEqual(self.server.proc.wait(timeout=30), 0)


if __name__ == "__main__":
    unittest.main()
