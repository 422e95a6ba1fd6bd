"""NKI kernels written by hand against the official API
(`nki_packages/hand_written/`, loaded as any NKI package is) run on the executor
and match float64 references written here from the math each kernel
documents."""

import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np

import nki_harness.fake_nki as fake
from nki_harness.fake_nki.tensor import SHARED_HBM, from_cells
from nki_harness.runner import load_package

fake.install()
import nki.language as nl  # noqa: E402

PACKAGE = Path(__file__).resolve().parent / "nki_packages" / "hand_written"
ak = load_package(PACKAGE)

RNG = np.random.default_rng(14)


def hbm(values, dtype=nl.float32):
    values = np.asarray(values)
    cells = dtype.encode(values.astype(np.float32), True) if dtype.is_float else dtype.saturate(values)
    return from_cells("input", dtype, SHARED_HBM, np.asarray(cells))


def host(t):
    return t.dtype.decode(t.read_cells()).astype(np.float64)


class AuthorKernelTest(unittest.TestCase):
    def test_scaled_softmax(self):
        x = RNG.standard_normal((128, 64))
        out = fake.launch(ak.scaled_softmax, [[hbm(x), 0.5]])[0]
        z = np.exp(0.5 * x - 0.5 * x.max(axis=1, keepdims=True))
        np.testing.assert_allclose(host(out), z / z.sum(axis=1, keepdims=True), rtol=2e-6, atol=1e-7)

    def test_matmul_via_identity_returns_a_list(self):
        a, b = RNG.standard_normal((64, 96)), RNG.standard_normal((96, 80))
        result = fake.launch(ak.matmul_via_identity, [[hbm(a), hbm(b)]])[0]
        self.assertIsInstance(result, list)
        c, at = result
        np.testing.assert_array_equal(host(at), a.astype(np.float32).T)
        np.testing.assert_allclose(host(c), a.astype(np.float32).astype(np.float64) @ b.astype(np.float32),
                                   rtol=1e-5, atol=1e-4)

    def test_swap_halves_under_lnc2(self):
        x = RNG.standard_normal((64, 32)).astype(np.float32)
        out = fake.launch(ak.swap_halves[2], [[hbm(x)]])[0]
        top, bottom = x[:32].astype(np.float64), x[32:].astype(np.float64)
        np.testing.assert_allclose(host(out), np.concatenate([2 * bottom + top, 2 * top + bottom]), rtol=1e-6)

    def test_kernels_run_standalone_on_numpy_arrays(self):
        x = RNG.standard_normal((32, 16)).astype(np.float32)
        out = ak.swap_halves[2](x)
        out_sim = fake.simulate(ak.scaled_softmax)(x, 1.0)
        self.assertIsInstance(out, np.ndarray)
        np.testing.assert_allclose(out, np.concatenate([2 * x[16:] + x[:16], 2 * x[:16] + x[16:]]), rtol=1e-6)
        z = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
        np.testing.assert_allclose(out_sim, z / z.sum(axis=1, keepdims=True), rtol=2e-6, atol=1e-7)

    def test_swap_halves_needs_the_pair(self):
        with self.assertRaisesRegex(Exception, "LNC2"):
            fake.launch(ak.swap_halves, [[hbm(np.zeros((64, 32)))]])

    def test_tiled_rms_norm(self):
        x, w = RNG.standard_normal((128, 256)), RNG.standard_normal((1, 256))
        out = fake.launch(ak.tiled_rms_norm, [[hbm(x), hbm(w), 64]])[0]
        want = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-5) * w
        np.testing.assert_allclose(host(out), want, rtol=2e-5, atol=2e-6)

    def test_layer_norm_with_bn_stats(self):
        x = RNG.standard_normal((96, 384)) * 3 + 1
        out = fake.launch(ak.layer_norm_bn, [[hbm(x), 1e-5]])[0]
        want = (x - x.mean(axis=1, keepdims=True)) / np.sqrt(x.var(axis=1, keepdims=True) + 1e-5)
        np.testing.assert_allclose(host(out), want, rtol=1e-4, atol=1e-5)

    def test_collectives_over_four_ranks(self):
        xs = [RNG.standard_normal((8, 16)) for _ in range(4)]
        results = fake.launch(ak.all_reduce_then_gather, [[hbm(x)] for x in xs], timeout=30)
        for total, stacked in results:
            np.testing.assert_allclose(host(total), sum(x.astype(np.float32).astype(np.float64) for x in xs),
                                       rtol=1e-6, atol=1e-6)
            np.testing.assert_array_equal(host(stacked), np.concatenate(xs).astype(np.float32))


class ConventionsTest(unittest.TestCase):
    """The kernels of `hand_written/conventions.py`: module paths, dtype names and
    instruction forms that production NKI code uses beyond the official stubs."""

    def test_abs_is_an_alu_op_of_tensor_scalar_reduce(self):
        x = RNG.standard_normal((128, 64))
        mags, peak = fake.launch(ak.row_abs_max, [[hbm(x)]])[0]
        x32 = x.astype(np.float32).astype(np.float64)
        np.testing.assert_array_equal(host(mags), np.abs(x32))
        np.testing.assert_array_equal(host(peak), np.abs(x32).max(axis=1, keepdims=True))

    def test_a_unary_alu_op_takes_no_operand(self):
        import nki.isa as nisa

        @fake.jit
        def bad(x):
            t = nl.load(x)
            out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar_reduce(dst=out, data=t, op0=nl.abs, operand0=2.0, reduce_op=nl.add)
            return x

        with self.assertRaisesRegex(Exception, "operand0 must be None or 0 when op0 is the unary op nl.abs"):
            fake.launch(bad, [[hbm(np.ones((4, 4)))]])

    def test_dtypes_are_named_by_their_plain_string(self):
        self.assertEqual(str(nl.bfloat16), "bfloat16")
        self.assertEqual(f"{nl.float8_e4m3}", "float8_e4m3")
        self.assertIsInstance(nl.int32, fake.dtype)
        x = RNG.standard_normal((128, 16)) * 3
        for dtype, np_type in ((nl.bfloat16, "bfloat16"), (nl.float16, np.float16)):
            out = fake.launch(ak.cast_to, [[hbm(x), dtype]], precision="hardware")[0]
            self.assertIs(out.dtype, dtype)
            import ml_dtypes  # noqa: F401  (registers bfloat16)
            want = x.astype(np.float32).astype(np_type).astype(np.float64)
            np.testing.assert_array_equal(host(out), want)

    def test_isa_constants_are_the_isa_enums(self):
        import nki.isa as nisa
        from nki.isa import constants
        from nki.isa.constants import dge_mode, oob_mode

        self.assertIs(oob_mode.skip, nisa.oob_mode.skip)
        self.assertIs(dge_mode, nisa.dge_mode)
        self.assertIs(constants.matmul_perf_mode, nisa.matmul_perf_mode)

    def test_a_dynamic_start_out_of_bounds_is_skipped_under_oob_skip(self):
        x = RNG.standard_normal((5, 8))
        offsets = np.array([3, -1000000, 0, 7, 6])  # rows 1 and 3 fall outside an output of 7 rows
        out = host(fake.launch(ak.place_rows, [[hbm(x), hbm(offsets, nl.int32), 7]])[0])
        want = np.full((7, 8), -1.0)
        for r, o in enumerate(offsets):
            if 0 <= o < 7:
                want[o] = x[r].astype(np.float32)
        np.testing.assert_array_equal(out, want)

    def test_a_dynamic_start_out_of_bounds_is_an_error_without_skip(self):
        import nki.isa as nisa

        @fake.jit
        def strict(x, offset):
            out = nl.ndarray((4, 8), dtype=x.dtype, buffer=nl.shared_hbm)
            reg = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
            nisa.dma_copy(dst=reg, src=offset)
            nisa.dma_copy(dst=out.ap(pattern=[[8, 1], [1, 8]], scalar_offset=reg, indirect_dim=0), src=x)
            return out

        with self.assertRaisesRegex(Exception, "scalar_offset 9 puts row 0 .* outside"):
            fake.launch(strict, [[hbm(np.ones((1, 8))), hbm(np.array([[9]]), nl.int32)]])

    def test_a_pattern_past_the_end_is_refused_only_when_used(self):
        x = RNG.standard_normal((128, 12))
        out = host(fake.launch(ak.column_pairs, [[hbm(x), 3]])[0])
        np.testing.assert_allclose(out, x.astype(np.float32).reshape(128, 4, 3).sum(axis=2), rtol=1e-6, atol=1e-6)

        @fake.jit
        def reads_past_the_end(x):
            t = nl.load(x)
            res = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=res, op=nl.add, data=t.ap(pattern=[[12, 128], [1, 3]], offset=12), axis=1)
            return x

        import nki.isa as nisa
        with self.assertRaisesRegex(Exception, "outside"):
            fake.launch(reads_past_the_end, [[hbm(x)]])

    def test_double_row_matmul_contracts_over_partitions_and_the_row_pair(self):
        import ml_dtypes

        a = RNG.standard_normal((256, 64)).astype(ml_dtypes.float8_e4m3).astype(np.float64)
        b = RNG.standard_normal((256, 96)).astype(ml_dtypes.float8_e4m3).astype(np.float64)
        out = fake.launch(ak.fp8_matmul_double_row, [[hbm(a, nl.float8_e4m3), hbm(b, nl.float8_e4m3)]])[0]
        np.testing.assert_allclose(host(out), a.T @ b, rtol=1e-5, atol=1e-4)
        with self.assertRaisesRegex(Exception, "double_row needs NeuronCore-v3"):
            fake.launch(ak.fp8_matmul_double_row, [[hbm(a, nl.float8_e4m3), hbm(b, nl.float8_e4m3)]],
                        generation="trn1")

    def test_a_psum_tensor_spans_banks_and_each_takes_its_banks(self):
        a, b = RNG.standard_normal((128, 96)), RNG.standard_normal((128, 1024))
        out = fake.launch(ak.wide_psum_matmul, [[hbm(a), hbm(b)]])[0]
        want = a.astype(np.float32).astype(np.float64).T @ b.astype(np.float32).astype(np.float64)
        np.testing.assert_allclose(host(out), want, rtol=1e-5, atol=1e-4)
        import nki.isa as nisa

        @fake.jit
        def banks(x, tensors, width):
            """`tensors` PSUM tensors of `width` fp32 columns, all written before any is read."""
            t = nl.load(x)
            held = []
            for _ in range(tensors):
                p = nl.ndarray((128, width), dtype=nl.float32, buffer=nl.psum)
                nisa.memset(dst=p, value=1.0)
                held.append(p)
            total = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=total, value=0.0)
            for p in held:
                part = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_reduce(dst=part, op=nl.add, data=p, axis=1)
                nisa.tensor_tensor(dst=total, data1=total, data2=part, op=nl.add)
            return t

        x = hbm(np.zeros((128, 1)))
        fake.launch(banks, [[x, 4, 1024]])  # 4 tensors of 2 banks: all 8 banks
        fake.launch(banks, [[x, 1, 4096]])  # one tensor over all of PSUM
        with self.assertRaisesRegex(Exception, "PSUM capacity"):
            fake.launch(banks, [[x, 5, 1024]])
        with self.assertRaisesRegex(Exception, r"needs 16388 B per partition, more than PSUM holds on trn2 "
                                               r"\(8 banks of 2048 B\)"):
            fake.launch(banks, [[x, 1, 4097]])


class PlacementTest(unittest.TestCase):
    """Tiles placed at shared addresses, as the NKI library places its PSUM and SBUF
    buffers: reuse is fine once a tile's data is read, and a write over data
    another tile still needs is reported."""

    def test_banked_matmul_reuses_banks_and_accumulates_onto_its_memset(self):
        a, b = RNG.standard_normal((384, 128)), RNG.standard_normal((384, 2048))
        want = a.astype(np.float32).astype(np.float64).T @ b.astype(np.float32).astype(np.float64)
        for generation in ("trn1", "trn2", "trn3"):
            for n_banks, ahead in ((1, False), (2, True), (3, False)):
                out = fake.launch(ak.banked_matmul, [[hbm(a), hbm(b), n_banks, ahead]], generation=generation)[0]
                np.testing.assert_allclose(host(out), want, rtol=1e-5, atol=1e-4)

    def test_zeroing_the_next_block_in_the_bank_still_being_read_is_a_hazard(self):
        a, b = RNG.standard_normal((128, 128)), RNG.standard_normal((128, 1024))
        with self.assertRaises(Exception) as cm:
            fake.launch(ak.banked_matmul, [[hbm(a), hbm(b), 1, True]])
        msg = str(cm.exception)
        for part in ("nisa.tensor_copy (__init__.py:", "reads 'tensor' (address (0, 0)) [128, 512] float32, but bytes "
                     "it wrote (at nisa.nc_matmul (__init__.py:", "were overwritten through 'tensor' (address (0, 0)) "
                     "[128, 512] float32 (at nisa.memset (__init__.py:"):
            self.assertIn(part, msg)


class CommandLineTest(unittest.TestCase):
    """`python -m nki_harness run` runs the hand-written package as it runs ours."""

    def harness(self, *args):
        return subprocess.run([sys.executable, "-m", "nki_harness", *args], cwd=PACKAGE.parents[1],
                              capture_output=True, text=True, timeout=120)

    def test_help_documents_any_package(self):
        r = self.harness("run", "--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        for phrase in ("any NKI 2.x package", "written by hand", "SPEC.json", "nki_packages/hand_written",
                       "compare a hand-written NKI kernel with"):
            self.assertIn(phrase, " ".join(r.stdout.split()))

    def test_runs_hand_written_kernels(self):
        x = RNG.standard_normal((64, 32)).astype(np.float32)
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            np.save(tmp / "x.npy", x)
            for kernel, lnc, extra in (("scaled_softmax", 1, [{"float": 2.0}]), ("swap_halves", 2, [])):
                spec = tmp / f"{kernel}.json"
                spec.write_text(json.dumps({"kernel": kernel, "lnc": lnc,
                                            "args": [[{"npy": "x.npy", "dtype": "float32"}, *extra]]}))
                r = self.harness("run", "--package", str(PACKAGE), "--spec", str(spec), "--out", str(tmp / kernel))
                self.assertEqual(r.returncode, 0, r.stderr)
            soft = np.load(tmp / "scaled_softmax" / "rank0_out0.npy").astype(np.float64)
            z = np.exp(2.0 * x - 2.0 * x.max(axis=1, keepdims=True))
            np.testing.assert_allclose(soft, z / z.sum(axis=1, keepdims=True), rtol=2e-6, atol=1e-7)
            np.save(tmp / "b.npy", x[:32, :8])
            spec = tmp / "mm.json"
            spec.write_text(json.dumps({"kernel": "matmul_via_identity", "args": [[
                {"npy": "x.npy", "dtype": "float32"}, {"npy": "b.npy", "dtype": "float32"}]]}))
            r = self.harness("run", "--package", str(PACKAGE), "--spec", str(spec), "--out", str(tmp / "mm"))
            self.assertEqual(r.returncode, 0, r.stderr)
            listing = json.loads((tmp / "mm" / "result.json").read_text())["ranks"][0]
            self.assertEqual([e["shape"] for e in listing], [[64, 8], [32, 64]])
            np.testing.assert_allclose(np.load(tmp / "mm" / "rank0_out0.npy"),
                                       x.astype(np.float64) @ x[:32, :8].astype(np.float64), rtol=1e-5, atol=1e-5)
            swapped = np.load(tmp / "swap_halves" / "rank0_out0.npy").astype(np.float64)
            top, bottom = x[:32].astype(np.float64), x[32:].astype(np.float64)
            np.testing.assert_allclose(swapped, np.concatenate([2 * bottom + top, 2 * top + bottom]), rtol=1e-6)


if __name__ == "__main__":
    unittest.main()
